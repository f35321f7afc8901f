package lathe

import (
	"os"
	"strings"
	"testing"
)

// TestConfigOptionsDocumented checks that every option of the engine's registry appears in its
// device's doc (docs/CPU.md, docs/CUDA.md, docs/MLX.md), so the docs list what the code accepts.
func TestConfigOptionsDocumented(t *testing.T) {
	docs := map[string]string{"lathe:cpu": "../../docs/CPU.md", "lathe:cuda": "../../docs/CUDA.md", "mlx": "../../docs/MLX.md"}
	opts := Options()
	if len(opts) < 8 {
		t.Fatalf("Options() lists %d options, want those of lathe:cpu and lathe:cuda at least", len(opts))
	}
	for _, o := range opts {
		path, ok := docs[o.Config]
		if !ok {
			t.Errorf("option %s of %s: no doc file known for it", o.Name, o.Config)
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want := o.Name + "="
		if o.Values == "" {
			want = o.Name + "`"
		}
		if !strings.Contains(string(data), want) {
			t.Errorf("%s does not document option %q of %s (looked for %q)", path, o.Name, o.Config, want)
		}
		if o.Doc == "" || o.Default == "" {
			t.Errorf("option %s of %s has no doc line or default", o.Name, o.Config)
		}
	}
	if h := OptionsHelp(); !strings.Contains(h, "lathe:cpu,threads=N") || !strings.Contains(h, "lathe:cuda,tf32=0|1") {
		t.Errorf("OptionsHelp:\n%s", h)
	}
}

// TestConfigErrors checks the one-line errors of configs a user mistypes.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{"Lathe", `unknown backend "Lathe"; known: `},
		{"lathe:cpu threads=2", `lathe:cpu: malformed option " threads=2"`},
		{"lathe:cpu,bogus=1", `unknown option "bogus=1"; known options: threads=N`},
	} {
		b, err := NewWithConfig(c.config)
		if err == nil {
			b.Finalize()
			t.Errorf("%s: no error", c.config)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: want one line containing %q, got %q", c.config, c.want, msg)
		}
	}
	if _, err := NewWithConfig("Lathe"); err == nil || !strings.Contains(err.Error(), "lathe:cpu") {
		t.Errorf("the known list names lathe:cpu: %v", err)
	}
}
