#!/usr/bin/env bash
# Where Go is: packs what scripts/cuda-check.sh needs on a GPU machine that has no Go -- the Go
# compliance test binary (compute/lathe) and GoMLX's test binaries (scripts/gomlx-suite.sh's
# compile mode, with their data files) -- into DIR/bundle.tar.xz (about 30 MB: xz with a large
# dictionary shares the binaries' common code). The C code travels as source and builds there.
# GOMLX_SUITE_PKGS picks the GoMLX packages (default: the nine that docs/CUDA.md reports).
# Usage: scripts/cuda-pack.sh DIR
set -euo pipefail
export GOTOOLCHAIN=go1.27.3 # go.mod needs Go 1.27: the go command fetches this toolchain once
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mkdir -p "$1" && cd "$1" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GOMLX_SUITE_PKGS=${GOMLX_SUITE_PKGS:-./core/graph ./core/tensors ./core/tensors/dtensor ./ml/dataset ./ml/model ./ml/train ./ml/train/optimizer ./ml/layers ./ml/layers/attention}
(cd "$repo" && go test -c -ldflags='-s -w' -o "$tmp/lathe.test" ./compute/lathe)
GOMLX_SUITE_COMPILE=$tmp/suite GOMLX_SUITE_DIR=$tmp/scratch "$repo/scripts/gomlx-suite.sh" lathe:cuda
rm -rf "$tmp/scratch"
tar -C "$tmp" -cf - lathe.test suite | xz -T2 --lzma2=preset=6,dict=256MiB >"$dir/bundle.tar.xz"
echo "cuda-pack: $(du -h "$dir/bundle.tar.xz" | cut -f1) in $dir/bundle.tar.xz; on the GPU machine: scripts/cuda-check.sh $1"
