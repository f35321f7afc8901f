#!/usr/bin/env bash
# Installs what lathe needs to build on a Debian-like machine: a C compiler, make, OpenBLAS,
# pkg-config (and, with LATHE_WITH_CLANG=1, clang and its libFuzzer, used by the tests to check
# the code also builds with it and to fuzz the C API). Go must be
# on PATH already (1.24 or newer); the Go modules come from the Go module proxy.
set -euo pipefail
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
if [ "${LATHE_NVRTC:-1}" != 0 ]; then # NVRTC (below) comes with pip
  python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
if ! command -v go >/dev/null 2>&1; then
  echo "setup: Go is not on PATH; install Go 1.24+ first" >&2
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
