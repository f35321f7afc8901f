#!/usr/bin/env bash
# Runs the op conformance table on an mlx configuration against lathe:cpu (build/test_ops -b):
#
#   scripts/mlx-conformance.sh [config [filter...]]     (default config mlx:cpu,dynamic)
#
# With filters, only the tests whose names contain one of them run (test_ops NAME, in turn).
# Rows the device reports UNIMPLEMENTED (dtypes MLX lacks, the quantized ops) are counted skips.
# A few failures are about lathe:cpu itself rather than the device, and are listed apart:
#  - capability rows that assert lathe:cpu's capabilities on the backend under test
#    (index_capabilities, quantized_capabilities: Complex128, packed dtypes, quantized ops);
#  - rows that count lathe:cpu's specialisations per binding of the dynamic axes
#    (mlx:dynamic needs none: one plan serves every binding);
#  - Float32/Complex64 sums over long axes compared with lathe:cpu's within the default 1e-5,
#    where the rows' own checks against exact references scale the tolerance with the length
#    (dot_general_threaded, dot_general_loops_without_blas, reduce_large_shapes): a different
#    summation order, each result within the row's tolerance of the exact one.
# Any other failure fails the script.
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
apart='^FAIL (index_capabilities|quantized_capabilities) |^FAIL dynamic_axes_(concurrent_)?specialisations |^FAIL (dot_general_threaded|dot_general_loops_without_blas|reduce_large_shapes) \(reference\): .*\((Float32|Complex64)\[.*differ beyond 1e-05'
n_apart=$(grep '^FAIL' "$out" | grep -c -E "$apart")
other=$(grep '^FAIL' "$out" | grep -v -E "$apart")
echo "conformance $config: $passed passed, $failed failed, $skipped skipped; $compared outputs compared with lathe:cpu," \
  "$mismatches mismatches; $n_apart failures about lathe:cpu itself (see the script)"
if [ -n "$other" ] || [ "$rc" -gt 1 ]; then
  echo "$other" | head -50
  [ "$rc" -gt 1 ] && echo "test_ops exited with status $rc" && tail -5 "$out"
  exit 1
fi
