#!/usr/bin/env bash
# Installs what lathe needs to build on a Debian-like machine: a C compiler, make, OpenBLAS,
# pkg-config (and, with LATHE_WITH_CLANG=1, clang and its libFuzzer, used by the tests to check
# the code also builds with it and to fuzz the C API; with LATHE_WITH_GLOO=1, Gloo for jobs of
# several processes). Go must be on PATH already (the version
# go.mod names, or newer); the Go modules come from the Go module proxy. For the tests, two sets
# of wheels from PyPI go into .deps (nothing system-wide), each skipped with its variable set to 0:
#  - LATHE_NVRTC: nvidia-cuda-nvrtc (CUDA's runtime compiler; the tests compile every lathe:cuda
#    kernel with it, even without a GPU);
#  - LATHE_MLX: the mlx-cpu wheel (MLX's headers and libmlx, for the mlx backend, docs/MLX.md) and
#    the mlx wheel (its Python API, for the benchmark).
# scripts/test.sh installs both; scripts/demo.sh neither (the demo needs OpenBLAS and Go modules).
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
cd "$(dirname "$0")/.."
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || [ -e /usr/include/openblas/cblas.h ] \
  || [ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || need+=(libopenblas-dev)
if [ "${LATHE_WITH_CLANG:-0}" = 1 ]; then
  if ! command -v clang >/dev/null 2>&1; then
    need+=(clang libclang-rt-dev)
  else
    # libFuzzer (make fuzz) ships in libclang-rt-N-dev, only a recommendation of Debian's clang.
    major=$(clang -dumpversion | cut -d. -f1)
    [ -n "$(ls "$(clang -print-resource-dir)"/lib/linux/libclang_rt.fuzzer-*.a 2>/dev/null)" ] \
      || need+=("libclang-rt-$major-dev")
  fi
fi
# Gloo (Debian's libgloo-dev, and g++ for lathe's plugin around it): AllReduce across the processes
# of a job on lathe:cpu; the tests run jobs on loopback. Without it those tests skip.
if [ "${LATHE_WITH_GLOO:-0}" = 1 ]; then
  [ -e /usr/include/gloo/allreduce.h ] || need+=(libgloo-dev)
  command -v g++ >/dev/null 2>&1 || need+=(g++)
fi
if [ "${LATHE_NVRTC:-1}" != 0 ] || [ "${LATHE_MLX:-1}" != 0 ]; then # NVRTC and MLX (below) come with pip
  python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
fi
if [ "${LATHE_MLX:-1}" != 0 ]; then # MLX's C++ headers, and its kernel compiler at run time
  command -v g++ >/dev/null 2>&1 || need+=(g++)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1; then
  echo "setup: Go is not on PATH; install Go $(sed -n 's/^go //p' go.mod) or newer first" >&2
  exit 1
fi

# NVRTC, CUDA's runtime compiler, from PyPI's nvidia-cuda-nvrtc wheel into .deps/nvrtc (pip
# --target: nothing system-wide; LATHE_NVRTC=0 skips it). On a machine without a GPU the tests
# still compile every kernel lathe:cuda generates with it (scripts/test.sh sets
# LATHE_NVRTC_LIBRARY); lathe itself never needs it to build.
NVRTC_VERSION=13.5.37
if [ "${LATHE_NVRTC:-1}" != 0 ] && [ ! -e .deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13 ]; then
  echo "setup: installing nvidia-cuda-nvrtc $NVRTC_VERSION into .deps/nvrtc"
  rm -rf .deps/nvrtc
  for flags in "" "--break-system-packages"; do
    # shellcheck disable=SC2086
    python3 -m pip install -q --disable-pip-version-check --no-deps --target .deps/nvrtc $flags \
      "nvidia-cuda-nvrtc==$NVRTC_VERSION" 2>/dev/null && break
  done
  [ -e .deps/nvrtc/nvidia/cu13/lib/libnvrtc.so.13 ] \
    || echo "setup: could not install nvidia-cuda-nvrtc: the CUDA kernel compile test will skip" >&2
fi

# MLX from PyPI into .deps/mlx (pip --target: nothing system-wide). The mlx backend builds only
# where it is found (Makefile MLX_DIR, Go build tag mlx); it also needs a C++ compiler at run
# time (MLX compiles its fused CPU kernels with it).
MLX_VERSION=0.32.4
if [ "${LATHE_MLX:-1}" != 0 ] && [ ! -e .deps/mlx/mlx/include/mlx/mlx.h ]; then
  echo "setup: installing mlx-cpu and mlx $MLX_VERSION into .deps/mlx"
  rm -rf .deps/mlx
  # One command, as both wheels fill .deps/mlx/mlx. The Python API (mlx, built per CPython
  # version) is only for bench/mlx_bench.py: without a wheel for this Python, mlx-cpu alone.
  for flags in "" "--break-system-packages"; do
    # shellcheck disable=SC2086
    python3 -m pip install -q --disable-pip-version-check --target .deps/mlx $flags \
      "mlx-cpu==$MLX_VERSION" "mlx==$MLX_VERSION" 2>/dev/null && break
    # shellcheck disable=SC2086
    python3 -m pip install -q --disable-pip-version-check --target .deps/mlx $flags \
      "mlx-cpu==$MLX_VERSION" 2>/dev/null && break
  done
  [ -e .deps/mlx/mlx/include/mlx/mlx.h ] || echo "setup: could not install mlx-cpu: the mlx backend is not built" >&2
fi
