#!/usr/bin/env bash
# Checks the layer rules of CONTRIBUTING.md on the project's own #include lines: each folder of
# src/ may include only the project headers its layer allows. Prints every line that breaks a rule
# and fails if there is one. Run by `make test` (ctest: layers) and alone:
#   scripts/layers.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# The engine library's public headers, which every layer above it may include, and the engine's
# own view of the cluster's state, which the project's drivers use (users of the library see
# Cluster, arbiter/state.h).
core_api='arbiter/(model|quantity|plan|status|state|engine|attained_service)\.h|core/state/cluster_state\.h'

# folder | what its files may include (an extended regular expression over the quoted path)
rules=(
  "include/arbiter|^arbiter/(model|quantity|plan|status|state|engine|attained_service)\.h$"
  "src/core|^(${core_api}|core/.*)$"
  "src/sim|^(${core_api}|trace/trace\.h|core/model/.*|sim/.*)$"
  "src/trace|^(arbiter/(model|quantity|status)\.h|core/model/.*|job/limits\.h|trace/.*)$"
  "src/job|^(${core_api}|core/model/.*|job/.*)$"
  "src/store|^(${core_api}|core/model/.*|job/.*|store/.*)$"
  "src/crypto|^(crypto/.*)$"
  "src/config|^(${core_api}|job/.*|core/engine/(victim_policy|stages)\.h|crypto/crypto\.h|config/.*)$"
  "src/scenario|^(${core_api}|sim/(sim|workload)\.h|trace/trace\.h|job/.*|config/.*|scenario/.*)$"
  "src/report|^(${core_api}|sim/(sim|workload|fill)\.h|trace/trace\.h|report/.*)$"
  "src/net|^(arbiter/status\.h|net/.*)$"
  "src/server|^(${core_api}|version\.h|config/.*|job/.*|store/.*|crypto/crypto\.h|net/.*|server/.*)$"
  "src/agent|^(version\.h|arbiter/status\.h|crypto/crypto\.h|net/.*|agent/.*)$"
)

status=0
for rule in "${rules[@]}"; do
  folder=${rule%%|*}
  allowed=${rule#*|}
  [ -d "$folder" ] || { echo "layers: no folder $folder (update scripts/layers.sh)"; status=1; continue; }
  while IFS= read -r line; do
    file=${line%%:*}
    header=$(sed -E 's/.*#include "([^"]+)".*/\1/' <<<"$line")
    if ! grep -Eq "$allowed" <<<"$header"; then
      echo "layers: $file includes \"$header\", which $folder may not use (CONTRIBUTING.md)"
      status=1
    fi
  done < <(grep -rHE '^#include "' "$folder" --include='*.h' --include='*.cc' | sed -E 's/:[0-9]+:/:/')
done

# include/arbiter holds the engine library's public API alone: a driver's header lives next to its
# driver (src/sim/sim.h, src/store/store.h, ...).
public='^(model|quantity|plan|status|state|engine|attained_service)\.h$'
for header in include/arbiter/*; do
  name=${header#include/arbiter/}
  grep -Eq "$public" <<<"$name" || {
    echo "layers: $header is not the engine library's public API: move it next to its driver"
    status=1
  }
done

# Every folder of src/ has a rule, so that a new one is placed in a layer when it is added.
for folder in src/*/; do
  folder=${folder%/}
  [ "$folder" = src/cli ] && continue  # the command: everything
  covered=0
  for rule in "${rules[@]}"; do [ "${rule%%|*}" = "$folder" ] && covered=1; done
  [ $covered = 1 ] || { echo "layers: $folder has no rule in scripts/layers.sh"; status=1; }
done

[ $status = 0 ] && echo "layers: every include follows the layer rules"
exit $status
