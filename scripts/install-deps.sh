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
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
