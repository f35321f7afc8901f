#!/usr/bin/env bash
# Installs what lathe needs to build on a Debian-like machine: a C compiler, make, OpenBLAS,
# pkg-config (and clang, used by the tests to check the code also builds with it). Go must be
# on PATH already (1.24 or newer); the Go modules come from the Go module proxy. MLX (the mlx
# backend, docs/MLX.md) comes from PyPI: the mlx-cpu wheel (MLX's headers and libmlx) and the
# mlx wheel (its Python API, for the benchmark) go into .deps/mlx; LATHE_MLX=0 skips them.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
[ -e /usr/include/x86_64-linux-gnu/cblas.h ] || [ -e /usr/include/cblas.h ] || [ -e /usr/include/openblas/cblas.h ] \
  || [ -e /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || need+=(libopenblas-dev)
if [ "${LATHE_WITH_CLANG:-0}" = 1 ]; then command -v clang >/dev/null 2>&1 || need+=(clang); fi
if [ "${LATHE_MLX:-1}" != 0 ]; then # MLX (below): its C++ headers, its kernel compiler, pip
  command -v g++ >/dev/null 2>&1 || need+=(g++)
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

# MLX from PyPI into .deps/mlx (pip --target: no virtual environment, nothing system-wide). The
# mlx backend builds only where it is found (Makefile MLX_DIR, Go build tag mlx); it also needs a
# C++ compiler at run time (MLX compiles its fused CPU kernels with it).
MLX_VERSION=0.32.4
if [ "${LATHE_MLX:-1}" != 0 ] && [ ! -e .deps/mlx/mlx/include/mlx/mlx.h ]; then
  echo "setup: installing mlx-cpu and mlx $MLX_VERSION into .deps/mlx"
  rm -rf .deps/mlx
  pip_target() { python3 -m pip install -q --disable-pip-version-check --target .deps/mlx "$@"; }
  # --target touches nothing system-wide; Debian's pip still wants the flag for it
  # (one command: both wheels fill .deps/mlx/mlx). The Python API (mlx, built per CPython
  # version) is only for bench/mlx_bench.py: without a wheel for this Python, mlx-cpu alone.
  for flags in "" "--break-system-packages"; do
    # shellcheck disable=SC2086
    pip_target $flags "mlx-cpu==$MLX_VERSION" "mlx==$MLX_VERSION" 2>/dev/null && break
    # shellcheck disable=SC2086
    pip_target $flags "mlx-cpu==$MLX_VERSION" 2>/dev/null && break
  done
  [ -e .deps/mlx/mlx/include/mlx/mlx.h ] || echo "setup: could not install mlx-cpu: the mlx backend is not built" >&2
fi
