#!/usr/bin/env bash
# Sets up and runs every test of lathe: the C suites (gcc and clang, warnings as errors, with the
# allocation-failure test), the same suites under AddressSanitizer+UndefinedBehaviorSanitizer, a
# minute of libFuzzer over the C API, the C example, the Go tests (GoMLX's backendtest compliance
# suite included), GoMLX v0.28.2's own test suites on lathe:cpu (scripts/gomlx-suite.sh) and
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
step "C tests (clang, -Werror)"
make -j"$jobs" CI=1 CC=clang BUILD=build-clang test
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
step "C example: 2-layer MLP through the C API"
make -j"$jobs" CI=1 examples
build/mlp_train lathe:cpu
if [ -f go.mod ]; then
  step "Go: vet and tests (backendtest compliance suite included)"
  go vet ./...
  # -v so that the compliance counts ("backendtest lathe:cpu: N passed, N skipped, N failed")
  # and every skip show; the filter keeps the per-subtest lines out.
  go test -count=1 -v ./... 2>&1 | grep -E '^(--- (FAIL|SKIP)|ok |FAIL|backendtest |panic:)|\.go:[0-9]+:'
  step "Go: lifetimes and asynchronous buffers under AddressSanitizer"
  CC=clang go test -asan -count=1 -run 'TestExecuteAfterFinalize|TestDevicesAndAsync|TestGarbageCollected|TestBackendInfo|TestDonation' ./compute/lathe
  step "GoMLX v0.28.2's own test suites (core/..., ml/...) on lathe:cpu"
  ./scripts/gomlx-suite.sh lathe:cpu
  step "GoMLX examples on lathe, shortened: the digits demo and the text transformer"
  ./scripts/setup-data.sh
  go run ./cmd/lathe-demo -steps 300 | tail -3
  ./scripts/textgen.sh -steps 40 -generate 40 | grep -a -A3 '^trained'
  step "Data-parallel training on lathe:cpu with 2 and 4 devices against one device"
  go run ./cmd/lathe-dataparallel -devices 2 -steps 100 | tail -1
  go run ./cmd/lathe-dataparallel -devices 4 -steps 100 | tail -1
fi
step "all tests passed"
