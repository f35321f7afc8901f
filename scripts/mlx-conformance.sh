#!/usr/bin/env bash
# Runs the op conformance table on an mlx configuration against lathe:cpu (build/test_ops -b):
#
#   scripts/mlx-conformance.sh [config [filter...]]     (default config mlx:cpu,dynamic)
#
# With filters, only the tests whose names contain one of them run (test_ops NAME, in turn).
# Rows the device reports UNIMPLEMENTED (dtypes MLX lacks, the quantized ops) are counted skips,
# and so are rows about lathe:cpu itself (its capability lists, its count of specialisations per
# binding of the dynamic axes, which mlx:dynamic does not make): the rows skip with their reason
# (tests/ops), so a green run prints 0 failed. Any failure fails the script.
set -uo pipefail
cd "$(dirname "$0")/.."
config=${1:-mlx:cpu,dynamic}
# MLX multiplies Float32 matrices (and convolutions) with TF32 tensor cores on CUDA by default:
# about 3 decimal digits, beyond the table's Float32 tolerances. The table checks Float32 itself.
case $config in *gpu*) export MLX_ENABLE_TF32=${MLX_ENABLE_TF32:-0} ;; esac
shift || true
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0 passed=0 failed=0 skipped=0 compared=0 mismatches=0
for filter in "${@:-}"; do
  # shellcheck disable=SC2086
  build/test_ops -b "$config" $filter >>"$out" 2>&1 || rc=$((rc > $? ? rc : $?))
  read -r p _ f _ s _ < <(tail -n 1 "$out")
  read -r c m < <(grep -E '^-b ' "$out" | tail -n 1 | sed -E 's/.*: ([0-9]+) outputs compared.* ([0-9]+) mismatches.*/\1 \2/')
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  compared=$((compared + ${c:-0})) mismatches=$((mismatches + ${m:-0}))
done
echo "conformance $config: $passed passed, $failed failed, $skipped skipped; $compared outputs compared with lathe:cpu," \
  "$mismatches mismatches"
if [ "$failed" -gt 0 ] || [ "$rc" -gt 1 ]; then
  grep '^FAIL' "$out" | head -50
  [ "$rc" -gt 1 ] && echo "test_ops exited with status $rc" && tail -5 "$out"
  exit 1
fi
