#!/bin/sh
# allreduce.sh -- lathe's AllReduce (build/allreduce_bench on lathe:cuda) against PyTorch's NCCL
# all_reduce (bench/allreduce_torch.py) on 2 GPUs, run alternately (lathe, torch, lathe, torch,
# ...: ROUNDS sweeps each), then per size the median bus bandwidth of each over the rounds and
# their ratio. Target (issue 12): lathe >= 0.9x torch at >= 64 MB.
#
#   make bench && bench/allreduce.sh [rounds (2)] [repeats (20)] [max MB (1024)]
#
# Both use the same NCCL: unless LATHE_NCCL_LIBRARY is set, lathe is pointed at the libnccl.so.2
# of PyTorch's nvidia-nccl wheel when there is one (else lathe finds libnccl.so.2 on the library
# path). NVRTC as usual.
set -eu
if [ -z "${LATHE_NCCL_LIBRARY:-}" ]; then
  dir=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  if [ -n "$dir" ] && [ -f "$dir/lib/libnccl.so.2" ]; then export LATHE_NCCL_LIBRARY="$dir/lib/libnccl.so.2"; fi
fi
echo "# lathe's NCCL: ${LATHE_NCCL_LIBRARY:-libnccl.so.2 from the library path}" >&2
ROUNDS=${1:-2}
REPEATS=${2:-20}
MAXMB=${3:-1024}
BUILD=${BUILD:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
i=1
while [ "$i" -le "$ROUNDS" ]; do
  "$BUILD/allreduce_bench" "${LATHE_CONFIG:-lathe:cuda}" "$REPEATS" "$MAXMB" | tee -a "$TMP/lathe" >&2
  python3 "$(dirname "$0")/allreduce_torch.py" "$REPEATS" "$MAXMB" | tee -a "$TMP/torch" >&2
  i=$((i + 1))
done
python3 - "$TMP/lathe" "$TMP/torch" <<'PY'
import re, statistics, sys
def read(path, key):
    by = {}
    for line in open(path):
        m = re.match(r"allreduce bytes=(\d+) %s=([\d.]+)" % key, line)
        if m:
            by.setdefault(int(m.group(1)), []).append(float(m.group(2)))
    return {b: statistics.median(v) for b, v in by.items()}
lathe, torch = read(sys.argv[1], "lathe_busbw_gbs"), read(sys.argv[2], "torch_busbw_gbs")
print("%10s %12s %12s %7s" % ("size", "lathe GB/s", "torch GB/s", "ratio"))
for b in sorted(set(lathe) | set(torch)):
    l, t = lathe.get(b), torch.get(b)
    size = "%d MB" % (b >> 20)
    ratio = "%.2f" % (l / t) if l and t else "-"
    print("%10s %12s %12s %7s" % (size, "%.1f" % l if l else "-", "%.1f" % t if t else "-", ratio))
PY
