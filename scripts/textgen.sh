#!/usr/bin/env bash
# Sets up and runs the second example: a small character-level transformer (GoMLX v0.28.7's zoo
# transformer: embeddings, RoPE, causal attention, layer norm) trained on lathe on GoMLX's own
# documentation (the markdown files of the GoMLX module, from the Go module proxy), then sampled.
# Extra arguments go to the program, e.g. -backend go or -steps 2000.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
gomlx=$(go list -m -f '{{.Dir}}' github.com/gomlx/gomlx)
[ -n "$gomlx" ] || { go mod download github.com/gomlx/gomlx; gomlx=$(go list -m -f '{{.Dir}}' github.com/gomlx/gomlx); }
exec go run ./cmd/lathe-textgen -text "$gomlx" "$@"
