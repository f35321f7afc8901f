#!/usr/bin/env bash
# Sets up and runs every test of lathe: the C suites (gcc and clang, warnings as errors, with the
# allocation-failure test), the same suites under AddressSanitizer+UndefinedBehaviorSanitizer, a
# minute of libFuzzer over the C API, the C example, the Go tests (GoMLX's backendtest compliance
# suite included), GoMLX v0.28.7's own test suites on lathe:cpu (scripts/gomlx-suite.sh) and
# short runs of the two GoMLX examples.
set -euo pipefail
cd "$(dirname "$0")/.."
LATHE_WITH_CLANG=1 ./scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n=== %s\n' "$*"; }
# NVRTC from setup.sh: every generated CUDA kernel is compiled, even without a GPU
nvrtc=$PWD/.deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13
if [ -z "${LATHE_NVRTC_LIBRARY:-}" ] && [ -e "$nvrtc" ]; then export LATHE_NVRTC_LIBRARY=$nvrtc; fi

step "C tests (gcc, -Werror)"
make -j"$jobs" CI=1 test
step "C conformance rows on the asynchronous test device, compared with lathe:cpu"
build/test_ops -b lathe:cpu,devices=2,async=late | grep -E '^(FAIL|-b |[0-9]+ passed)'
step "C conformance rows on each instruction set this CPU runs: floats equal to lathe:cpu's best exactly"
for isa in baseline avx2 avx512; do
  if out=$(build/test_ops -b lathe:cpu,isa=$isa -e 2>&1); then
    grep -E '^(-b |[0-9]+ passed)' <<<"$out"
  elif grep -q 'is not supported by this CPU' <<<"$out"; then
    echo "isa=$isa: not on this CPU"
  else
    grep -E '^(FAIL|cannot|-b |[0-9]+ passed)' <<<"$out"
    exit 1
  fi
done
step "C tests (clang, -Werror)"
make -j"$jobs" CI=1 CC=clang CXX=clang++ BUILD=build-clang test
step "C tests under ASan+UBSan"
ASAN_OPTIONS=detect_leaks=1 make -j"$jobs" CI=1 test-sanitize
step "libFuzzer over the C API, 60 s (clang, ASan+UBSan; summary below)"
make -j"$jobs" CI=1 fuzz
mkdir -p build-fuzz/corpus
# New inputs go to build-fuzz/corpus (kept between runs); tests/fuzz/corpus is the checked-in seed.
if ! FUZZ_API_STATS=1 build-fuzz/fuzz_api -max_total_time=60 -max_len=1024 -len_control=0 -timeout=60 \
    -print_final_stats=1 -artifact_prefix=build-fuzz/ build-fuzz/corpus tests/fuzz/corpus >build-fuzz/fuzz.log 2>&1; then
  tail -n 80 build-fuzz/fuzz.log
  echo "fuzz_api failed: the input is saved under build-fuzz/ (replay: build-fuzz/fuzz_api FILE)" >&2
  exit 1
fi
grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|peak_rss_mb)|^fuzz_api:' build-fuzz/fuzz.log
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
  step "GoMLX v0.28.7's own test suites (core/..., ml/...) on lathe:cpu"
  ./scripts/gomlx-suite.sh lathe:cpu
  step "GoMLX v0.28.7's distributed tests (SPMD, AutoSharding, dtensor) on lathe:cpu with 2 and 4 devices"
  # the packages that hold them (TestCollective, TestAutoSharding, TestPortable, TestFunction,
  # dtensor, TestDistributedAccumulator, ml/model's TestAutoSharding), whole
  for n in 2 4; do
    GOMLX_SUITE_PKGS="./core/graph ./core/tensors/... ./ml/dataset ./ml/model" ./scripts/gomlx-suite.sh "lathe:cpu,devices=$n"
  done
  step "GoMLX examples on lathe, shortened: the digits demo and the text transformer"
  ./scripts/setup-data.sh
  go run ./cmd/lathe-demo -steps 300 | tail -3
  ./scripts/textgen.sh -steps 40 -generate 40 | grep -a -A3 '^trained'
  step "Data-parallel training on lathe:cpu with 2 and 4 devices against one device"
  go run ./cmd/lathe-dataparallel -devices 2 -steps 100 | tail -1
  go run ./cmd/lathe-dataparallel -devices 4 -steps 100 | tail -1
fi
step "all tests passed"
