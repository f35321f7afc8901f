//go:build mlx

package lathe

// With the build tag mlx, the engine compiles with its MLX device (src/mlx, C++20, through the
// zsrc_mlx_*.cpp wrappers) and links libmlx, which registers the "mlx" backend (compute/mlx).
// MLX is found in .deps/mlx/mlx (the mlx-cpu wheel that scripts/setup.sh installs); another MLX
// (the mlx-cuda-13 wheel, Homebrew's) is given with CGO_CXXFLAGS=-I<mlx>/include and
// CGO_LDFLAGS="-L<mlx>/lib -Wl,-rpath,<mlx>/lib" (docs/MLX.md).

/*
#cgo CFLAGS: -DLATHE_WITH_MLX
#cgo CXXFLAGS: -std=c++20 -O2 -I${SRCDIR}/../../include -I${SRCDIR}/../../.deps/mlx/mlx/include
#cgo LDFLAGS: -L${SRCDIR}/../../.deps/mlx/mlx/lib -Wl,-rpath,${SRCDIR}/../../.deps/mlx/mlx/lib -lmlx -lstdc++
*/
import "C"
