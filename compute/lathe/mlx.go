//go:build mlx

package lathe

// With the build tag mlx, the engine compiles with its MLX device (src/mlx, C++20, through the
// zsrc_mlx_*.cpp wrappers) and links libmlx, which registers the "mlx" backend (compute/mlx).
// MLX is found in .deps/mlx/mlx (the mlx-cpu wheel that scripts/setup.sh installs: mlx_deps.go),
// and the binary then finds libmlx there through its RUNPATH, inside this clone. For a binary
// that does not depend on the clone, or another MLX (the mlx-cuda-13 wheel, Homebrew's), add
// the tag mlx_dir and name MLX's folder yourself (docs/MLX.md):
//
//	MLX_DIR=/usr/local/lib/lathe/mlx   # what `make install` puts there, or any MLX prefix
//	CGO_CXXFLAGS="-I$MLX_DIR/include" CGO_LDFLAGS="-L$MLX_DIR/lib -Wl,-rpath,$MLX_DIR/lib" \
//	  go build -tags mlx,mlx_dir ./...

/*
#cgo CFLAGS: -DLATHE_WITH_MLX
#cgo CXXFLAGS: -std=c++20 -O2 -I${SRCDIR}/../../include
#cgo LDFLAGS: -lmlx -lstdc++
*/
import "C"
