package lathe

/*
#include "lathe.h"
*/
import "C"

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/compute"
)

// Option is one option of a device linked into this build, from the engine's registry
// (lathe_backend_option): what the configs "lathe:cpu,threads=2" or "mlx:dynamic" accept.
type Option struct {
	Config  string // what it follows: "lathe:cpu", "lathe:cuda", "mlx"
	Name    string // "threads"
	Values  string // "N", "0|1", "auto|baseline|avx2|avx512"; "" for a flag ("dynamic")
	Bare    bool   // a value alone selects it ("mlx:cpu" is "mlx:device=cpu")
	Default string // in words
	Doc     string // one line
}

// Options lists the options of every device linked into this build, in the registry's order.
func Options() []Option {
	var out []Option
	var info C.lathe_option_info
	for i := 0; C.lathe_backend_option(C.int(i), &info); i++ {
		out = append(out, Option{
			Config: C.GoString(info.config), Name: C.GoString(info.name), Values: C.GoString(info.values),
			Bare: bool(info.bare), Default: C.GoString(info.def), Doc: C.GoString(info.doc),
		})
	}
	return out
}

// OptionsHelp formats Options as lines for a command's -h: "lathe:cpu,threads=N  doc (default: ...)".
func OptionsHelp() string {
	var b strings.Builder
	for _, o := range Options() {
		form := o.Config + "," + o.Name
		if o.Config == "mlx" {
			form = o.Config + ":" + o.Name
		}
		if o.Values != "" {
			form += "=" + o.Values
		}
		fmt.Fprintf(&b, "  %-40s %s (default: %s)\n", form, o.Doc, o.Default)
	}
	return b.String()
}

// NewWithConfig is compute.NewWithConfig without its panics, for programs that take a backend
// config from their user: a name no package registered is an error of one line that lists the
// registered backends (and, for "mlx", says what brings it in), instead of a panic.
func NewWithConfig(config string) (compute.Backend, error) {
	name, _, _ := strings.Cut(config, ":")
	registered := compute.List()
	if config != "" && !slices.Contains(registered, name) {
		if name == "mlx" {
			return nil, fmt.Errorf("backend %q is not in this program: it needs the import "+
				"_ \"github.com/lathe-dev/lathe/compute/mlx\" and a build with -tags mlx (docs/MLX.md)", config)
		}
		known := slices.Clone(registered)
		seen := map[string]bool{}
		for _, o := range Options() {
			if strings.HasPrefix(o.Config, BackendName+":") && !seen[o.Config] {
				seen[o.Config] = true
				known = append(known, o.Config)
			}
		}
		slices.Sort(known)
		return nil, fmt.Errorf("unknown backend %q; known: %s (options after a comma: lathe:cpu,threads=2)",
			config, strings.Join(known, ", "))
	}
	return compute.NewWithConfig(config)
}
