#!/usr/bin/env bash
# Sets up and runs every test of lathe: the C suites (gcc, warnings as errors, with the
# allocation-failure test), the same suites built by clang under AddressSanitizer+UndefinedBehaviorSanitizer, a
# minute of libFuzzer over the C API, the C example, the Go tests (GoMLX's backendtest compliance
# suite included), GoMLX's own test suites (go.mod's version) on lathe:cpu (scripts/gomlx-suite.sh) and
# short runs of the two GoMLX examples; also that `make install` stands alone
# (scripts/install-check.sh) and that the examples' config errors are one line naming the fix
# (scripts/config-errors-check.sh).
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
cd "$(dirname "$0")/.."
LATHE_WITH_CLANG=1 LATHE_WITH_GLOO=1 ./scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
tjobs=$((jobs > 8 ? 8 : jobs)) # test_ops -j: processes for the conformance table

# Each stage prints its time when the next begins ("=== <stage> (N s)"). Where there is more
# than one core, a stage that keeps one core busy on its own (the minute of fuzzing) runs in the
# background while the next stages build, and reports when collected (bg_wait).
t_all=$SECONDS stage="" stage_t0=$SECONDS
stage_done() { [ -z "$stage" ] || printf '=== %s (%d s)\n' "$stage" $((SECONDS - stage_t0)); }
step() {
  stage_done
  stage=$* stage_t0=$SECONDS
  printf '\n=== %s\n' "$*"
}
declare -A bg_pid bg_t0
bg_dir=$(mktemp -d)
trap 'rm -rf "$bg_dir"' EXIT
# bg NAME CMD...: runs CMD with its output in a log (inline when there is one core).
bg() {
  local name=$1
  shift
  if [ "$jobs" -gt 1 ]; then
    "$@" >"$bg_dir/$name.log" 2>&1 &
    bg_pid[$name]=$! bg_t0[$name]=$SECONDS
  else
    bg_t0[$name]=$SECONDS
    "$@" >"$bg_dir/$name.log" 2>&1 && echo 0 >"$bg_dir/$name.rc" || echo $? >"$bg_dir/$name.rc"
  fi
}
# bg_wait NAME: waits for it, prints its log and time; fails the run if it failed.
bg_wait() {
  local name=$1 rc=0
  if [ -n "${bg_pid[$name]:-}" ]; then wait "${bg_pid[$name]}" || rc=$?; else rc=$(cat "$bg_dir/$name.rc"); fi
  printf '\n=== %s (background, %d s after its start)\n' "$name" $((SECONDS - bg_t0[$name]))
  cat "$bg_dir/$name.log"
  [ "$rc" = 0 ] || { echo "$name failed (status $rc)" >&2; exit 1; }
}
# NVRTC from setup.sh: every generated CUDA kernel is compiled, even without a GPU
nvrtc=$PWD/.deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13
if [ -z "${LATHE_NVRTC_LIBRARY:-}" ] && [ -e "$nvrtc" ]; then export LATHE_NVRTC_LIBRARY=$nvrtc; fi

step "C tests (gcc, -Werror)"
# NVRTC's compile of every lathe:cuda kernel for sm_90 and sm_80 (about 400 CPU-seconds) is left
# out here and runs in the background beside the single-threaded conformance runs below
LATHE_TEST_NVRTC=0 make -j"$jobs" CI=1 test
nvrtc_run() { build/test_unit cuda_ | grep -E '^(FAIL|note: NVRTC|[0-9]+ passed)'; }
bg "NVRTC: every lathe:cuda kernel text compiled for sm_90 and sm_80 (test_unit cuda_)" nvrtc_run
step "make install into a temporary prefix: nothing installed refers back to the clone"
scripts/install-check.sh
step "C conformance rows on the asynchronous test device, compared with lathe:cpu"
build/test_ops -j "$tjobs" -b lathe:cpu,devices=2,async=late | grep -E '^(FAIL|-b |[0-9]+ passed)'
step "Random graphs (tests/diff) on the CPU configurations and mlx:cpu,dynamic, compared with lathe:cpu"
make -j"$jobs" CI=1 test-diff
step "C conformance rows on each instruction set this CPU runs: floats equal to lathe:cpu's best exactly"
for isa in baseline avx2 avx512; do
  if out=$(build/test_ops -j "$tjobs" -b lathe:cpu,isa=$isa -e 2>&1); then
    grep -E '^(-b |[0-9]+ passed)' <<<"$out"
  elif grep -q 'is not supported by this CPU' <<<"$out"; then
    echo "isa=$isa: not on this CPU"
  else
    grep -E '^(FAIL|cannot|-b |[0-9]+ passed)' <<<"$out"
    exit 1
  fi
