#!/usr/bin/env bash
# On a GPU machine (no Go needed): every lathe:cuda check in one go. Builds the C tests, then runs,
# all at once: the GPU-vs-CPU unit tests (cuda_*) and the conformance table on lathe:cuda against
# lathe:cpu, one process per test (NVRTC's first compiles are CPU-bound), JOBS at a time; and,
# from DIR/bundle.tar.xz (scripts/cuda-pack.sh), backendtest on lathe:cuda and GoMLX's suites.
# Logs go to LOGS (default DIR/logs), and into $OUT/cuda-check.tgz when $OUT is set (the device
# tool's folder of results); the summary is printed. With 2 GPUs or more the AllReduce tests run
# too (NCCL from PyTorch's nvidia-nccl wheel when present). Back where Go is, with the logs
# unpacked: GOMLX_SUITE_LOGS=<logs>/suite scripts/gomlx-suite.sh lathe:cuda counts the suites.
# Usage: scripts/cuda-check.sh DIR [JOBS]      (LATHE_CHECK_CONFIG overrides lathe:cuda, for the
# conformance table, backendtest, the suites and the unit tests that take the default)
set -uo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
cd "$(dirname "$0")/.."
dir=$1 jobs=${2:-$(nproc)} config=${LATHE_CHECK_CONFIG:-lathe:cuda}
# the unit tests that take the default configuration take this one too (tests/unit/cuda_testing.h)
[ -n "${LATHE_CHECK_CONFIG:-}" ] && export LATHE_TEST_CUDA=$config
logs=${LOGS:-$dir/logs}
mkdir -p "$logs/unit" "$logs/ops" "$logs/suite"
if [ -f "$dir/bundle.tar.xz" ]; then
  xz -dc "$dir/bundle.tar.xz" | tar -C "$dir" -xf - || exit 1
fi
if [ -z "${LATHE_NCCL_LIBRARY:-}" ]; then
  d=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)
  [ -n "$d" ] && [ -f "$d/lib/libnccl.so.2" ] && export LATHE_NCCL_LIBRARY=$d/lib/libnccl.so.2
fi
t0=$(date +%s)
make -j"$jobs" build/test_unit build/test_ops >"$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; exit 1; }
echo "cuda-check: built in $(($(date +%s) - t0)) s"
if [ -x "$dir/lathe.test" ]; then
  (LATHE_BACKENDTEST_CONFIGS=$config "$dir/lathe.test" -test.run '^TestBackendTest$' -test.v >"$logs/backendtest.log" 2>&1) &
fi
if [ -d "$dir/suite" ]; then
  (scripts/gomlx-suite-bin.sh "$config" "$dir/suite" "$logs/suite" 4 >/dev/null 2>&1) &
fi
{
  build/test_unit -l | grep '^cuda_' | sed 's/^/u /'
  build/test_ops -l | sed 's/^/o /'
} >"$logs/tests.txt"
export config logs
xargs -P "$jobs" -L1 sh -c '
  if [ "$0" = u ]; then timeout 600 build/test_unit "=$1" >"$logs/unit/$1.log" 2>&1 || echo "rc=$? $1" >>"$logs/unit/$1.log"
  else timeout 600 build/test_ops -b "$config" "=$1" >"$logs/ops/$1.log" 2>&1 || echo "rc=$? $1" >>"$logs/ops/$1.log"; fi' <"$logs/tests.txt"
wait
count() { cat "$1"/*.log 2>/dev/null | grep -E '^[0-9]+ passed, [0-9]+ failed' |
  awk -F'[ ,]+' '{p += $1; f += $3; s += $5} END {printf "%d passed, %d failed, %d skipped", p, f, s}'; }
echo "cuda-check: unit (cuda_*): $(count "$logs/unit")"
echo "cuda-check: conformance on $config: $(count "$logs/ops"); $(grep -h 'outputs compared' "$logs"/ops/*.log |
  sed -E 's/.*: ([0-9]+) outputs compared.*, ([0-9]+) mismatches; ([0-9]+) rows.*/\1 \2 \3/' |
  awk '{c += $1; m += $2; u += $3} END {printf "%d outputs compared, %d mismatches, %d rows unsupported", c, m, u}')"
grep -h -E '^(FAIL|rc=)' "$logs"/unit/*.log "$logs"/ops/*.log | head -30
[ -f "$logs/backendtest.log" ] && grep -E '^backendtest |--- FAIL' "$logs/backendtest.log" | head
[ -d "$dir/suite" ] && echo "cuda-check: GoMLX suites: $(ls "$logs/suite" | wc -l) logs in $logs/suite"
[ -n "${OUT:-}" ] && tar -czf "$OUT/cuda-check.tgz" -C "$logs" .
echo "cuda-check: $(($(date +%s) - t0)) s"
