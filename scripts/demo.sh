#!/usr/bin/env bash
# Sets up and runs the main job: GoMLX trains a handwritten-digit classifier (GoMLX's
# layers, autodiff, Adam and training loop) on lathe, on the digits bundled in scikit-learn's
# wheel. Extra arguments go to the demo, e.g. -backend go to compare with GoMLX's Go backend.
# Set-up is only what the demo needs: OpenBLAS and a C compiler (apt), the Go modules, the digits
# data (from scikit-learn's wheel); not the NVRTC and MLX wheels of the tests.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
cd "$(dirname "$0")/.."
LATHE_NVRTC=0 LATHE_MLX=0 ./scripts/setup.sh
go mod download
./scripts/setup-data.sh
# go run prints nothing while cgo compiles the C engine: say so (1-2 minutes on 2 cores the
# first time; Go's build cache makes later runs start at once).
mkdir -p build
echo "building lathe-demo (the first build compiles lathe's C engine through cgo: 1-2 minutes)..."
go build -o build/lathe-demo ./cmd/lathe-demo
exec build/lathe-demo "$@"
