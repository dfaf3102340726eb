#!/usr/bin/env bash
# clang-tidy (Debian's, from scripts/install-deps.sh) with the root's .clang-tidy over the
# project's own sources, src/ and bench/, and the project's headers they include (make tidy):
#   scripts/tidy.sh [BUILD_DIR] [FILE_REGEX]
# Configures BUILD_DIR (default build-tidy) for its compile_commands.json only: nothing is built.
# The tests are left out by default (CI's time; the checks aim at the product's code); FILE_REGEX,
# matched against each source's absolute path, chooses others, e.g. '/tests/'.
# Any finding fails the run (WarningsAsErrors in .clang-tidy). JOBS sets the parallelism.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build-tidy}
files=${2:-^$root/(src/|bench/)}
jobs=${JOBS:-$(nproc)}
tidy=${CLANG_TIDY:-clang-tidy}
run_tidy=${RUN_CLANG_TIDY:-run-clang-tidy}

cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
echo "tidy: $("$tidy" --version | grep -o 'LLVM version .*'), $jobs jobs, sources matching $files"
start=$SECONDS
# run-clang-tidy prints each command before its findings; keep the findings only.
set +e
"$run_tidy" -clang-tidy-binary "$(command -v "$tidy")" -p "$build" -j "$jobs" -quiet "$files" \
  2>&1 | grep -vE "^$(command -v "$tidy") |^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$|^$"
status=${PIPESTATUS[0]}
set -e
echo "tidy: took $((SECONDS - start)) s"
if [ "$status" -ne 0 ]; then
  echo "tidy: findings above (checks in .clang-tidy)" >&2
fi
exit "$status"