done
# One clang build checks clang's warnings and its optimised code on every test and row, under
# ASan+UBSan (UBSan's float-to-integer check is clang's alone); the fuzz harness links its library.
step "C tests (clang -O2, -Werror) under ASan+UBSan"
# (the kernel texts are made but not compiled by NVRTC here, LATHE_TEST_NVRTC=0: inside a
# sanitizer's process NVRTC takes many minutes, and the background run above compiles them all)
LATHE_TEST_NVRTC=0 ASAN_OPTIONS=detect_leaks=1 make -j"$jobs" CI=1 test-sanitize
step "libFuzzer over the C API: link (the sanitizer build's library); the 60 s run goes on in the background"
make -j"$jobs" CI=1 fuzz
mkdir -p build-san/corpus
fuzz_run() {
  # New inputs go to build-san/corpus (kept between runs); tests/fuzz/corpus is the checked-in seed.
  if ! FUZZ_API_STATS=1 build-san/fuzz_api -max_total_time=60 -max_len=1024 -len_control=0 -timeout=60 \
      -print_final_stats=1 -artifact_prefix=build-san/ build-san/corpus tests/fuzz/corpus >build-san/fuzz.log 2>&1; then
    tail -n 80 build-san/fuzz.log
    echo "fuzz_api failed: the input is saved under build-san/ (replay: build-san/fuzz_api FILE)"
    return 1
  fi
  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|peak_rss_mb)|^fuzz_api:' build-san/fuzz.log
}
bg "libFuzzer over the C API, 60 s (summary)" fuzz_run
# MLX: where setup installed it, build/test_mlx ran with the C suites; the conformance table runs
# on the mlx configurations too. mlx (compiled) traces each graph and, on the CPU, compiles its
# fused kernels with g++ once per graph (cached in /tmp/mlx): the whole table would take hours on
# a fresh machine, so it runs the rows of the families whose compiled form differs most from the
# dynamic one (control flow split into segments, Sort, layout views, windows, gathers,
# convolutions, Philox state): about a minute and a half cold on 2 busy cores. DotGeneral,
# RNGBitGenerator, FFT, SelectAndScatter and fused attention would add about seven minutes
# cold (kernel compiles): they run on the two dynamic configurations, whose lowerings are the
# same code apart from the tracing, and LATHE_MLX_TABLE=all adds them to the compiled run.
mlx_tags=""
if [ -e .deps/mlx/mlx/include/mlx/mlx.h ]; then
  mlx_tags="-tags mlx"
  step "Conformance table on mlx (MLX's CPU)"
  mlx_t0=$SECONDS
  scripts/mlx-conformance.sh mlx:cpu,dynamic
  scripts/mlx-conformance.sh mlx:cpu,dynamic,lazy_contiguous
  mlx_rows="call_ while_ if_ nested_ barriers sort_ layout_ conv_ index_ philox reduce_window arg_min_max
    reduce_nan reduce_large"
  [ "${LATHE_MLX_TABLE:-}" != all ] || mlx_rows="$mlx_rows dot_general rng_ fft_1d select_and_scatter fused_sdpa"
  # shellcheck disable=SC2086
  scripts/mlx-conformance.sh mlx:cpu $mlx_rows
  echo "mlx conformance: $((SECONDS - mlx_t0)) s"
fi
step "C example: 2-layer MLP through the C API"
make -j"$jobs" CI=1 examples
build/mlp_train lathe:cpu
bg_wait "libFuzzer over the C API, 60 s (summary)"
bg_wait "NVRTC: every lathe:cuda kernel text compiled for sm_90 and sm_80 (test_unit cuda_)"
if [ -f go.mod ]; then
  step "Go: vet and tests (backendtest compliance suite included)"
  go vet ./...
  # -v so that the compliance counts ("backendtest lathe:cpu: N passed, N skipped, N failed")
  # and every skip show; the filter keeps the per-subtest lines out. With MLX, the mlx
  # configurations too (build tag mlx).
  # shellcheck disable=SC2086
  [ -z "$mlx_tags" ] || go vet $mlx_tags ./...
  # shellcheck disable=SC2086
  go test $mlx_tags -count=1 -v ./... 2>&1 | grep -E '^(--- (FAIL|SKIP)|ok |FAIL|backendtest |panic:)|\.go:[0-9]+:'
  step "Go: lifetimes and asynchronous buffers under AddressSanitizer"
  CC=clang go test -asan -count=1 -run 'TestExecuteAfterFinalize|TestDevicesAndAsync|TestGarbageCollected|TestBackendInfo|TestDonation' ./compute/lathe
  step "GoMLX's own test suites (go.mod's version: core/..., ml/...) on lathe:cpu"
  ./scripts/gomlx-suite.sh lathe:cpu
  step "GoMLX's distributed tests (SPMD, AutoSharding, dtensor) on lathe:cpu with 2 and 4 devices"
  # the packages that hold them (TestCollective, TestAutoSharding, TestPortable, TestFunction,
  # dtensor, TestDistributedAccumulator, ml/model's TestAutoSharding), whole
  for n in 2 4; do
    GOMLX_SUITE_PKGS="./core/graph ./core/tensors/... ./ml/dataset ./ml/model" ./scripts/gomlx-suite.sh "lathe:cpu,devices=$n"
  done
  # The examples build with the tags of the Go tests above, so they reuse that build of the
  # engine from Go's cache instead of compiling it once more without MLX.
  step "GoMLX examples on lathe, shortened: the digits demo and the text transformer"
  ./scripts/setup-data.sh
  # shellcheck disable=SC2086
  go run $mlx_tags ./cmd/lathe-demo -steps 300 | tail -3
  gomlx=$(go list -m -f '{{.Dir}}' github.com/gomlx/gomlx)
  # shellcheck disable=SC2086
  go run $mlx_tags ./cmd/lathe-textgen -text "$gomlx" -steps 40 -generate 40 | grep -a -A3 '^trained'
  step "Data-parallel training on lathe:cpu with 2 and 4 devices against one device"
  # shellcheck disable=SC2086
  go build $mlx_tags -o build/lathe-dataparallel ./cmd/lathe-dataparallel
  build/lathe-dataparallel -devices 2 -steps 100 | tail -1
  build/lathe-dataparallel -devices 4 -steps 100 | tail -1
  # the one-line errors a user sees for a mistyped backend (no stack trace, the fix named)
  step "Backend config errors in the examples: one line naming the fix"
  scripts/config-errors-check.sh build/lathe-dataparallel
fi
stage_done
printf '\n=== total: %d s\n' $((SECONDS - t_all))
printf '\n=== all tests passed\n'
