#!/usr/bin/env bash
# On a GPU machine (no Go needed): lathe:cuda against GoMLX's xla:cuda, JAX and PyTorch in one run.
# BIN holds cuda-bench and gvj (gomlx-vs-jax), built where Go is:
#   go build -o BIN/cuda-bench ./bench/cmd/cuda-bench && go build -o BIN/gvj ./bench/cmd/gomlx-vs-jax
# xla:cuda is XLA's CUDA PJRT plugin that the installed JAX carries (../shared/PLATFORM.md), linked
# under the name go-xla looks for. JAX and the PJRT plugin are told not to take most of the GPU's
# memory up front, so that every contender can run beside the others.
# Usage: bench/cuda-bench.sh BIN [micro|steps|first|floor|cudnn|lm|all] [ROUNDS]
#   (first: the one-op floor and the first steps in fresh processes only; floor: the floor phase
#   by phase through the C API (build/floor_bench, built here) beside PyTorch's (floor_torch.py),
#   what bare CUDA calls cost on this machine (cuda_costs.cu, with nvcc) and what creating a CUDA
#   backend costs without lathe (cuda_init_costs.c, in sequence and with the libraries opened
#   beside cuInit), three fresh processes; cudnn: cuDNN's legacy
#   calls against its graph API on the CNN's convolution (cudnn_engines.c; BIN unused); lm: the
#   causal language models, LM small and GPT-2 small, in Float32 with MultiHeadAttention and with
#   explicit products and in BFloat16, against xla:cuda, JAX and PyTorch (eager, torch.compile),
#   each contender alone on the GPU in turn (-serial), with tokens/s, MFU and peak memory;
#   LATHE_BENCH_LM_SIZES=small or gpt2 runs one size (a run of both may pass 10 minutes:
#   torch.compile and XLA compile each workload anew); not part of all)
#   (LATHE_BENCH_LATHE replaces the lathe configurations, ";"-separated; LATHE_BENCH_ONLY picks workloads
#   of either, and then micro leaves out the first calls in fresh processes)
set -uo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
cd "$(dirname "$0")/.."
bin=$1 what=${2:-all} rounds=${3:-9}
plugin=$(python3 -c 'import jax_plugins.xla_cuda13 as m, os; print(os.path.join(os.path.dirname(m.__file__), "xla_cuda_plugin.so"))' 2>/dev/null)
xla=""
if [ -n "$plugin" ] && [ -f "$plugin" ]; then
  # beside the plugin, so that its RPATH ($ORIGIN/../../nvidia) finds the wheels' CUDA libraries
  dir=$(dirname "$plugin")
  ln -sf "$plugin" "$dir/pjrt_c_api_cuda_plugin.so"
  export PJRT_PLUGIN_LIBRARY_PATH=$dir GOMLX_NO_AUTO_INSTALL=1 GOPJRT_CUDA_CHECKS=0
  xla=xla:cuda
else
  echo "cuda-bench.sh: no XLA CUDA plugin (jax_plugins.xla_cuda13): xla:cuda left out"
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=.25 JAX_PLATFORMS=cuda
if [ "$what" = micro ] || [ "$what" = all ]; then
  "$bin/cuda-bench" -lathe "${LATHE_BENCH_LATHE:-lathe:cuda}" -xla "$xla" -python python3 -rounds "$rounds" -only "${LATHE_BENCH_ONLY:-}" \
    $([ -z "${LATHE_BENCH_ONLY:-}" ] && echo -first)
fi
if [ "$what" = first ]; then
  "$bin/cuda-bench" -lathe "${LATHE_BENCH_LATHE:-lathe:cuda}" -xla "$xla" -python "" -rounds "$rounds" -only floor -first
fi
if [ "$what" = floor ]; then
  make -s build/floor_bench || exit 1
  for cfg in lathe:cuda lathe:cuda,graphs=0; do build/floor_bench "$cfg" "$rounds"; done
  python3 bench/floor_torch.py "$rounds"
  nvcc -O2 -std=c++17 -arch=sm_90 -o /tmp/lathe_cuda_costs bench/cuda_costs.cu -lcuda && /tmp/lathe_cuda_costs
  gcc -O2 -o /tmp/lathe_cuda_init_costs bench/cuda_init_costs.c -ldl -lpthread &&
    for i in 1 2 3; do
      /tmp/lathe_cuda_init_costs; /tmp/lathe_cuda_init_costs overlap; build/floor_bench lathe:cuda 3 memcpy | head -1
    done
fi
if [ "$what" = cudnn ]; then
  gcc -O2 -o /tmp/lathe_cudnn_engines bench/cudnn_engines.c -ldl && /tmp/lathe_cudnn_engines
fi
if [ "$what" = steps ] || [ "$what" = all ]; then
  "$bin/gvj" -gpu -lathe "${LATHE_BENCH_LATHE:-lathe:cuda;lathe:cuda,tf32=1}" -only "${LATHE_BENCH_ONLY:-}" \
    -xla "$xla" -python python3 -go-rounds 0 -rounds "$rounds" -warmup 3
fi
if [ "$what" = lm ]; then
  # each contender alone (-serial): JAX may grow to 90% of the card, XLA's PJRT client does not
  # preallocate (go-xla's default on CUDA, said explicitly)
  XLA_PYTHON_CLIENT_MEM_FRACTION=.9 "$bin/gvj" -gpu -lm -lm-sizes "${LATHE_BENCH_LM_SIZES:-small,gpt2}" -serial -lathe "${LATHE_BENCH_LATHE:-lathe:cuda;lathe:cuda,tf32=1}" \
    -only "${LATHE_BENCH_ONLY:-}" -xla "${xla:+$xla,preallocate=false}" -python python3 -torch python3 \
    -go-rounds 0 -rounds "$rounds" -warmup 2
fi
