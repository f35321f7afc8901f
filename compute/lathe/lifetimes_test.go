package lathe_test

import (
	"runtime"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// negOn compiles y = -x for Float32[n] on backend b.
func negOn(t *testing.T, b compute.Backend, n int) compute.Executable {
	t.Helper()
	bld := b.Builder("neg")
	f := bld.Main()
	x, err := f.Parameter("x", shapes.Make(dtypes.Float32, n), nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := f.Neg(x)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Return([]compute.Value{y}, nil); err != nil {
		t.Fatal(err)
	}
	e, err := bld.Compile()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// Execute after Backend.Finalize used to release the C backend once per output on its error
// path, freeing it under live executables and buffers. Lifetimes are C reference counts now:
// the execution is refused, and everything can still be finalized in any order (the sanitizer
// run of scripts/test.sh runs this test with -asan).
func TestExecuteAfterFinalize(t *testing.T) {
	b, err := compute.NewWithConfig("lathe:cpu,threads=2")
	if err != nil {
		t.Fatal(err)
	}
	e := negOn(t, b, 3)
	in, err := b.BufferFromFlatData(0, []float32{1, 2, 3}, shapes.Make(dtypes.Float32, 3))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.Execute([]compute.Buffer{in}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	b.Finalize()
	for range 3 {
		if _, err := e.Execute([]compute.Buffer{in}, nil, 0); err == nil {
			t.Errorf("Execute after Backend.Finalize should be an error")
		}
	}
	got := make([]float32, 3)
	if err := outs[0].ToFlatData(got); err != nil || got[2] != -3 {
		t.Errorf("an output outlives its finalized backend: %v, %v", got, err)
	}
	e.Finalize()
	if err := in.Finalize(); err != nil {
		t.Error(err)
	}
	if err := outs[0].Finalize(); err != nil {
		t.Error(err)
	}
	runtime.GC()
}

// Buffers on several devices, CopyToDevice between them, executions on the device their
// inputs are on, and asynchronous results read while their work is still queued.
func TestDevicesAndAsync(t *testing.T) {
	b, err := compute.NewWithConfig("lathe:cpu,devices=2,async=late")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if b.NumDevices() != 2 {
		t.Fatalf("NumDevices() = %d, want 2", b.NumDevices())
	}
	if d := b.DeviceDescription(1); d == "" {
		t.Errorf("no description for device 1")
	}
	e := negOn(t, b, 4)
	defer e.Finalize()
	x1, err := b.BufferFromFlatData(1, []float32{1, 2, 3, 4}, shapes.Make(dtypes.Float32, 4))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Execute([]compute.Buffer{x1}, nil, 0); err == nil {
		t.Errorf("an input on device 1 for an execution on device 0 should be refused")
	}
	cur := x1
	for k := range 4 { // each run reads the previous result before it is computed
		outs, err := e.Execute([]compute.Buffer{cur}, []bool{k > 0}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			_ = cur.Finalize()
		}
		cur = outs[0]
	}
	if d, err := cur.DeviceNum(); err != nil || d != 1 {
		t.Errorf("output on device %d (%v), want 1", d, err)
	}
	x0, err := cur.CopyToDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]float32, 4)
	if err := x0.ToFlatData(got); err != nil || got[3] != 4 {
		t.Errorf("after 4 negations and a copy to device 0: %v, %v", got, err)
	}
	data, err := cur.Data()
	if err != nil || data.([]float32)[0] != 1 {
		t.Errorf("Data() waits for the work: %v, %v", data, err)
	}
	_ = cur.Finalize()
	_ = x0.Finalize()
}
