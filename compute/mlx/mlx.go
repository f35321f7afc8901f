// Package mlx registers the "mlx" GoMLX compute backend: lathe's engine with its MLX device
// (src/mlx), which replays lathe programs as Apple MLX (mlx::core) calls on MLX's CPU or GPU.
//
// Import it for its side effect:
//
//	import _ "github.com/lathe-dev/lathe/compute/mlx"
//	backend, err := compute.NewWithConfig("mlx:dynamic")
//
// Configurations (docs/MLX.md): "mlx" replays each program inside mx::compile (fused, retraced
// per shape), "mlx:dynamic" replays the op tape on each run's inputs (dynamic axes without
// recompiling), "lazy_contiguous" leaves view outputs strided until the host reads them, and
// "cpu" or "gpu" picks MLX's device (default: its GPU when it has one), e.g.
// "mlx:gpu,dynamic,lazy_contiguous".
//
// Graph building, validation and the Go layer are lathe's (compute/lathe). The MLX device is
// compiled in with the build tag mlx (go build -tags mlx, with MLX where compute/lathe/mlx.go
// looks for it); without it the package still builds, and creating the backend fails with an
// error that says so.
package mlx

import (
	"github.com/gomlx/compute"
	"github.com/lathe-dev/lathe/compute/lathe"
)

// BackendName is the name registered with compute.Register.
const BackendName = "mlx"

func init() {
	compute.Register(BackendName, New)
}

// New creates an mlx backend from the configuration after "mlx:" ("", "dynamic",
// "dynamic,lazy_contiguous", "gpu", ...).
func New(config string) (compute.Backend, error) { return lathe.NewNamed(BackendName, config) }
