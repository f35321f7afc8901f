#!/usr/bin/env bash
# Sets up and runs the main job: GoMLX v0.28.7 trains a handwritten-digit classifier (GoMLX's
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
exec go run ./cmd/lathe-demo "$@"
