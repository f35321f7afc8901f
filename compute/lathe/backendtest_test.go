package lathe_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lathe-dev/lathe/compute/internal/compliance"
)

// backendtestConfigs are the lathe configurations GoMLX's compliance suite runs on: the
// default, fusion off, and the test device (two devices, every job completed late on purpose,
// so results are read while work is still queued).
var backendtestConfigs = []string{"lathe:cpu", "lathe:cpu,fuse=0", "lathe:cpu,devices=2,async=late"}

func TestMain(m *testing.M) {
	code := m.Run()
	compliance.PrintSummary()
	os.Exit(code)
}

// TestBackendTestChild runs GoMLX's conformance suite inside the child process started by
// TestBackendTest, which counts its subtests.
func TestBackendTestChild(t *testing.T) { compliance.Child(t) }

// TestBackendTest runs backendtest.RunAll for each configuration in a child process and reports
// how many leaf subtests passed, were skipped (ops the engine reports as unsupported) and failed.
func TestBackendTest(t *testing.T) {
	if os.Getenv(compliance.ChildEnv) != "" {
		t.Skip("child process")
	}
	configs := backendtestConfigs
	if env := os.Getenv("LATHE_BACKENDTEST_CONFIGS"); env != "" {
		configs = strings.Split(env, ";") // e.g. "lathe:cuda;lathe:cuda,fuse=0" on a GPU machine
	}
	for _, config := range configs {
		t.Run(config, func(t *testing.T) { compliance.Run(t, config, "TestBackendTestChild") })
	}
}
