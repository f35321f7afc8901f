#!/usr/bin/env bash
# Sets up and runs the main job: GoMLX v0.28.7 trains a handwritten-digit classifier (GoMLX's
# layers, autodiff, Adam and training loop) on lathe, on the digits bundled in scikit-learn's
# wheel. Extra arguments go to the demo, e.g. -backend go to compare with GoMLX's Go backend.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/setup-data.sh
exec go run ./cmd/lathe-demo "$@"
