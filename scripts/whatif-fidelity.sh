#!/usr/bin/env bash
# The fidelity of `arbiter whatif` (docs/whatif.md): a seeded random workload driven through a real
# server on virtual nodes, recorded with `arbiter history`, and replayed under the server's own
# configuration; prints whatif's fidelity line and its largest differences.
#   scripts/whatif-fidelity.sh [ARBITER] [JOBS] [SEED]
# ARBITER: the arbiter command (default: arbiter on PATH); JOBS: how many (default 150); SEED: of
# the workload (default 42). WHATIF_KEEP=FILE keeps the history there; WHATIF_NO_HIGH=1 submits
# every job in the preemptible class (a fifth are in the class that evicts otherwise).
set -euo pipefail
arbiter=${1:-arbiter}
jobs=${2:-150}
RANDOM=${3:-42}
dir=$(mktemp -d)
trap 'kill "$server_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000))
cat >"$dir/cluster.yaml" <<YAML
priority_classes:
  - {name: high, value: 100, preemptible: false}
  - {name: low, value: 10, grace_period: 1s}
queues:
  - {name: research, weight: 1}
  - {name: prod, weight: 2}
nodes:
  - name: g-{i}
    count: 4
    gpus: {model: G, count: 8, memory: 80Gi}
    cpu: 64
    memory: 512Gi
server:
  tokens:
    - {name: admin, token: whatif-admin-token-01, role: admin}
  cycle_min_interval: 20ms
  cycle_period: 500ms
YAML
"$arbiter" server --config "$dir/cluster.yaml" --data "$dir/data" --listen "127.0.0.1:$port" \
  --virtual-nodes --dev >"$dir/server.log" 2>&1 &
server_pid=$!
export ARBITER_SERVER="http://127.0.0.1:$port" ARBITER_TOKEN=whatif-admin-token-01
for _ in $(seq 50); do "$arbiter" jobs >/dev/null 2>&1 && break; sleep 0.1; done
sizes=(1 1 2 2 4 8)
for i in $(seq "$jobs"); do
  queue=research; [ $((RANDOM % 3)) = 0 ] && queue=prod
  class=low; [ $((RANDOM % 5)) = 0 ] && [ -z "${WHATIF_NO_HIGH:-}" ] && class=high
  tasks=$((1 + RANDOM % 2))
  gpus=${sizes[$((RANDOM % 6))]}
  runtime=$((1000 + RANDOM % 7000))ms
  "$arbiter" submit -q "$queue" -p "$class" -n "$tasks" -g "$gpus" -r "$runtime" \
    --checkpoint-interval 500ms --name "job-$i" -- true >/dev/null
  sleep "0.$((RANDOM % 30))"
done
busy() {
  [ "$("$arbiter" jobs --json --state pending)" != "[]" ] ||
    [ "$("$arbiter" jobs --json --state running)" != "[]" ]
}
while busy; do sleep 1; done
"$arbiter" history -o "$dir/history.json"
[ -n "${WHATIF_KEEP:-}" ] && cp "$dir/history.json" "$WHATIF_KEEP"  # the history, to look into
"$arbiter" whatif --history "$dir/history.json" --config "$dir/cluster.yaml" | sed -n 1,9p
