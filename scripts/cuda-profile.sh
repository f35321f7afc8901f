#!/usr/bin/env bash
# On a GPU machine with ncu: the kernels one GoMLX training step runs on one contender, and each
# kernel's share of the step's kernel time (ncu's gpu__time_duration per launch, the card's clocks
# left as they are). Kernels are grouped by name over the last three steps, found as the run's
# repeating tail (so the first step's compiles and algorithm searches are left out).
# Usage: scripts/cuda-profile.sh BIN WORKLOAD CONTENDER [ROUNDS] [TOP]
#   BIN holds gvj (bench/cmd/gomlx-vs-jax); WORKLOAD is a -only substring (mlp, cnn, transformer);
#   CONTENDER is a lathe configuration (lathe:cuda,tf32=1) or xla:cuda.
set -uo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
cd "$(dirname "$0")/.."
bin=$1 workload=$2 who=$3 rounds=${4:-4} top=${5:-25}
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
lathe=$who xla=""
if [ "$who" = xla:cuda ]; then
  plugin=$(python3 -c 'import jax_plugins.xla_cuda13 as m, os; print(os.path.join(os.path.dirname(m.__file__), "xla_cuda_plugin.so"))')
  dir=$(dirname "$plugin")
  ln -sf "$plugin" "$dir/pjrt_c_api_cuda_plugin.so"
  export PJRT_PLUGIN_LIBRARY_PATH=$dir GOMLX_NO_AUTO_INSTALL=1 GOPJRT_CUDA_CHECKS=0 XLA_PYTHON_CLIENT_PREALLOCATE=false
  lathe="" xla=xla:cuda
fi
csv=$(mktemp)
"$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --page raw --print-units base \
  "$bin/gvj" -gpu -only "$workload" -lathe "$lathe" -xla "$xla" -python "" -go-rounds 0 -rounds "$rounds" -warmup 0 \
  >"$csv" 2>"$csv.err" || { echo "cuda-profile: gvj under ncu failed:"; tail -20 "$csv.err"; }
python3 - "$csv" "$top" "$who" "$workload" <<'PY'
import csv, sys, collections
path, top, who, workload = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
lines = open(path, errors="replace").read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
if start is None:
    sys.exit("cuda-profile: ncu wrote no kernel table:\n" + "\n".join(lines[-20:]))
tcol, launches = None, []
for r in csv.DictReader(lines[start:]):
    tcol = tcol or next(c for c in r if c.startswith("gpu__time_duration"))
    try:
        launches.append((r["Kernel Name"].split("(")[0][:90], float(r[tcol].replace(",", ""))))
    except ValueError:  # the units row
        continue
# the steady steps: the shortest period p whose last three repeats launch the same kernels
names = [n for n, _ in launches]
period = next((p for p in range(1, len(names) // 3 + 1)
               if names[-p:] == names[-2 * p:-p] == names[-3 * p:-2 * p]), None)
if period is None:
    sys.exit(f"cuda-profile: no repeating step in {len(names)} launches")
total, count = collections.Counter(), collections.Counter()
for n, t in launches[-3 * period:]:
    total[n] += t
    count[n] += 1
all_ns = sum(total.values())
print(f"{who} {workload}: {period} launches and {all_ns / 3e3:.1f} us of kernel time per step "
      f"(the last 3 steps of {len(names)} launches)")
print(f"{'share':>6} {'us/step':>9} {'launches':>9}  kernel")
for name, t in total.most_common(top):
    print(f"{100 * t / all_ns:5.1f}% {t / 3e3:9.1f} {count[name] / 3:9.1f}  {name}")
PY
rm -f "$csv" "$csv.err"
