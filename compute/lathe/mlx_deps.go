//go:build mlx && !mlx_dir

package lathe

// MLX from the clone's .deps/mlx/mlx (scripts/setup.sh); the tag mlx_dir leaves MLX's folder
// to CGO_CXXFLAGS and CGO_LDFLAGS instead (mlx.go).

/*
#cgo CXXFLAGS: -I${SRCDIR}/../../.deps/mlx/mlx/include
#cgo LDFLAGS: -L${SRCDIR}/../../.deps/mlx/mlx/lib -Wl,-rpath,${SRCDIR}/../../.deps/mlx/mlx/lib
*/
import "C"
