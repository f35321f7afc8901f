# lathe -- build the C engine: liblathe.a, liblathe.so, lathe.pc, tests and examples.
PREFIX ?= /usr/local
CC ?= cc
# -ffp-contract=off: no FMA contraction, so every ISA's kernels round alike (src/cpu/kernels.h)
CSTD = -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -ffp-contract=off
WARN = -Wall -Wextra -Wno-unused-parameter $(if $(CI),-Werror,) $(EXTRA_WARN)
OPT ?= -O2 -march=x86-64-v2 -g
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) -fPIC -Iinclude $(CFLAGS)
BLAS_LIBS ?= -lopenblas
LIBS = $(BLAS_LIBS) -lm -lpthread -ldl
BUILD ?= build

# The engine's folders under src/, in layer order: C, and the C++ of the MLX device. Kept here
# only: compute/lathe's generator (internal/gensrc/srclist) reads these two lines.
ENGINE_DIRS := core graph runtime exec cpu cuda
ENGINE_CXX_DIRS := mlx
SRC := $(foreach d,$(ENGINE_DIRS),$(wildcard src/$(d)/*.c))
OBJ := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(SRC))

# The MLX device (src/mlx, C++20), built when MLX is found: MLX_DIR is a folder with MLX's
# include/ and lib/ -- the mlx/ folder of the mlx-cpu or mlx-cuda-13 wheel, or an install
# prefix (Homebrew's, MLX's CMake install). scripts/setup.sh puts the mlx-cpu wheel in
# .deps/mlx; MLX_DIR= builds without MLX. GPU wheels link with MLX_LDFLAGS=-Wl,--allow-shlib-undefined
# where their CUDA libraries are absent (docs/MLX.md).
MLX_DIR ?= $(firstword $(wildcard .deps/mlx/mlx))
ifneq ($(wildcard $(MLX_DIR)/include/mlx/mlx.h),)
CXX ?= g++
CXXFLAGS_ALL = -std=c++20 $(WARN) $(OPT) -fPIC -Iinclude -isystem $(MLX_DIR)/include $(CXXFLAGS)
MLX_SRC := $(foreach d,$(ENGINE_CXX_DIRS),$(wildcard src/$(d)/*.cpp))
OBJ += $(patsubst src/%.cpp,$(BUILD)/obj/%.o,$(MLX_SRC))
CFLAGS_ALL += -DLATHE_WITH_MLX
MLX_LIB := $(abspath $(MLX_DIR)/lib)
MLX_LINK = -lmlx -lstdc++ $(MLX_LDFLAGS)
# The programs built here (tests, benchmarks, examples) find libmlx where it is.
LIBS += -L$(MLX_LIB) $(MLX_LINK) -Wl,-rpath,$(MLX_LIB)
# liblathe.so and lathe.pc carry no path into this tree: `make install` copies libmlx (and the
# libraries a wheel vendors next to it, <wheel>/*.libs, which libmlx finds relative to itself)
# under PREFIX/lib/lathe, and liblathe.so finds it there through RUNPATH $ORIGIN/lathe/mlx/lib.
# build/lathe/ mirrors that layout with links, so build/liblathe.so works in place too.
MLX_VENDORED := $(wildcard $(MLX_DIR)/../*.libs)
SO_MLX = -L$(MLX_LIB) $(MLX_LINK) -Wl,-rpath,'$$ORIGIN/lathe/mlx/lib'
PC_MLX = -L$${libdir}/lathe/mlx/lib $(MLX_LINK) -Wl,-rpath,$${libdir}/lathe/mlx/lib
endif
BASE_LIBS = $(BLAS_LIBS) -lm -lpthread -ldl
# Objects depend on whether MLX is in (backend.c registers it): a stamp that changes with MLX_DIR.
MLX_STAMP := $(BUILD)/mlx-$(if $(MLX_SRC),on,off).stamp
HDR := $(wildcard include/*.h include/*.def src/*/*.h src/*/*.def)
TEST_SRC := $(wildcard tests/unit/*.c tests/ops/*.c)
TESTS := $(BUILD)/test_unit $(BUILD)/test_ops $(if $(MLX_SRC),$(BUILD)/test_mlx)
# The allocation-failure test interposes malloc, so it is left out of sanitizer builds.
ALLOC_TEST = $(BUILD)/alloc_fail
EXAMPLES := $(BUILD)/mlp_train

.PHONY: all lib test test-diff test-sanitize fuzz examples bench install clean cuda-abi-check
all: lib examples bench $(TESTS) $(ALLOC_TEST)
GLOO_PLUGIN := $(if $(wildcard /usr/include/gloo/allreduce.h),$(BUILD)/liblathe_gloo.so)
lib: $(BUILD)/liblathe.a $(BUILD)/liblathe.so $(BUILD)/lathe.pc $(GLOO_PLUGIN)

# The Gloo plugin: CPU AllReduce across the processes of a job (docs/ARCHITECTURE.md "A job of
# several processes"), built where Gloo's headers are (Debian libgloo-dev) and dlopen'ed at run
# time, so nothing else needs Gloo or C++.
$(BUILD)/liblathe_gloo.so: src/gloo/lathe_gloo.cpp src/gloo/lathe_gloo.h
	@mkdir -p $(BUILD)
	$(CXX) -std=c++17 $(WARN) -O2 -fPIC -shared -Isrc/gloo $< -lgloo -o $@

# Kernel sources (src/<dir>/kernels/*.cuh, CUDA C++ for NVRTC) reach the C as string literals in
# a generated, committed header (src/<dir>/kernels/zkernels.h) that compute/lathe's generator
# writes, so cgo builds need no tool; here it is written again when a .cuh is newer, where Go is.
KERNEL_DIRS := $(foreach d,$(ENGINE_DIRS),$(if $(wildcard src/$(d)/kernels/*.cuh),$(d)))
define kernel_rules
$(patsubst src/%.c,$(BUILD)/obj/%.o,$(wildcard src/$(1)/*.c)): src/$(1)/kernels/zkernels.h
src/$(1)/kernels/zkernels.h: $(wildcard src/$(1)/kernels/*.cuh)
	@if command -v go >/dev/null 2>&1; then (cd compute/lathe && go generate) && touch $$@; \
	else echo "warning: $$@ is older than a .cuh and there is no go to run gensrc (go generate ./compute/lathe)" >&2; fi
endef
$(foreach d,$(KERNEL_DIRS),$(eval $(call kernel_rules,$(d))))

$(BUILD)/obj/%.o: src/%.c $(HDR) $(MLX_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/obj/mlx/%.o: src/mlx/%.cpp src/mlx/mlx.h $(HDR)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) -c $< -o $@

$(MLX_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/mlx-*.stamp
	@touch $@

$(BUILD)/liblathe.a: $(OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/liblathe.so: $(OBJ)
	$(CC) -shared -o $@ $^ $(BASE_LIBS) $(SO_MLX) $(LDFLAGS)
ifneq ($(MLX_SRC),)
	@mkdir -p $(BUILD)/lathe
	ln -sfn $(abspath $(MLX_DIR)) $(BUILD)/lathe/mlx
	$(foreach d,$(MLX_VENDORED),ln -sfn $(abspath $(d)) $(BUILD)/lathe/$(notdir $(d));)
endif

$(BUILD)/lathe.pc: lathe.pc.in
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBS@|$(BASE_LIBS) $(PC_MLX)|' $< > $@

$(BUILD)/test_unit: $(wildcard tests/unit/*.c) tests/testing.c tests/testing.h $(BUILD)/liblathe.a
	$(CC) $(CFLAGS_ALL) -Isrc -Itests tests/testing.c $(wildcard tests/unit/*.c) $(BUILD)/liblathe.a $(LIBS) $(LDFLAGS) -o $@

$(BUILD)/test_ops: $(wildcard tests/ops/*.c) tests/testing.c tests/testing.h $(BUILD)/liblathe.a
	$(CC) $(CFLAGS_ALL) -Isrc -Itests tests/testing.c $(wildcard tests/ops/*.c) $(BUILD)/liblathe.a $(LIBS) $(LDFLAGS) -o $@

$(BUILD)/test_diff: $(wildcard tests/diff/*.c) tests/testing.c tests/testing.h $(BUILD)/liblathe.a
	$(CC) $(CFLAGS_ALL) -Isrc -Itests tests/testing.c $(wildcard tests/diff/*.c) $(BUILD)/liblathe.a $(LIBS) $(LDFLAGS) -o $@

$(BUILD)/test_mlx: $(wildcard tests/mlx/*.c) tests/testing.c tests/testing.h $(BUILD)/liblathe.a
	$(CC) $(CFLAGS_ALL) -Isrc -Itests tests/testing.c $(wildcard tests/mlx/*.c) $(BUILD)/liblathe.a $(LIBS) $(LDFLAGS) -o $@

$(BUILD)/alloc_fail: tests/alloc/alloc_fail.c $(BUILD)/liblathe.a
	$(CC) $(CFLAGS_ALL) $< $(BUILD)/liblathe.a $(LIBS) $(LDFLAGS) -o $@

$(BUILD)/mlp_train: examples/mlp_train.c $(BUILD)/liblathe.a
	$(CC) $(CFLAGS_ALL) $< $(BUILD)/liblathe.a $(LIBS) $(LDFLAGS) -o $@

examples: $(EXAMPLES)

$(BUILD)/%_bench: bench/%_bench.c bench/bench.h $(BUILD)/liblathe.a
	$(CC) $(CFLAGS_ALL) -Isrc $< $(BUILD)/liblathe.a $(LIBS) $(LDFLAGS) -o $@

bench: $(patsubst bench/%.c,$(BUILD)/%,$(wildcard bench/*_bench.c))

# The conformance table runs in TEST_JOBS processes (test_ops -j: one summary), one per core up to 8.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 8 ] && n=8; echo $$n)
test: $(TESTS) $(ALLOC_TEST) $(GLOO_PLUGIN)
	$(BUILD)/test_unit
	$(BUILD)/test_ops -j $(TEST_JOBS)
	$(if $(MLX_SRC),$(BUILD)/test_mlx)
	$(if $(ALLOC_TEST),$(ALLOC_TEST))

# Random graphs on each CPU configuration (and mlx:cpu,dynamic when MLX is built) against
# lathe:cpu (tests/diff/diff.c); DIFF_N graphs each.
DIFF_N ?= 1000
comma := ,
DIFF_CONFIGS := lathe:cpu,devices=2,async=late lathe:cpu,isa=baseline lathe:cpu,fuse=0 $(if $(MLX_SRC),mlx:cpu$(comma)dynamic)
test-diff: $(BUILD)/test_diff
	@set -e; for c in $(DIFF_CONFIGS); do echo "test_diff $$c"; $(BUILD)/test_diff $$c -n $(DIFF_N); done

# The same suites under AddressSanitizer and UndefinedBehaviorSanitizer, built by clang at -O2
# with libFuzzer's coverage instrumentation (fuzzer-no-link): one build that checks clang's
# warnings (-Werror) and its optimised code on every row, the sanitizers on every row, and is the
# library the fuzz harness links (make fuzz). The instrumentation's hooks are no-ops in a test.
SAN_CC ?= clang
SAN_CXX ?= clang++
SAN_OPT = -O2 -march=x86-64-v2 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_MAKE = $(MAKE) CC=$(SAN_CC) CXX=$(SAN_CXX) BUILD=build-san OPT="$(SAN_OPT) -fsanitize=fuzzer-no-link" \
  LDFLAGS="-fsanitize=address,undefined $(if $(MLX_SRC),-fsanitize-link-c++-runtime)" ALLOC_TEST=
test-sanitize:
	+$(SAN_MAKE) test

# libFuzzer harness over the public C API (clang; libFuzzer ships in Debian's libclang-rt-*-dev),
# linked with the sanitizer build's library. See README, "Developing".
fuzz: build-san/fuzz_api
build-san/fuzz_api: tests/fuzz/fuzz_api.c $(SRC) $(HDR) $(MLX_SRC)
	+$(SAN_MAKE) build-san/liblathe.a
	$(SAN_CC) $(CSTD) $(WARN) $(SAN_OPT) -fsanitize=fuzzer -Iinclude tests/fuzz/fuzz_api.c build-san/liblathe.a $(LIBS) \
	  $(if $(MLX_SRC),-fsanitize-link-c++-runtime) -o $@

# Everything installed stands alone: nothing refers back to this tree (scripts/install-check.sh).
install: lib
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(BUILD)/liblathe.a $(BUILD)/liblathe.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/lathe.h include/lathe_ops.def include/lathe_dtypes.def $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBS@|$(BASE_LIBS) $(PC_MLX)|' lathe.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/lathe.pc
ifneq ($(MLX_SRC),)
	install -d $(DESTDIR)$(PREFIX)/lib/lathe/mlx/lib
	install -m 644 $(MLX_DIR)/lib/libmlx* $(DESTDIR)$(PREFIX)/lib/lathe/mlx/lib/
	cp -R $(MLX_DIR)/include $(DESTDIR)$(PREFIX)/lib/lathe/mlx/ # a whole MLX_DIR (go build -tags mlx,mlx_dir)
	$(foreach d,$(MLX_VENDORED),install -d $(DESTDIR)$(PREFIX)/lib/lathe/$(notdir $(d)) && \
	  install -m 644 $(d)/* $(DESTDIR)$(PREFIX)/lib/lathe/$(notdir $(d))/;)
endif

clean:
	rm -rf build build-san

# Where a CUDA SDK is installed: check src/cuda/cuda_api.h against NVIDIA's headers.
CUDA_HOME ?= /usr/local/cuda
cuda-abi-check:
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -I$(CUDA_HOME)/include tests/cuda/abi_check.c -o $(BUILD)/cuda_abi_check
	$(BUILD)/cuda_abi_check
