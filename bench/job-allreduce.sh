#!/bin/sh
# job-allreduce.sh -- lathe's AllReduce across the processes of a job (build/job_allreduce_bench,
# Gloo through lathe's coordinator) against PyTorch's gloo backend (bench/job_allreduce_torch.py)
# on this host's loopback, run alternately (lathe, torch, lathe, torch, ...: ROUNDS sweeps each, for
# each process count), then per size the median time and bus bandwidth of each and their ratio
# (above 1: lathe is faster). Target (issue 22): lathe >= 0.9x torch's gloo at >= 16 MB.
#
#   make build/liblathe_gloo.so build/job_allreduce_bench && bench/job-allreduce.sh [rounds (3)] [P list ("2 4")]
#
# PYTHON names a Python with torch (default python3).
set -eu
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
ROUNDS=${1:-3}
PS=${2:-2 4}
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
DIR=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export LATHE_GLOO_LIBRARY=${LATHE_GLOO_LIBRARY:-$PWD/$BUILD/liblathe_gloo.so}
go build -o "$TMP/lathe-launch" "$DIR/../cmd/lathe-launch"
for P in $PS; do
  i=1
  while [ "$i" -le "$ROUNDS" ]; do
    "$TMP/lathe-launch" -n "$P" "$BUILD/job_allreduce_bench" | tee -a "$TMP/lathe$P" >&2
    "$PY" "$DIR/job_allreduce_torch.py" "$P" | tee -a "$TMP/torch$P" >&2
    i=$((i + 1))
  done
done
"$PY" - "$TMP" $PS <<'PY'
import os, re, statistics, sys
def read(path):
    by = {}
    for line in open(path):
        m = re.match(r"(?:\[\d+\])?\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s*$", line)
        if m:
            by.setdefault(int(m.group(1)), []).append((float(m.group(2)), float(m.group(3))))
    return {k: (statistics.median(t for t, _ in v), statistics.median(b for _, b in v)) for k, v in by.items()}
tmp = sys.argv[1]
print("%3s %8s %12s %12s %16s %16s %7s" % ("P", "KB", "lathe ms", "torch ms", "lathe GB/s", "torch gloo GB/s", "ratio"))
for P in sys.argv[2:]:
    lathe, torch = read(os.path.join(tmp, "lathe" + P)), read(os.path.join(tmp, "torch" + P))
    for kb in sorted(set(lathe) | set(torch)):
        l, t = lathe.get(kb), torch.get(kb)
        f = lambda v, i: "%.3f" % v[i] if v else "-"
        print("%3s %8d %12s %12s %16s %16s %7s" % (P, kb, f(l, 0), f(t, 0), f(l, 1), f(t, 1),
                                                    "%.2f" % (l[1] / t[1]) if l and t else "-"))
print("ms: one AllReduce; bus bandwidth: bytes * 2(P-1)/P / time; medians over the rounds; both sides Debian's/PyPI's Gloo over TCP")
PY
