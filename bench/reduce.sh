#!/bin/sh
# reduce.sh -- column sums (bias gradients) on lathe:cuda (build/reduce_bench) against PyTorch's
# x.sum(0) (bench/reduce_torch.py), run alternately ROUNDS times, then per case the median time of
# each and their ratio (lathe / torch: under 1 is faster).
#
#   make bench && bench/reduce.sh [rounds (3)] [repeats (20)]
set -eu
ROUNDS=${1:-3}
REPEATS=${2:-20}
BUILD=${BUILD:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
i=1
while [ "$i" -le "$ROUNDS" ]; do
  "$BUILD/reduce_bench" "${LATHE_CONFIG:-lathe:cuda}" "$REPEATS" | tee -a "$TMP/lathe" >&2
  python3 "$(dirname "$0")/reduce_torch.py" "$REPEATS" | tee -a "$TMP/torch" >&2
  i=$((i + 1))
done
python3 - "$TMP/lathe" "$TMP/torch" <<'PY'
import re, statistics, sys
def read(path, key):
    by = {}
    for line in open(path):
        m = re.match(r"reduce (dtype=\S+ rows=\d+ cols=\d+) %s=([\d.]+)" % key, line)
        if m:
            by.setdefault(m.group(1), []).append(float(m.group(2)))
    return {k: statistics.median(v) for k, v in by.items()}
lathe, torch = read(sys.argv[1], "lathe_us"), read(sys.argv[2], "torch_us")
print("%-36s %10s %10s %7s" % ("column sum", "lathe us", "torch us", "ratio"))
for k in lathe:
    if k in torch:
        print("%-36s %10.2f %10.2f %7.2f" % (k, lathe[k], torch[k], lathe[k] / torch[k]))
PY
