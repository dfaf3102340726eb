#!/usr/bin/env bash
# Installs the Debian packages Arbiter needs to build and test. Idempotent: installs only what is
# missing, so a machine that has everything is left untouched (and no network is needed).
set -euo pipefail

packages=(
  g++ cmake ninja-build make pkg-config
  libfmt-dev libcli11-dev libyaml-cpp-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev librapidcheck-dev libbenchmark-dev
  libsqlite3-dev libcpp-httplib-dev
  # The PostgreSQL store (libpq, the C client library) and the server its tests and benchmarks
  # start on their own (initdb, pg_ctl from /usr/lib/postgresql/15/bin).
  libpq-dev postgresql-15 postgresql-client-15
  # The server's event-driven HTTP layer and the load generator (Boost.Asio and Boost.Beast,
  # header only).
  libboost1.81-dev
  # TLS for the server, the agents and the clients (cpp-httplib is built with it), token digests
  # and node credentials.
  libssl-dev openssl
  # The quality gates: make format-check, make tidy (run-clang-tidy comes with clang-tidy), and the
  # sanitizer runtimes g++ 12 links with -fsanitize (g++ already depends on them; named here so
  # that the gates say what they need).
  clang-format clang-tidy libasan8 libubsan1 libtsan2
  # make fuzz: libFuzzer targets (clang with its fuzzer, ASan and UBSan runtimes).
  clang-16 libclang-rt-16-dev
  # The dashboard's browser tests (tests/ui): headless Chromium, driven by playwright-core (npm).
  chromium
  # The server's metrics (prometheus-cpp) and their check in the tests (promtool, from prometheus);
  # the API contract tests validate the server's answers against docs/openapi.yaml.
  prometheus-cpp-dev prometheus python3-jsonschema python3-yaml
  # Packaging (make package): man pages from the commands' own help, the systemd units' check.
  help2man dpkg-dev systemd
  # The Python module (pybind11) and its package (pip install python/, no download).
  pybind11-dev python3-dev python3-setuptools python3-wheel python3-pip python3-venv python3-pandas
)
# Node.js and npm for the browser tests' driver: from Debian only where no `node` is installed.
if ! command -v node >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
  else
    SUDO=
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The browser tests' npm packages, exactly as tests/ui/package-lock.json says (npm ci), only when
# node_modules is missing or older than the lock file: a machine that has them needs no network.
ui="$(cd "$(dirname "$0")/.." && pwd)/tests/ui"
if [ ! -d "$ui/node_modules" ] || [ "$ui/package-lock.json" -nt "$ui/node_modules" ]; then
  echo "install-deps: npm ci in tests/ui"
  (cd "$ui" && npm ci --no-audit --no-fund --loglevel=error)
  touch "$ui/node_modules"
fi
