#!/usr/bin/env bash
# The Debian package, as an operator meets it (make package-check; a CI gate). As root on Debian
# 12, with the package made by `make package` in BUILD (default build):
#   1. installs it with apt (apt-get install ./BUILD/arbiter_VERSION_ARCH.deb);
#   2. checks the installed systemd units with systemd-analyze verify;
#   3. runs the installed `arbiter --version`, which must print the package's version;
#   4. starts a server from the installed files as its unit does (the unit's ExecStart with the
#      installed configuration and its generated tokens, as the arbiter user; without systemd as
#      PID 1, as in a container, the process is started directly), checks that /healthz answers
#      and that the generated admin token is taken, and stops it;
#   5. purges the package and checks that its files, its configuration and its state are gone.
# It refuses to run where arbiter is installed already, and leaves the machine as it found it
# (the arbiter user is removed again when the check made it).
set -euo pipefail
build=${1:-build}
start=$SECONDS

step() { echo "== $* (at $((SECONDS - start)) s)"; }
fail() {
  echo "package-check: FAIL: $*" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "run as root (it installs and purges the package)"
if dpkg-query -W -f='${Status}' arbiter 2>/dev/null | grep -q 'ok installed'; then
  fail "the arbiter package is installed already; this check installs and purges it"
fi
deb=$(ls -t "$build"/arbiter_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || fail "no $build/arbiter_*.deb: run make package"
deb=$(realpath "$deb")
had_user=0
getent passwd arbiter >/dev/null && had_user=1

server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  if dpkg-query -W arbiter >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq arbiter >/dev/null 2>&1 || true
  fi
  if [ "$had_user" -eq 0 ] && getent passwd arbiter >/dev/null; then
    userdel arbiter 2>/dev/null || true
    getent group arbiter >/dev/null && groupdel arbiter 2>/dev/null || true
  fi
  rm -rf "${work:-}"
}
trap cleanup EXIT
work=$(mktemp -d)

step "install $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$deb" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get install"; }
dpkg-query -L arbiter >"$work/files"
version=$(dpkg-query -W -f='${Version}' arbiter)
getent passwd arbiter >/dev/null || fail "no arbiter user after installation"
for f in /etc/arbiter/tokens/admin /etc/arbiter/tokens/join; do
  [ -s "$f" ] || fail "$f: not made at installation"
  [ "$(stat -c '%a %U' "$f")" = "600 arbiter" ] || fail "$f: $(stat -c '%a %U' "$f"), expected 600 arbiter"
done

units=(/usr/lib/systemd/system/arbiter-server.service /usr/lib/systemd/system/arbiter-agent.service)
step "systemd-analyze verify ${units[*]}"
systemd-analyze verify "${units[@]}" 2>&1 | tee "$work/verify.log"
# verify reports problems of the units on stderr and in its status; nothing about them may show.
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "systemd-analyze verify"
! grep -q 'arbiter-' "$work/verify.log" || fail "systemd-analyze verify reported on the units"

step "arbiter --version"
out=$(/usr/bin/arbiter --version)
echo "$out"
[[ "$out" == *"$version"* ]] || fail "arbiter --version: '$out' does not name the package's version $version"
man_pages=$(grep -c '^/usr/share/man/man1/arbiter.*\.1\.gz$' "$work/files" || true)
[ "$man_pages" -ge 10 ] || fail "$man_pages man pages installed, expected arbiter(1) and one per command"

step "the server as its unit starts it"
exec_start=$(sed -n 's/^ExecStart=//p' "${units[0]}")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# As systemd would: the state directory, the options of /etc/default/arbiter-server, the user.
install -d -m 0700 -o arbiter -g arbiter /var/lib/arbiter
ARBITER_SERVER_OPTS="--listen 127.0.0.1:$port"
read -r -a argv <<<"${exec_start//\$ARBITER_SERVER_OPTS/$ARBITER_SERVER_OPTS}"
echo "${argv[*]}"
(cd /var/lib/arbiter && exec setpriv --reuid arbiter --regid arbiter --init-groups "${argv[@]}") \
  >"$work/server.log" 2>&1 &
server_pid=$!
healthy=0
for _ in $(seq 100); do
  if { exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
    printf 'GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n' >&3
    IFS= read -r status <&3 || true
    exec 3>&-
    [[ "$status" == *" 200 "* ]] && healthy=1 && break
  fi
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
[ "$healthy" -eq 1 ] || { cat "$work/server.log"; fail "the installed server did not answer /healthz"; }
echo "/healthz: $status"
head -n 1 "$work/server.log"
grep -q "$version" <(head -n 1 "$work/server.log") || fail "the server's first line does not name $version"
/usr/bin/arbiter queues --server "http://127.0.0.1:$port" --token-file /etc/arbiter/tokens/admin ||
  fail "the installed admin token was refused"
kill "$server_pid"
wait "$server_pid" || true
server_pid=
[ "$(stat -c '%U' /var/lib/arbiter/arbiter.db)" = arbiter ] || fail "the store is not the arbiter user's"

step "purge"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq arbiter >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get purge"; }
while IFS= read -r f; do
  [ -d "$f" ] && continue  # folders the package shares (/usr/bin) stay
  [ ! -e "$f" ] || fail "$f is left after purge"
done <"$work/files"
for f in /etc/arbiter /etc/default/arbiter-server /var/lib/arbiter /var/lib/arbiter-agent; do
  [ ! -e "$f" ] || fail "$f is left after purge"
done
echo "package-check: ok ($(basename "$deb"), $((SECONDS - start)) s)"
