#!/usr/bin/env bash
# Sets up and runs the second example: a small character-level transformer (GoMLX's zoo
# transformer: embeddings, RoPE, causal attention, layer norm) trained on lathe on GoMLX's own
# documentation (the markdown files of the GoMLX module, from the Go module proxy), then sampled.
# Extra arguments go to the program, e.g. -steps 2000 or -backend lathe:cpu,threads=2 (GoMLX's go
# backend, -backend go, runs it about 9x slower: docs/GO.md). Set-up as for the demo: no wheels.
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
cd "$(dirname "$0")/.."
LATHE_NVRTC=0 LATHE_MLX=0 ./scripts/setup.sh
gomlx=$(go list -m -f '{{.Dir}}' github.com/gomlx/gomlx)
[ -n "$gomlx" ] || { go mod download github.com/gomlx/gomlx; gomlx=$(go list -m -f '{{.Dir}}' github.com/gomlx/gomlx); }
# go run prints nothing while cgo compiles the C engine: say so (1-2 minutes on 2 cores the
# first time; Go's build cache makes later runs start at once).
mkdir -p build
echo "building lathe-textgen (the first build compiles lathe's C engine through cgo: 1-2 minutes)..."
go build -o build/lathe-textgen ./cmd/lathe-textgen
exec build/lathe-textgen -text "$gomlx" "$@"
