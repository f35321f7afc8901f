#!/usr/bin/env bash
# Sets up and runs every test of lathe: the C suites (gcc and clang, warnings as errors), the
# same suites under AddressSanitizer+UndefinedBehaviorSanitizer, the C example, and the Go
# tests (GoMLX's backendtest compliance suite included).
set -euo pipefail
cd "$(dirname "$0")/.."
LATHE_WITH_CLANG=1 ./scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n=== %s\n' "$*"; }

step "C tests (gcc, -Werror)"
make -j"$jobs" CI=1 test
step "C tests (clang, -Werror)"
make -j"$jobs" CI=1 CC=clang CXX=clang++ BUILD=build-clang test
step "C tests under ASan+UBSan"
ASAN_OPTIONS=detect_leaks=1 make -j"$jobs" CI=1 test-sanitize
# MLX: where setup installed it, build/test_mlx ran with the C suites; the conformance table runs
# on the mlx configurations too. mlx (compiled) traces each graph and, on the CPU, compiles its
# fused kernels with g++ once per graph (cached in /tmp/mlx): the whole table would take hours on
# a fresh machine, so it runs the rows of the families whose lowering is more than one MLX call
# per op (control flow, layout, contractions, windows, numerics); the elementwise families and
# the slow-to-build index and fused rows run on the dynamic configurations, whose code paths
# are the same apart from the tracing.
mlx_tags=""
if [ -e .deps/mlx/mlx/include/mlx/mlx.h ]; then
  mlx_tags="-tags mlx"
  step "Conformance table on mlx (MLX's CPU)"
  scripts/mlx-conformance.sh mlx:cpu,dynamic
  scripts/mlx-conformance.sh mlx:cpu,dynamic,lazy_contiguous
  scripts/mlx-conformance.sh mlx:cpu call_ while_ if_ nested_ barriers sort_ layout_ dot_general conv_ index_ \
    philox rng_ fft_1d reduce_window select_and_scatter arg_min_max reduce_nan reduce_large fused_sdpa
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
fi
step "all tests passed"
