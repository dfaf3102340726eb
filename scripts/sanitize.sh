#!/usr/bin/env bash
# Builds Arbiter with sanitizers in a folder of its own and runs the tests there:
#   scripts/sanitize.sh address,undefined [BUILD_DIR]   # every test (make asan)
#   scripts/sanitize.sh thread [BUILD_DIR]              # tests/server, tests/store, tests/agent (make tsan)
# Every target is sanitized, so the end-to-end tests start a sanitized `arbiter` (server, agent).
# Reports go to BUILD_DIR/sanitizer-logs (child processes' reports too, whatever their stderr);
# any report fails the run, even from a process whose test passed. JOBS sets the parallelism
# (default: nproc); PROPERTY_CASES the cases per property test (default 100, 1000 normally).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:?usage: scripts/sanitize.sh address,undefined|thread [BUILD_DIR]}
jobs=${JOBS:-$(nproc)}
cases=${PROPERTY_CASES:-100}
case "$kind" in
  thread) build=${2:-build-tsan}; dirs="server;store;agent;testing" ;;
  *) build=${2:-build-asan}; dirs="" ;;
esac

# -O1: a faster compile than -O2 and clearer stacks; no NDEBUG, so assertions are checked too.
# (The tests' own sources compile at -O0 in every build: ARBITER_TEST_OPTIMIZE, CMakeLists.txt.)
# -g1: line tables and function names, all a report's stack needs, at three quarters of -g's
# compile time.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DARBITER_SANITIZE="$kind" -DARBITER_BENCH=OFF \
  -DARBITER_PROPERTY_CASES="$cases" -DARBITER_TEST_DIRS="$dirs"
start=$SECONDS
cmake --build "$build" -j "$jobs"
echo "sanitize: $kind build took $((SECONDS - start)) s"

logs="$(pwd)/$build/sanitizer-logs"
rm -rf "$logs"
mkdir -p "$logs"
export ASAN_OPTIONS="log_path=$logs/asan:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1"
export UBSAN_OPTIONS="log_path=$logs/ubsan:print_stacktrace=1:halt_on_error=1"
# ThreadSanitizer reports and goes on (the process still exits with 66): a test that stopped at
# its first race would leave its server and agents running, and ctest waiting for them.
# AddressSanitizer and UndefinedBehaviorSanitizer stop at the first error (built so); the
# timeout bounds a test whose children outlive it. ignore_noninstrumented_modules: the accesses of
# what the libraries built without TSan call are ignored, their synchronisation followed
# (scripts/tsan-suppressions.txt says why).
export TSAN_OPTIONS="log_path=$logs/tsan:halt_on_error=0:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$(pwd)/scripts/tsan-suppressions.txt"
status=0
start=$SECONDS
(cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 600) || status=$?
echo "sanitize: $kind tests took $((SECONDS - start)) s"

reports=$(find "$logs" -type f | sort)
if [ -n "$reports" ]; then
  for r in $reports; do
    echo "==== $r"
    cat "$r"
  done
  echo "sanitize: $(echo "$reports" | wc -l) sanitizer report(s) in $logs" >&2
  status=1
fi
exit "$status"
