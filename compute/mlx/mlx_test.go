package mlx_test

import (
	"os"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/lathe-dev/lathe/compute/internal/compliance"
	_ "github.com/lathe-dev/lathe/compute/mlx"
)

// backendtestConfigs are the mlx configurations GoMLX's compliance suite runs on, on MLX's CPU
// (LATHE_MLX_DEVICE=gpu runs them on its GPU).
func backendtestConfigs() []string {
	dev := os.Getenv("LATHE_MLX_DEVICE")
	if dev == "" {
		dev = "cpu"
	}
	return []string{"mlx:" + dev, "mlx:" + dev + ",dynamic", "mlx:" + dev + ",dynamic,lazy_contiguous"}
}

func TestMain(m *testing.M) {
	code := m.Run()
	compliance.PrintSummary()
	os.Exit(code)
}

// skipWithoutMLX skips when lathe was built without its MLX device (no build tag mlx).
func skipWithoutMLX(t *testing.T) {
	b, err := compute.NewWithConfig("mlx:cpu")
	if err != nil {
		if strings.Contains(err.Error(), "built without MLX") {
			t.Skipf("skipped: %v", err)
		}
		t.Fatalf("mlx:cpu: %+v", err)
	}
	b.Finalize()
}

func TestBackendTestChild(t *testing.T) { compliance.Child(t) }

func TestBackendTest(t *testing.T) {
	if os.Getenv(compliance.ChildEnv) != "" {
		t.Skip("child process")
	}
	skipWithoutMLX(t)
	for _, config := range backendtestConfigs() {
		t.Run(config, func(t *testing.T) { compliance.Run(t, config, "TestBackendTestChild") })
	}
}

// The compiled configuration retraces per binding (Recompiling); mlx:dynamic replays one tape on
// every binding (Native). CumSum is lowered on both.
func TestCapabilitiesDynamicShapes(t *testing.T) {
	skipWithoutMLX(t)
	for config, want := range map[string]compute.DynamicShapesSupport{
		"mlx:cpu":         compute.DynamicShapesRecompiling,
		"mlx:cpu,dynamic": compute.DynamicShapesNative,
	} {
		b, err := compute.NewWithConfig(config)
		if err != nil {
			t.Fatalf("%s: %+v", config, err)
		}
		caps := b.Capabilities()
		if caps.DynamicShapes != want || !caps.DynamicAxes {
			t.Errorf("%s: DynamicShapes %v, DynamicAxes %v; want %v, true", config, caps.DynamicShapes, caps.DynamicAxes, want)
		}
		if !caps.Operations[compute.OpTypeCumSum] {
			t.Errorf("%s: CumSum missing from capabilities", config)
		}
		b.Finalize()
	}
}
