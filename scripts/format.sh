#!/usr/bin/env bash
# The format gate: clang-format (Debian's, from scripts/install-deps.sh) over every C++ file that
# git knows (tracked, or new and not ignored), with the root's .clang-format.
#   scripts/format.sh --check   # lists every file that differs and fails if any does (make format-check)
#   scripts/format.sh --fix     # rewrites them in place (make format)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:---check}
clang_format=${CLANG_FORMAT:-clang-format}

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.h' '*.cc' | sort -u)
existing=()
for f in "${files[@]}"; do
  [ -f "$f" ] && existing+=("$f")
done

if [ ${#existing[@]} -eq 0 ]; then
  echo "format: no C++ files"
  exit 0
fi

case "$mode" in
  --fix)
    "$clang_format" -i --style=file "${existing[@]}"
    ;;
  --check)
    # One clang-format process for every file (a process per file takes minutes on a loaded
    # machine); each file that differs is named by its first difference.
    status=0
    out=$("$clang_format" --dry-run -Werror --ferror-limit=1 --style=file "${existing[@]}" 2>&1) ||
      status=$?
    mapfile -t differ < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: error: code should be clang-formatted' \
      <<<"$out" | cut -d: -f1 | sort -u)
    if [ ${#differ[@]} -gt 0 ]; then
      printf '%s\n' "${differ[@]}"
      echo "format-check: ${#differ[@]} of ${#existing[@]} files differ from" \
        "$("$clang_format" --version | sed 's/.*version /clang-format /');" \
        "'make format' (scripts/format.sh --fix) rewrites them" >&2
      exit 1
    fi
    if [ "$status" -ne 0 ]; then
      echo "$out" >&2
      echo "format-check: clang-format failed (exit $status)" >&2
      exit "$status"
    fi
    echo "format-check: ${#existing[@]} files formatted"
    ;;
  *)
    echo "usage: scripts/format.sh --check|--fix" >&2
    exit 2
    ;;
esac
