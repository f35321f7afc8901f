#!/usr/bin/env bash
# Checks the errors a user sees for a mistyped backend config in the example programs given
# (built binaries taking -backend): each must exit with status 1 and print one line (no stack
# trace) that names the fix.
#
#   scripts/config-errors-check.sh build/lathe-dataparallel [more programs...]
set -uo pipefail
bad=0
for prog in "$@"; do
  while IFS='|' read -r config want; do
    out=$("$prog" -backend "$config" 2>&1 >/dev/null)
    rc=$?
    lines=$(printf '%s\n' "$out" | wc -l)
    if [ "$rc" != 1 ] || [ "$lines" != 1 ] || ! grep -qF -- "$want" <<<"$out"; then
      echo "config-errors-check: $prog -backend '$config': status $rc, $lines lines, want one containing '$want':" >&2
      printf '%s\n' "$out" | head -20 >&2
      bad=1
    fi
  done <<'CASES'
Lathe|known: 
lathe:cpu threads=2|lathe:cpu: malformed option " threads=2"
lathe:cpu,threads=0|threads must be an integer in [1, 1024]
mlx|-tags mlx
CASES
done
[ "$bad" = 0 ] && echo "config-errors-check: one-line errors naming the fix ($*)"
exit "$bad"
