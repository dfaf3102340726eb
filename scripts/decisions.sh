#!/usr/bin/env bash
# Writes every decision the project's refactors must leave unchanged into one folder, so that two
# builds can be compared with `diff -r`:
#   scripts/decisions.sh BUILD_DIR OUT_DIR
# - the plan fingerprints (and unplaced counts by stage) of the 1k, 10k and 100k benchmark cycles;
# - the simulator benchmark's `# sim:` lines and the preemption benchmark's placed share;
# - the openb fill experiment (seeds 42 and 7, three policies, the default list);
# - `make run`'s table (the mixed-cluster case study) and the JSON of every shipped scenario.
# Timings are left out: only decisions are written.
set -euo pipefail
build=${1:?usage: scripts/decisions.sh BUILD_DIR OUT_DIR}
out=${2:?usage: scripts/decisions.sh BUILD_DIR OUT_DIR}
root="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$out"

for size in 1k 10k 100k; do
  "$build/arbiter_bench" --only "$size" --no-clock | grep -E '^# .*(fingerprint|unplaced by stage)' \
    > "$out/cycle-$size.txt"
done
"$build/arbiter_bench" --only sim | grep -E '^# sim' > "$out/sim.txt"
"$build/arbiter_bench" --only preempt | grep -E '^BENCH preempt_placed_pct' > "$out/preempt.txt"

openb="$root/data/traces/openb"
for seed in 42 7; do
  "$build/arbiter" fill --nodes "$openb/openb_node_list_gpu_node.csv" \
    --pods "$openb/openb_pod_list_default.csv" --seeds 1 --seed "$seed" \
    --placement arbiter --placement fgd --placement best-fit --quiet \
    --json "$out/fill-$seed.json" > /dev/null
done

# (The first line says how long the run took: left out.)
"$build/arbiter" sim "$root/scenarios/mixed-cluster.yaml" | sed -E 's/ events in [0-9.]+ s/ events/' \
  > "$out/make-run.txt"
for scenario in "$root"/scenarios/*.yaml; do
  "$build/arbiter" sim "$scenario" --json "$out/sim-$(basename "$scenario" .yaml).json" > /dev/null
done
echo "decisions written to $out"
