// Package xlapeer configures GoMLX's xla backend (go-xla) as a peer in lathe's benchmarks, offline.
package xlapeer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/go-xla/compute/xla" // registers "xla"
)

// Config returns the configuration of GoMLX's xla backend (cfg: xla:cpu or xla:cuda, options
// after a comma as go-xla takes them, e.g. xla:cuda,preallocate=false) on XLA's PJRT
// plugin pjrt_c_api_<device>_plugin.so: the one in
// PJRT_PLUGIN_LIBRARY_PATH, else the one bench/cmd/gomlx-vs-jax/setup.sh unpacks into
// .deps/pjrt-cpu. It keeps the backend from downloading plugins (GOMLX_NO_AUTO_INSTALL: the
// benchmarks must run offline) and fails when no plugin is there.
func Config(cfg string) (string, error) {
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
	cfg, opts, _ := strings.Cut(cfg, ",")
	if opts != "" {
		opts = "," + opts
	}
	device := strings.TrimPrefix(cfg, "xla:")
	if device == "" || device == cfg {
		device = "cpu"
	}
	file := "pjrt_c_api_" + device + "_plugin.so"
	plugin := filepath.Join(dir, file)
	if _, err := os.Stat(plugin); err != nil {
		return "", fmt.Errorf("no %s in %s (for xla:cpu, LATHE_BENCH_XLA=1 bench/cmd/gomlx-vs-jax/setup.sh installs it; for xla:cuda, ../shared/PLATFORM.md says how JAX's CUDA plugin serves)", file, dir)
	}
	// The plugin's absolute path as the configuration: go-xla reads PJRT_PLUGIN_LIBRARY_PATH
	// when the program starts, before this runs.
	return "xla:" + plugin + opts, nil
}
