#!/usr/bin/env bash
# Sets up and runs the main job: a small MLP classifier trained through GoMLX's compute API on
# the default backend (lathe). Extra arguments go to the demo, e.g. -backend go.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec go run ./cmd/lathe-demo "$@"
