package lathe

import (
	"os"
	"slices"
	"testing"

	"github.com/lathe-dev/lathe/compute/lathe/internal/gensrc/srclist"
)

// TestEngineSourcesCurrent fails when the generated files do not match the engine: a new or
// removed C file under src/ (the zsrc_*.c wrappers), an edited source, header or table (the hash
// in zsrc_stamp.go) or an edited op table (zops.go) needs `go generate ./compute/lathe`.
func TestEngineSourcesCurrent(t *testing.T) {
	want, err := srclist.Engine("../..")
	if err != nil {
		t.Fatal(err)
	}
	have, err := srclist.Wrappers(".")
	if err != nil {
		t.Fatal(err)
	}
	var missing, stale, extra []string
	for name, content := range want {
		data, err := os.ReadFile(name)
		switch {
		case err != nil:
			missing = append(missing, name)
		case string(data) != content:
			stale = append(stale, name)
		}
	}
	for _, name := range have {
		if _, ok := want[name]; !ok {
			extra = append(extra, name)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	if len(missing)+len(stale)+len(extra) > 0 {
		t.Errorf("generated files out of date (run `go generate ./compute/lathe`): missing %v, stale %v, extra %v",
			missing, stale, extra)
	}
}
