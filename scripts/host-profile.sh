#!/usr/bin/env bash
# Where a program's host time goes, on a machine without perf or gdb (the GPU machine): a sampling
# profiler preloaded into it (scripts/hostprof/sampler.c, SIGPROF on CPU time, every thread), then
# each function's inclusive and self share of the samples. Functions of the program itself are
# named through addr2line; libraries by their exported symbols (a stripped libcuda counts as one).
# Usage: scripts/host-profile.sh [-us N] [-top N] PROGRAM [ARGS...]
#   e.g. scripts/host-profile.sh build/floor_bench lathe:cuda 400 Execute
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
us=250 top=40
while [ $# -gt 0 ]; do
  case $1 in
    -us) us=$2; shift 2 ;;
    -top) top=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-us N] [-top N] PROGRAM [ARGS...]"; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -shared -fPIC -o "$tmp/sampler.so" "$here/hostprof/sampler.c" -ldl || exit 1
HOSTPROF_US=$us HOSTPROF_OUT="$tmp/samples" LD_PRELOAD="$tmp/sampler.so" "$@"
rc=$?
[ -s "$tmp/samples" ] && python3 "$here/hostprof/report.py" "$tmp/samples" "$(command -v "$1" || echo "$1")" "$top"
exit $rc
