package lathe_test

import (
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"

	"github.com/lathe-dev/lathe/compute/lathe"
)

func scalarOn(t *testing.T, b compute.Backend, device int, v float32) compute.Buffer {
	t.Helper()
	buf, err := b.BufferFromFlatData(compute.DeviceNum(device), []float32{v}, shapes.Make(dtypes.Float32))
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// SPMD over two devices: every replica gets the sum of the replicas' inputs, on its device.
func TestSPMDAllReduce(t *testing.T) {
	b, err := compute.NewWithConfig("lathe:cpu,devices=2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	bld := b.Builder("allreduce")
	if err := bld.DistributedSPMD(2); err != nil {
		t.Fatal(err)
	}
	if err := bld.DeviceAssignment(0, 1); err != nil {
		t.Fatal(err)
	}
	f := bld.Main()
	x, err := f.Parameter("x", shapes.Make(dtypes.Float32), nil)
	if err != nil {
		t.Fatal(err)
	}
	ys, err := f.AllReduce([]compute.Value{x}, compute.ReduceOpSum, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Return(ys, nil); err != nil {
		t.Fatal(err)
	}
	e, err := bld.Compile()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	outs, err := e.Execute([]compute.Buffer{scalarOn(t, b, 0, 1), scalarOn(t, b, 1, 3)}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 2 {
		t.Fatalf("%d outputs, want one per device", len(outs))
	}
	for i, o := range outs {
		got := []float32{0}
		if err := o.ToFlatData(got); err != nil || got[0] != 4 {
			t.Errorf("device %d: %v (%v), want 4", i, got, err)
		}
		if d, _ := o.DeviceNum(); int(d) != i {
			t.Errorf("output %d on device %d", i, d)
		}
	}
}

// AutoSharding over a mesh of two devices: x replicated, w sharded, y = x + w sharded.
func TestAutoSharding(t *testing.T) {
	b, err := compute.NewWithConfig("lathe:cpu,devices=2")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	bld := b.Builder("sharded")
	mesh := compute.Mesh{Name: "mesh", AxesSizes: []int{2}, AxesNames: []string{"sharded"}}
	if err := bld.DistributedAutoSharding(mesh); err != nil {
		t.Fatal(err)
	}
	spec := &compute.ShardingSpec{Mesh: "mesh", Axes: [][]string{{"sharded"}}}
	f := bld.Main()
	x, err := f.Parameter("x", shapes.Make(dtypes.Float32), nil)
	if err != nil {
		t.Fatal(err)
	}
	w, err := f.Parameter("w", shapes.Make(dtypes.Float32, 4), spec)
	if err != nil {
		t.Fatal(err)
	}
	y, err := f.Add(x, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Return([]compute.Value{y}, []*compute.ShardingSpec{spec}); err != nil {
		t.Fatal(err)
	}
	e, err := bld.Compile()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	w0, _ := b.BufferFromFlatData(0, []float32{0, 1}, shapes.Make(dtypes.Float32, 2))
	w1, _ := b.BufferFromFlatData(1, []float32{2, 3}, shapes.Make(dtypes.Float32, 2))
	outs, err := e.Execute([]compute.Buffer{scalarOn(t, b, 0, 10), w0, scalarOn(t, b, 1, 10), w1}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float32{{10, 11}, {12, 13}}
	for i, o := range outs {
		got := make([]float32, 2)
		if err := o.ToFlatData(got); err != nil || got[0] != want[i][0] || got[1] != want[i][1] {
			t.Errorf("device %d: %v (%v), want %v", i, got, err, want[i])
		}
	}
	// Partitioned: x's scalar is broadcast on each device, no collective, nothing run whole.
	st, err := e.(*lathe.Executable).Stats()
	if err != nil || !st.Partitioned || st.PartitionDeclined != "" || st.PartitionFallbacks != 0 ||
		st.PartitionCollectives != 0 || st.PartitionFallbackOps != "" || st.Compiles != 1 {
		t.Errorf("Stats() = %+v, %v; want partitioned, 0 collectives, 0 fallbacks, 1 compile", st, err)
	}
}
