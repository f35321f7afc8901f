// Command gensrc writes one cgo wrapper file per C source of the lathe engine into the
// current directory (compute/lathe): cgo compiles only the .c files of the package's own
// directory, so each wrapper includes one engine file. Stale wrappers are removed. It also
// writes zsrc_stamp.go (a hash of the engine sources, so that go build sees edits to them) and
// zops.go (op methods from include/lathe_ops.def).
//
// Run it with `go generate ./compute/lathe` after editing, adding or removing engine sources.
package main

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/lathe-dev/lathe/compute/lathe/internal/gensrc/srclist"
)

func main() {
	root := "../.."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	want, err := srclist.Engine(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gensrc:", err)
		os.Exit(1)
	}
	have, err := srclist.Wrappers(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gensrc:", err)
		os.Exit(1)
	}
	var changed []string
	for name, content := range want {
		if old, err := os.ReadFile(name); err == nil && string(old) == content {
			continue
		}
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gensrc:", err)
			os.Exit(1)
		}
		changed = append(changed, name)
	}
	for _, name := range have {
		if _, ok := want[name]; !ok {
			if err := os.Remove(name); err != nil {
				fmt.Fprintln(os.Stderr, "gensrc:", err)
				os.Exit(1)
			}
			changed = append(changed, name+" (removed)")
		}
	}
	slices.Sort(changed)
	fmt.Printf("gensrc: %d generated files, %d changed: %s\n", len(want), len(changed), strings.Join(changed, " "))
}
