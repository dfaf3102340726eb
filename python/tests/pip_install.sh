#!/usr/bin/env bash
# `pip install ./python` as docs/python.md says, in a fresh virtual environment that sees the
# system's packages: --no-build-isolation (the installed setuptools), --no-index (nothing is
# downloaded), with ARBITER_BUILD_DIR naming an existing build so that nothing is compiled again.
# Then the installed package, imported from elsewhere, runs a small simulation.
#   python/tests/pip_install.sh PYTHON SOURCE_DIR BUILD_DIR
set -euo pipefail
python=$1
source_dir=$(cd "$2" && pwd)
build_dir=$(cd "$3" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$python" -m venv --system-site-packages "$tmp/venv"
# setuptools before 70.1 builds wheels only with the `wheel` package (Debian: python3-wheel).
if ! "$tmp/venv/bin/python" -c 'import wheel' 2>/dev/null &&
   ! "$tmp/venv/bin/python" -c 'import setuptools.command.bdist_wheel' 2>/dev/null; then
  echo "pip_install.sh: $python cannot build a wheel: install python3-wheel, or configure with" \
       "-DPython3_EXECUTABLE=/usr/bin/python3" >&2
  exit 1
fi
# A copy of python/, so that the build leaves nothing in the source tree.
cp -r "$source_dir/python" "$tmp/python"
rm -rf "$tmp/python/build" "$tmp/python"/*.egg-info
ARBITER_BUILD_DIR="$build_dir" "$tmp/venv/bin/pip" install --no-build-isolation --no-index \
  --disable-pip-version-check "$tmp/python"

cd "$tmp"
"$tmp/venv/bin/python" - "$source_dir" <<'PY'
import os, sys
import arbiter, arbiter.client
# The installed copy, not the source tree's nor the build's.
assert os.path.realpath(arbiter.__file__).startswith(os.path.realpath(sys.prefix)), arbiter.__file__
result = arbiter.simulate(os.path.join(sys.argv[1], "scenarios", "preemption-storm.yaml"),
                          runs=["fix"])
run = result["runs"][0]
assert result["scenario"] == "preemption-storm" and run["name"] == "fix", result
assert run["metrics"]["jobs_completed"] > 0, run["metrics"]
print("installed", arbiter.__file__, "- fix:", run["metrics"]["jobs_completed"], "jobs completed")
PY
