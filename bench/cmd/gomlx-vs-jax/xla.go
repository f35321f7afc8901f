package main

import "github.com/lathe-dev/lathe/bench/internal/xlapeer"

// xlaConfig returns the configuration of GoMLX's xla backend on XLA's PJRT plugin, offline
// (xlapeer.Config).
func xlaConfig(cfg string) (string, error) { return xlapeer.Config(cfg) }
