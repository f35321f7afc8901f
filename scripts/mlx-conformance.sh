#!/usr/bin/env bash
# Runs the op conformance table (build/test_ops) on an mlx configuration:
#
#   scripts/mlx-conformance.sh [config [filter...]]     (default config mlx:cpu,dynamic)
#
# With filters, only the tests whose names contain one of them run (test_ops NAME, in turn).
# Every row compares the device's results with the references computed in tests/ops. The table
# was written for lathe:cpu, which supports every dtype and op, so some rows fail where a device
# rightly reports UNIMPLEMENTED; until test_ops counts those as skips on any device (its -b
# mode), this script separates them: a failure is "expected" when its message names a dtype
# MLX lacks (Complex128, the packed Int/Uint 1, 2, 4), an op the device leaves UNIMPLEMENTED
# (the quantized fused ops), or one of the two rows that check lathe:cpu's own machinery (one
# specialisation per binding of the dynamic axes, which mlx:dynamic does not need; fused CPU
# regions bit-identical to unfused ones). Any other failure fails the script.
set -uo pipefail
cd "$(dirname "$0")/.."
config=${1:-mlx:cpu,dynamic}
shift || true
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
passed=0 failed=0 skipped=0
for filter in "${@:-}"; do
  # shellcheck disable=SC2086
  LATHE_TEST_BACKEND=$config build/test_ops $filter >>"$out" 2>&1 || rc=$((rc > $? ? rc : $?))
  read -r p _ f _ s _ < <(tail -n 1 "$out")
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
done
summary="$passed passed, $failed failed, $skipped skipped"
expected='Complex128|Complex on Float64|Int4|Uint4|Int2|Uint2|Int1|Uint1|not supported on mlx|MLX has no such dtype|FusedQuantizedDense: not implemented on mlx|QuantizedEmbeddingLookup: not implemented on mlx|quantized_capabilities|one specialisation per|fusion_regions_match_unfused'
n_fail=$(grep -c '^FAIL' "$out")
n_expected=$(grep '^FAIL' "$out" | grep -c -E "$expected")
other=$(grep '^FAIL' "$out" | grep -v -E "$expected")
echo "conformance $config: $summary ($n_expected of the $n_fail failures are expected: dtypes and ops mlx does not support, lathe:cpu-only checks)"
if [ -n "$other" ] || [ "$rc" -gt 1 ]; then
  echo "$other" | head -50
  [ "$rc" -gt 1 ] && echo "test_ops exited with status $rc" && tail -5 "$out"
  exit 1
fi
