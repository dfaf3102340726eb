#!/usr/bin/env bash
# Writes the arbiter command's man pages into OUTDIR from the commands' own --help (help2man):
# arbiter.1.gz, and arbiter-COMMAND.1.gz for each command `arbiter --help` lists. Run at build time
# (cmake/install.cmake); `cmake --install` installs them in share/man/man1.
#   scripts/manpages.sh BUILD/arbiter OUTDIR
set -euo pipefail
arbiter=$(realpath "$1")
out=$2
mkdir -p "$out"
rm -f "$out"/*.1.gz
version=$("$arbiter" --version)  # "arbiter VERSION"
version=${version#arbiter }
wrappers=$(mktemp -d)
trap 'rm -rf "$wrappers"' EXIT

page() {  # NAME PROGRAM DESCRIPTION
  help2man --no-info --no-discard-stderr --section 1 --source "Arbiter $version" \
    --manual "Arbiter" --version-string "$version" --name "$3" --output "$out/$1.1" "$2"
  gzip -9nf "$out/$1.1"
}

# The commands and their one-line descriptions, from the Subcommands section of the help.
commands=$("$arbiter" --help | awk '/^Subcommands:/ { on = 1; next }
  on && /^  [a-z]/ { name = $1; $1 = ""; sub(/^ +/, ""); print name "\t" $0; next }
  on && /^[^ ]/ { on = 0 }')
[ -n "$commands" ] || { echo "manpages: no commands in '$arbiter --help'" >&2; exit 1; }

page arbiter "$arbiter" "a GPU-cluster job scheduler"
while IFS=$'\t' read -r name description; do
  # help2man runs a program: one that is `arbiter NAME`.
  printf '#!/bin/sh\nexec "%s" %s "$@"\n' "$arbiter" "$name" >"$wrappers/arbiter-$name"
  chmod +x "$wrappers/arbiter-$name"
  page "arbiter-$name" "$wrappers/arbiter-$name" "$description"
done <<<"$commands"
