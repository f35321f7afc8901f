#!/usr/bin/env bash
# Installs what the GoMLX-vs-JAX benchmark needs beside lathe's own build: JAX for the CPU from
# PyPI into a local virtual environment (.deps/jax at the repository root), and, when
# LATHE_BENCH_XLA=1, XLA's CPU PJRT plugin (PyPI's lammps-jax-pjrt-cpu wheel, unpacked into
# .deps/pjrt-cpu) so that GoMLX's xla backend can run offline as xla:cpu.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
deps="$root/.deps"
mkdir -p "$deps"
if [ ! -x "$deps/jax/bin/python" ] || ! "$deps/jax/bin/python" -c 'import jax' 2>/dev/null; then
  echo "setup: JAX into $deps/jax"
  python3 -m venv "$deps/jax"
  "$deps/jax/bin/python" -m pip install -q --upgrade pip
  "$deps/jax/bin/python" -m pip install -q 'jax[cpu]'
fi
"$deps/jax/bin/python" -c 'import jax; print("setup: jax", jax.__version__, jax.devices())'
if [ "${LATHE_BENCH_XLA:-0}" = 1 ] && [ ! -e "$deps/pjrt-cpu/pjrt_c_api_cpu_plugin.so" ]; then
  echo "setup: XLA CPU PJRT plugin into $deps/pjrt-cpu"
  tmp=$(mktemp -d)
  "$deps/jax/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" lammps-jax-pjrt-cpu
  mkdir -p "$deps/pjrt-cpu"
  "$deps/jax/bin/python" - "$tmp" "$deps/pjrt-cpu" <<'PY'
import glob, os, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
for whl in glob.glob(os.path.join(src, "*.whl")):
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if name.endswith("pjrt_c_api_cpu_plugin.so"):
                with z.open(name) as f, open(os.path.join(dst, "pjrt_c_api_cpu_plugin.so"), "wb") as out:
                    out.write(f.read())
PY
  rm -rf "$tmp"
  ls -l "$deps/pjrt-cpu"
fi
