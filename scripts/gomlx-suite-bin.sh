#!/usr/bin/env bash
# Runs GoMLX test binaries compiled by `GOMLX_SUITE_COMPILE=DIR scripts/gomlx-suite.sh` on a
# machine without Go (the GPU machine), each in a scratch folder, JOBS at a time, and writes one
# log per binary (test2json framing) into LOGDIR; `GOMLX_SUITE_LOGS=LOGDIR scripts/gomlx-suite.sh
# BACKEND` counts them back where Go is. GOMLX_SUITE_RUN as in gomlx-suite.sh; GOMLX_SUITE_TIMEOUT
# (seconds, default 1200) bounds each binary.
# Usage: scripts/gomlx-suite-bin.sh BACKEND BINDIR LOGDIR [JOBS]
set -euo pipefail
backend=$1 bins=$(cd "$2" && pwd) logs=$3 jobs=${4:-4}
mkdir -p "$logs"
logs=$(cd "$logs" && pwd)
export GOMLX_BACKEND=$backend GOMLX_SUITE_RUN=${GOMLX_SUITE_RUN:-.}
one() {
  name=$(basename "$1" .test)
  dir=$(mktemp -d)
  if [ -d "${1%.test}.data" ]; then cp -r "${1%.test}.data/." "$dir/"; fi
  (cd "$dir" && timeout "${GOMLX_SUITE_TIMEOUT:-1200}" "$1" -test.v=test2json -test.short -test.count=1 -test.timeout 20m \
    -test.run "$GOMLX_SUITE_RUN" >"$2/$name.log" 2>&1) || true
  rm -rf "$dir"
}
export -f one
ls "$bins"/*.test | xargs -P "$jobs" -I{} bash -c 'one {} '"$logs"
echo "gomlx-suite-bin: $(ls "$logs" | wc -l) logs in $logs"
