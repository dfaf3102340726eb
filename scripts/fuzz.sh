#!/usr/bin/env bash
# The fuzz gate (make fuzz; CONTRIBUTING.md, "Fuzzing"): builds the libFuzzer targets (fuzz/NAME_fuzz.cc)
# with clang in BUILD (configured once: RelWithDebInfo, -DARBITER_FUZZ=ON, no tests, no benchmarks;
# only the fuzzers and the libraries they link are built), then runs each for FUZZ_SECONDS over a
# scratch copy of its seeds (fuzz/corpus/NAME/) and its regressions (fuzz/regressions/NAME/), JOBS
# at a time. Fails on any crash, leak, timeout, out-of-memory or undefined-behaviour report: the
# input that caused it is kept as BUILD/fuzz-run/NAME/crash-... (or leak-, timeout-, oom-), with
# the report in BUILD/fuzz-run/NAME/log.
#   scripts/fuzz.sh [BUILD] [NAME...]         # default build-fuzz, every target
#   FUZZ_SECONDS=600 scripts/fuzz.sh build-fuzz job_spec quota
# FUZZ_CXX picks the compiler (default clang++-16); FUZZ_ARGS adds libFuzzer flags (e.g. -runs=N);
# FUZZ_RUN the scratch folder (default BUILD/fuzz-run).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-fuzz}
shift || true
seconds=${FUZZ_SECONDS:-30}
jobs=${JOBS:-$(nproc)}
cxx=${FUZZ_CXX:-clang++-16}
read -r -a extra <<<"${FUZZ_ARGS:-}"

if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DARBITER_FUZZ=ON -DARBITER_TESTS=OFF -DARBITER_BENCH=OFF
fi
cmake --build "$build" -j "$jobs" --target arbiter_fuzz

if [ $# -gt 0 ]; then
  names=("$@")
else
  names=()
  for f in fuzz/*_fuzz.cc; do
    n=$(basename "$f" _fuzz.cc)
    names+=("$n")
  done
fi

run=${FUZZ_RUN:-$build/fuzz-run}  # FUZZ_RUN: another scratch folder, for a run beside this one
rm -rf "$run"
mkdir -p "$run"
# Undefined behaviour halts (the build has -fno-sanitize-recover=all); reports carry a stack.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
# Stacks with function names and lines: clang 16 ships no llvm-symbolizer of its own; any will do.
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ]; then
  for s in llvm-symbolizer-16 llvm-symbolizer llvm-symbolizer-14; do
    if command -v "$s" >/dev/null; then
      ASAN_SYMBOLIZER_PATH=$(command -v "$s")
      export ASAN_SYMBOLIZER_PATH
      break
    fi
  done
fi

fuzz_one() {
  local name=$1 dir="$run/$1"
  mkdir -p "$dir/corpus"
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$dir/corpus/"
  local inputs=("$dir/corpus")
  [ -d "fuzz/regressions/$name" ] && inputs+=("fuzz/regressions/$name")
  local status=0
  # Inputs up to 8 KB (the largest seed is about 7 KB); a longer regression input is cut to that here
  # and run whole by tests/fuzz/regressions_test.cc.
  "$build/${name}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$dir/" "${extra[@]}" "${inputs[@]}" \
    >"$dir/log" 2>&1 || status=$?
  # A report that did not stop the run still fails it.
  if [ $status -eq 0 ] && grep -qE 'runtime error:|ERROR: (Address|Leak)Sanitizer' "$dir/log"; then
    status=1
  fi
  local execs rate
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$dir/log" | tail -1)
  if [ $status -eq 0 ]; then
    printf 'fuzz: %-16s ok      %10s runs %8s exec/s\n' "$name" "${execs:-?}" "${rate:-?}"
  else
    printf 'fuzz: %-16s FAILED  (exit %d; %s/log)\n' "$name" "$status" "$dir"
    grep -E -A40 '^==[0-9]+==ERROR|runtime error:|fuzz check failed|deadly signal|ERROR: libFuzzer' \
      "$dir/log" | head -60 || tail -40 "$dir/log"
    ls "$dir" | grep -E '^(crash|leak|timeout|oom|slow-unit)-' | sed "s|^|fuzz:   input: $dir/|" || true
  fi
  return $status
}

echo "fuzz: ${#names[@]} targets, ${seconds} s each, ${jobs} at a time"
failed=()
pids=()
declare -A pid_name
for name in "${names[@]}"; do
  if [ ! -x "$build/${name}_fuzz" ]; then
    echo "fuzz: no target $name (fuzz/${name}_fuzz.cc)"
    exit 2
  fi
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$name" &
  pid_name[$!]=$name
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || failed+=("${pid_name[$pid]}")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (CONTRIBUTING.md, \"Fuzzing\": each input becomes a regression)"
  exit 1
fi
echo "fuzz: every target ran ${seconds} s without a report"
