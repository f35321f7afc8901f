package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/go-xla/compute/xla" // registers "xla"
)

// xlaConfig returns the configuration of GoMLX's xla backend on XLA's CPU PJRT plugin: the one in
// PJRT_PLUGIN_LIBRARY_PATH, else the one setup.sh unpacks into .deps/pjrt-cpu. It keeps the
// backend from downloading plugins (GOMLX_NO_AUTO_INSTALL: the benchmark must run offline) and
// fails when no plugin is there.
func xlaConfig() (string, error) {
	xla.EnableAutoInstall(false)
	if err := os.Setenv(xla.NoAutoInstallEnv, "1"); err != nil {
		return "", err
	}
	dir := os.Getenv("PJRT_PLUGIN_LIBRARY_PATH")
	if dir == "" {
		abs, err := filepath.Abs(filepath.Join(".deps", "pjrt-cpu"))
		if err != nil {
			return "", err
		}
		dir = abs
	}
	plugin := filepath.Join(dir, "pjrt_c_api_cpu_plugin.so")
	if _, err := os.Stat(plugin); err != nil {
		return "", fmt.Errorf("no pjrt_c_api_cpu_plugin.so in %s (LATHE_BENCH_XLA=1 bench/cmd/gomlx-vs-jax/setup.sh installs it)", dir)
	}
	// The plugin's absolute path as the configuration: go-xla reads PJRT_PLUGIN_LIBRARY_PATH
	// when the program starts, before this runs.
	return "xla:" + plugin, nil
}
