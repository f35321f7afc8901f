package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"math"
	"os"
	"strings"
	"testing"
)

// testdata/affine.json is a real trace: lathe:cpu compiling y = Transpose(x*2+1) over
// Float32[2,3] and executing it twice (docs/PROFILING.md shows how it was made).
func TestSummary(t *testing.T) {
	rep := summarize(loadFile(t, "testdata/affine.json"))
	if rep.Runs != 2 || rep.Compiles != 1 || rep.Transfers != 3 {
		t.Errorf("runs %d compiles %d transfers %d, want 2 1 3", rep.Runs, rep.Compiles, rep.Transfers)
	}
	if len(rep.Steps) != 2 || rep.Steps[0].Name != "fused:Mul+Add" || rep.Steps[0].Count != 2 || rep.Steps[0].Family != "fused LOOP" {
		t.Fatalf("steps: %+v", rep.Steps)
	}
	if r := rate(rep.Steps[0]); !strings.HasSuffix(r, "B/s") {
		t.Errorf("a fused LOOP region has a rate, got %q", r)
	}
	if r := rate(rep.Steps[1]); r != "-" {
		t.Errorf("a Transpose (LAYOUT) has none, got %q", r)
	}
	var sum float64
	for _, f := range rep.Families {
		sum += share(f.TotalUs, rep.StepUs)
	}
	if sum < 99.9 || sum > 100.1 {
		t.Errorf("family shares sum to %.2f%%", sum)
	}
	var out bytes.Buffer
	printReport(&out, rep, 1)
	for _, want := range []string{"2 execution(s)", "fused:Mul+Add [fused LOOP]", "(1 more)", "LAYOUT", "peak device memory: 120 bytes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// A trace cut short (the process died before the backend was freed) is read up to its last event.
func TestTruncated(t *testing.T) {
	data, err := os.ReadFile("testdata/affine.json")
	if err != nil {
		t.Fatal(err)
	}
	cut := data[:bytes.Index(data, []byte(`"name":"run affine"`))]
	events, err := load(cut)
	if err != nil {
		t.Fatal(err)
	}
	if rep := summarize(events); rep.Runs != 0 || len(rep.Steps) != 2 || rep.Compiles != 1 {
		t.Errorf("cut trace: runs %d steps %d compiles %d", rep.Runs, len(rep.Steps), rep.Compiles)
	}
	if _, err := load([]byte("not json")); err == nil {
		t.Error("no error for a file that is not a trace")
	}
}

// testdata/while-cuda.json.gz is a real trace from an H200: the conformance rows of
// while_fibonacci_and_tensor_state on lathe:cuda (LATHE_TRACE=... build/test_ops -b lathe:cuda
// while_fibonacci_and_tensor_state), each row run on lathe:cuda and on lathe:cpu, the reference.
// Its steps' times are the GPU's, and the While contains its body's steps.
func TestGPUSummary(t *testing.T) {
	events := loadFile(t, "testdata/while-cuda.json.gz")
	rep := summarize(events)
	if !rep.GPU || rep.GPURuns != 4 || rep.Runs != 8 {
		t.Fatalf("GPU steps %v, GPU runs %d, runs %d; want true, 4, 8", rep.GPU, rep.GPURuns, rep.Runs)
	}
	var control, leaves float64
	for _, r := range rep.Steps {
		if r.Family == "CONTROL" {
			control += r.TotalUs
			if s := shareOf(r, rep.StepUs); s != "-" {
				t.Errorf("a While's share is %q, want -", s)
			}
		} else {
			leaves += r.TotalUs
		}
	}
	if control == 0 || leaves > control || math.Abs(rep.StepUs-leaves) > 1e-6*leaves {
		t.Errorf("While %.1f µs should contain its body's steps (%.1f µs), and the total (%.1f) count only those",
			control, leaves, rep.StepUs)
	}
	var out bytes.Buffer
	printReport(&out, rep, 5)
	for _, want := range []string{"on the GPU: 4 execution(s)", "steps (GPU time)", "While [CONTROL]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// Steps that report the memory in use: the highest, and the steps that raised it most.
func TestMemory(t *testing.T) {
	step := func(tid int, name, out string, use float64) event {
		return event{Name: name, Cat: "step", Ph: "X", Tid: tid, Args: map[string]interface{}{"out": out, "in_use": use}}
	}
	events := []event{
		step(1, "Iota", "Int32[8]", 100), step(1, "DotGeneral", "Float32[64,64]", 16484),
		step(2, "Neg", "Float32[4]", 50), step(1, "Add", "Float32[64,64]", 8000),
		step(1, "fused:Mul+Add", "Float32[64,128]", 40768),
		{Name: "memory", Ph: "C", Args: map[string]interface{}{"current_bytes": 1e9}}, // counters are not steps
	}
	m := summarize(events).Memory
	if m.Peak.Use != 40768 || m.Peak.Name != "fused:Mul+Add" || m.Peak.Out != "Float32[64,128]" {
		t.Errorf("peak %+v", m.Peak)
	}
	if len(m.Rises) != 2 || m.Rises[0].Rise != 32768 || m.Rises[1].Name != "DotGeneral" || m.Rises[1].Rise != 16384 {
		t.Errorf("rises %+v (the first step of a thread, and falls, are not rises)", m.Rises)
	}
	var out bytes.Buffer
	printMemory(&out, m, 1)
	for _, want := range []string{"at its highest after a step: 39.8 KiB, after fused:Mul+Add (Float32[64,128])", "32.0 KiB", "(1 more)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// loadFile reads a trace from testdata (gzip-compressed when its name ends in .gz).
func loadFile(t *testing.T, path string) []event {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	events, err := load(data)
	if err != nil {
		t.Fatal(err)
	}
	return events
}
