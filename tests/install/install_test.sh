#!/usr/bin/env bash
# `cmake --install` of a build (ctest install_destdir, install_relocated): what an operator and the
# Debian package get. Needs no root: it installs under a temporary folder.
#   tests/install/install_test.sh BUILD VERSION destdir|relocated
# destdir:   DESTDIR=TMP cmake --install BUILD --prefix /usr, as the package is made: the programs,
#            the man pages (non-empty, naming the commands' options), the units (naming
#            /usr/bin/arbiter and /etc/arbiter), the configuration (which loads), the examples,
#            the sysusers file; the installed `arbiter --version` prints VERSION.
# relocated: cmake --install BUILD --prefix TMP: the configuration in TMP/etc and units that name
#            TMP/bin/arbiter and TMP/etc/arbiter.
set -euo pipefail
build=$1 version=$2 mode=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
has() {  # FILE TEXT...: FILE exists, is not empty and holds every TEXT
  local file=$1
  shift
  [ -s "$file" ] || fail "$file: missing or empty"
  local text
  for text in "$@"; do
    grep -qF -- "$text" "$file" || fail "$file: no '$text'"
  done
}

if [ "$mode" = destdir ]; then
  DESTDIR=$tmp/root cmake --install "$build" --prefix /usr >"$tmp/install.log" ||
    { cat "$tmp/install.log"; fail "cmake --install"; }
  root=$tmp/root usr=$tmp/root/usr etc=$tmp/root/etc bindir=/usr/bin sysconfdir=/etc
else
  cmake --install "$build" --prefix "$tmp/opt" >"$tmp/install.log" ||
    { cat "$tmp/install.log"; fail "cmake --install"; }
  root=$tmp/opt usr=$tmp/opt etc=$tmp/opt/etc bindir=$tmp/opt/bin sysconfdir=$tmp/opt/etc
fi

# The programs, side by side (the front runs arbiter-full from its own folder).
[ -x "$usr/bin/arbiter" ] && [ -x "$usr/bin/arbiter-full" ] || fail "bin/arbiter, bin/arbiter-full"
out=$("$usr/bin/arbiter" --version)
[ "$out" = "arbiter $version" ] || [[ "$out" == "arbiter $version+g"* ]] ||
  fail "installed arbiter --version: '$out', expected arbiter $version"
# A command the front hands to arbiter-full, from the installed folder.
"$usr/bin/arbiter" token new | grep -q '^token_sha256: ' || fail "installed arbiter token new"

# The units name the installed program and configuration.
units=$usr/lib/systemd/system
has "$units/arbiter-server.service" \
  "ExecStart=$bindir/arbiter server --config $sysconfdir/arbiter/cluster.yaml --data /var/lib/arbiter" \
  "User=arbiter" "StateDirectory=arbiter" "Restart=on-failure" "EnvironmentFile=-$sysconfdir/default/arbiter-server"
has "$units/arbiter-agent.service" "ExecStart=$bindir/arbiter agent --server" \
  "--token-file \${ARBITER_TOKEN_FILE}" "ARBITER_TOKEN_FILE=$sysconfdir/arbiter/tokens/join" \
  "User=arbiter" "StateDirectory=arbiter-agent" "Restart=on-failure" "KillMode=process"
! grep -q '@[A-Z]*@' "$units"/*.service || fail "a unit has a placeholder left"

# The configuration and the services' options.
has "$etc/arbiter/cluster.yaml" "token_file: tokens/admin" "token_file: tokens/join"
has "$etc/default/arbiter-server" "ARBITER_SERVER_OPTS"
has "$etc/default/arbiter-agent" "ARBITER_SERVER" "ARBITER_NODE" "ARBITER_TOKEN_FILE"
# It loads, once the tokens the package makes at installation are there.
mkdir -p "$etc/arbiter/tokens"
"$usr/bin/arbiter" token new | sed -n 's/^token: *//p' >"$etc/arbiter/tokens/admin"
"$usr/bin/arbiter" token new | sed -n 's/^token: *//p' >"$etc/arbiter/tokens/join"
"$usr/bin/arbiter" lint --strict --config "$etc/arbiter/cluster.yaml" >"$tmp/lint.log" 2>&1 ||
  { cat "$tmp/lint.log"; fail "the installed configuration does not pass lint --strict"; }

has "$usr/lib/sysusers.d/arbiter.conf" "u arbiter"
has "$usr/share/doc/arbiter/examples/cluster.yaml" "nodes:"
has "$usr/share/doc/arbiter/examples/jobs.yaml" "jobs:"
has "$usr/share/doc/arbiter/README.md" "# Arbiter"

# Man pages: arbiter(1) and one per command, from the commands' --help.
man=$usr/share/man/man1
for page in arbiter arbiter-server arbiter-agent arbiter-submit arbiter-jobs arbiter-sim \
  arbiter-plan arbiter-lint arbiter-token; do
  [ -s "$man/$page.1.gz" ] || fail "$man/$page.1.gz: missing or empty"
  zcat "$man/$page.1.gz" >"$tmp/$page.1"
  has "$tmp/$page.1" ".TH" ".SH NAME" "$version"
done
has "$tmp/arbiter.1" "server" "agent" "submit" "\-\-version"
has "$tmp/arbiter-server.1" "\-\-config" "\-\-data" "\-\-listen" "\-\-tls\-cert"
has "$tmp/arbiter-agent.1" "\-\-server" "\-\-token\-file" "\-\-work\-dir"
has "$tmp/arbiter-submit.1" "\-\-queue"
echo "ok: $mode install in $root"
