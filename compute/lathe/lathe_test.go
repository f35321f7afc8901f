package lathe_test

import (
	"errors"
	"fmt"
	"math"
	"math/cmplx"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/compute/support/testutil"
	_ "github.com/lathe-dev/lathe/compute/lathe"
)

var (
	sharedOnce    sync.Once
	sharedBackend compute.Backend
	sharedErr     error
)

// newBackend returns the lathe:cpu backend shared by the tests.
func newBackend(t testing.TB) compute.Backend {
	sharedOnce.Do(func() { sharedBackend, sharedErr = compute.NewWithConfig("lathe:cpu") })
	if sharedErr != nil {
		t.Fatalf("lathe:cpu: %+v", sharedErr)
	}
	return sharedBackend
}

// skipIfNotImplemented skips for ops the engine does not have yet, fails on other errors.
func skipIfNotImplemented(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if compute.IsNotImplemented(err) {
		t.Skipf("not implemented in lathe yet: %v", err)
	}
	t.Fatalf("unexpected error: %+v", err)
}

// exec builds, compiles and runs a graph over Go inputs, skipping when an op is missing.
func exec(t *testing.T, inputs []any, build func(f compute.Function, p []compute.Value) ([]compute.Value, error)) []any {
	t.Helper()
	out, err := testutil.Exec(newBackend(t), inputs, build)
	skipIfNotImplemented(t, err)
	return out
}

func exec1(t *testing.T, inputs []any, build func(f compute.Function, p []compute.Value) (compute.Value, error)) any {
	t.Helper()
	return exec(t, inputs, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
		v, err := build(f, p)
		return []compute.Value{v}, err
	})[0]
}

func expectEqual(t *testing.T, label string, want, got any) {
	t.Helper()
	if ok, diff := testutil.IsEqual(want, got); !ok {
		t.Errorf("%s: (-want +got)\n%s", label, diff)
	}
}

func expectClose(t *testing.T, label string, want, got any, delta float64) {
	t.Helper()
	if ok, diff := testutil.IsInDelta(want, got, delta); !ok {
		t.Errorf("%s: (-want +got)\n%s", label, diff)
	}
}

func TestBackendInfo(t *testing.T) {
	b := newBackend(t)
	if b.Name() != "lathe" || !strings.HasPrefix(b.String(), "lathe:cpu") {
		t.Errorf("Name()=%q String()=%q", b.Name(), b.String())
	}
	if b.NumDevices() < 1 || b.DeviceDescription(0) == "" {
		t.Errorf("NumDevices()=%d DeviceDescription(0)=%q", b.NumDevices(), b.DeviceDescription(0))
	}
	if !b.HasSharedBuffers() {
		t.Errorf("lathe:cpu should have shared buffers")
	}
	caps := b.Capabilities()
	if !caps.DTypes[dtypes.Float32] || !caps.DTypes[dtypes.Int4] {
		t.Errorf("dtypes missing from capabilities: %v", caps.DTypes)
	}
	if caps.Operations[compute.OpTypeCapturedValue] {
		t.Errorf("internal ops must not be capabilities")
	}
	if caps.Operations[compute.OpTypeAllGather] {
		t.Errorf("AllGather has no compute.Function method to build it: not a capability")
	}
	// lathe:cpu specialises each binding of the dynamic axes; the deprecated bool follows.
	if caps.DynamicShapes != compute.DynamicShapesRecompiling || !caps.DynamicAxes || !caps.HasDynamicShapes() {
		t.Errorf("lathe:cpu: DynamicShapes %v, DynamicAxes %v; want DynamicShapesRecompiling, true", caps.DynamicShapes, caps.DynamicAxes)
	}
	if !caps.Operations[compute.OpTypeCumSum] {
		t.Errorf("lathe:cpu: CumSum missing from capabilities")
	}
	t.Logf("%s: %s; %d ops, %d dtypes, dynamic shapes %v, functions %v", b, b.Description(),
		len(caps.Operations), len(caps.DTypes), caps.DynamicShapes, caps.Functions)

	b2, err := compute.NewWithConfig("lathe:cpu,threads=2")
	if err != nil {
		t.Fatalf("lathe:cpu,threads=2: %+v", err)
	}
	live, err := b2.BufferFromFlatData(0, []float32{3}, shapes.Make(dtypes.Float32, 1))
	if err != nil {
		t.Fatal(err)
	}
	b2.Finalize()
	b2.Finalize()
	// A buffer outlives its finalized backend (the C backend goes with the last buffer).
	got := []float32{0}
	if err := live.ToFlatData(got); err != nil || got[0] != 3 {
		t.Errorf("buffer of a finalized backend: %v, %v", got, err)
	}
	if err := live.Finalize(); err != nil {
		t.Error(err)
	}
	if !b2.IsFinalized() {
		t.Errorf("IsFinalized() false after Finalize")
	}
	if _, err := b2.BufferFromFlatData(0, []float32{1}, shapes.Make(dtypes.Float32, 1)); err == nil {
		t.Errorf("BufferFromFlatData on a finalized backend should fail")
	}
	if _, err := compute.NewWithConfig("lathe:cpu,bogus=1"); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown option should be an error naming it, got %v", err)
	}
}

func TestBuffers(t *testing.T) {
	b := newBackend(t)
	roundTrip := func(flat any, shape shapes.Shape) {
		t.Helper()
		buf, err := b.BufferFromFlatData(0, flat, shape)
		if err != nil {
			t.Fatalf("BufferFromFlatData(%s): %+v", shape, err)
		}
		defer func() { _ = buf.Finalize() }()
		got := dtypes.MakeAnySlice(shape.DType, shape.Size())
		if err := buf.ToFlatData(got); err != nil {
			t.Fatalf("ToFlatData(%s): %+v", shape, err)
		}
		expectEqual(t, "ToFlatData "+shape.String(), flat, got)
		data, err := buf.Data()
		if err != nil {
			t.Fatalf("Data(%s): %+v", shape, err)
		}
		expectEqual(t, "Data "+shape.String(), flat, data)
		s, err := buf.Shape()
		if err != nil || !s.Equal(shape) {
			t.Errorf("Shape()=%s, %v; want %s", s, err, shape)
		}
	}
	roundTrip([]float32{1, 2, 3, 4, 5, 6}, shapes.Make(dtypes.Float32, 2, 3))
	roundTrip([]int64{-1, 1 << 40}, shapes.Make(dtypes.Int64, 2))
	roundTrip([]bool{true, false, true}, shapes.Make(dtypes.Bool, 3))
	roundTrip([]float16.Float16{float16.FromFloat32(1.5)}, shapes.Make(dtypes.Float16))
	roundTrip([]complex128{complex(1, -2)}, shapes.Make(dtypes.Complex128, 1))
	roundTrip([]uint8{0x21, 0x43, 0x05}, shapes.Make(dtypes.Int4, 5)) // packed: 3 bytes for 5 nibbles
	roundTrip([]uint8{0xE4}, shapes.Make(dtypes.Uint2, 4))
	roundTrip([]float64{}, shapes.Make(dtypes.Float64, 0, 3))

	if _, err := b.BufferFromFlatData(0, []int32{1, 2}, shapes.Make(dtypes.Float32, 2)); err == nil {
		t.Errorf("wrong Go type should be an error")
	}
	if _, err := b.BufferFromFlatData(0, []float32{1, 2, 3}, shapes.Make(dtypes.Float32, 2)); err == nil {
		t.Errorf("wrong length should be an error")
	}
	if _, err := b.BufferFromFlatData(1, []float32{1}, shapes.Make(dtypes.Float32, 1)); err == nil {
		t.Errorf("device 1 should be an error")
	}

	// Shared buffers: Go writes the engine's memory in place.
	buf, flat, err := b.NewSharedBuffer(0, shapes.Make(dtypes.Int32, 3))
	if err != nil {
		t.Fatalf("NewSharedBuffer: %+v", err)
	}
	copy(flat.([]int32), []int32{7, 8, 9})
	got := make([]int32, 3)
	if err := buf.ToFlatData(got); err != nil {
		t.Fatal(err)
	}
	expectEqual(t, "shared buffer", []int32{7, 8, 9}, got)
	cp, err := buf.CopyToDevice(0)
	if err != nil {
		t.Fatalf("CopyToDevice: %+v", err)
	}
	flat.([]int32)[0] = 70
	cpData, _ := cp.Data()
	expectEqual(t, "CopyToDevice copies", []int32{7, 8, 9}, cpData)

	// Finalize: a second call and any later use are errors, not crashes.
	if err := buf.Finalize(); err != nil {
		t.Fatalf("Finalize: %+v", err)
	}
	if err := buf.Finalize(); err == nil {
		t.Errorf("second Finalize should be an error")
	}
	if _, err := buf.Shape(); err == nil {
		t.Errorf("Shape after Finalize should be an error")
	}
	if _, err := buf.Data(); err == nil {
		t.Errorf("Data after Finalize should be an error")
	}
	if err := buf.ToFlatData(got); err == nil {
		t.Errorf("ToFlatData after Finalize should be an error")
	}
	if _, err := buf.CopyToDevice(0); err == nil {
		t.Errorf("CopyToDevice after Finalize should be an error")
	}
	_ = cp.Finalize()
}

// TestGarbageCollected drops buffers, builders and executables without finalizing them:
// their cleanups free the C objects.
func TestGarbageCollected(t *testing.T) {
	b, err := compute.NewWithConfig("lathe:cpu")
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		_, _ = b.BufferFromFlatData(0, make([]float32, 1<<16), shapes.Make(dtypes.Float32, 1<<16))
		_ = b.Builder("dropped").Main()
	}
	e := negExecutable(t, 3)
	in, _ := b.BufferFromFlatData(0, []float32{1, 2, 3}, shapes.Make(dtypes.Float32, 3))
	_, err = e.Execute([]compute.Buffer{in}, nil, 0)
	if err == nil {
		t.Errorf("a buffer of another backend should be refused")
	}
	b.Finalize()
	runtime.GC()
	runtime.GC()
}

// negExecutable compiles y = -x for Float32[n].
func negExecutable(t *testing.T, n int) compute.Executable {
	b := newBackend(t)
	bld := b.Builder("neg")
	f := bld.Main()
	x, err := f.Parameter("x", shapes.Make(dtypes.Float32, n), nil)
	if err != nil {
		t.Fatal(err)
	}
	y, err := f.Neg(x)
	skipIfNotImplemented(t, err)
	if err := f.Return([]compute.Value{y}, nil); err != nil {
		t.Fatal(err)
	}
	e, err := bld.Compile()
	skipIfNotImplemented(t, err)
	return e
}

func TestDonation(t *testing.T) {
	b := newBackend(t)
	e := negExecutable(t, 4)
	defer e.Finalize()
	in, err := b.BufferFromFlatData(0, []float32{1, 2, 3, 4}, shapes.Make(dtypes.Float32, 4))
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Execute([]compute.Buffer{in}, []bool{true}, 0)
	if err != nil {
		t.Fatalf("Execute: %+v", err)
	}
	got, _ := out[0].Data()
	expectEqual(t, "neg", []float32{-1, -2, -3, -4}, got)
	if _, err := in.Data(); err == nil {
		t.Errorf("Data of a donated buffer should be an error")
	}
	if _, err := e.Execute([]compute.Buffer{in}, nil, 0); err == nil {
		t.Errorf("executing with a donated buffer should be an error")
	}
	if err := in.Finalize(); err != nil {
		t.Errorf("Finalize of a donated buffer: %+v", err)
	}
	// The same buffer donated and also passed again is refused.
	in2, _ := b.BufferFromFlatData(0, []float32{1, 2, 3, 4}, shapes.Make(dtypes.Float32, 4))
	e2 := func() compute.Executable {
		bld := b.Builder("add")
		f := bld.Main()
		x, _ := f.Parameter("x", shapes.Make(dtypes.Float32, 4), nil)
		y, _ := f.Parameter("y", shapes.Make(dtypes.Float32, 4), nil)
		s, err := f.Add(x, y)
		skipIfNotImplemented(t, err)
		_ = f.Return([]compute.Value{s}, nil)
		e, err := bld.Compile()
		skipIfNotImplemented(t, err)
		return e
	}()
	if _, err := e2.Execute([]compute.Buffer{in2, in2}, []bool{false, true}, 0); err == nil {
		t.Errorf("a buffer both donated and passed again should be an error")
	}
	out2, err := e2.Execute([]compute.Buffer{in2, in2}, nil, 0)
	if err != nil {
		t.Fatalf("Execute(in2, in2): %+v", err)
	}
	got, _ = out2[0].Data()
	expectEqual(t, "x+x", []float32{2, 4, 6, 8}, got)
	e2.Finalize()
	e2.Finalize()
	if _, err := e2.Execute([]compute.Buffer{in2, in2}, nil, 0); err == nil {
		t.Errorf("Execute after Finalize should be an error")
	}
}

// TestExecuteConcurrent runs one executable from many goroutines at once.
func TestExecuteConcurrent(t *testing.T) {
	b := newBackend(t)
	const n = 4099
	bld := b.Builder("affine")
	f := bld.Main()
	x, _ := f.Parameter("x", shapes.Make(dtypes.Float32, n), nil)
	two, _ := f.Constant([]float32{2})
	one, _ := f.Constant([]float32{1})
	two, err := f.Reshape(two)
	skipIfNotImplemented(t, err)
	one, _ = f.Reshape(one)
	twoB, err := f.BroadcastInDim(two, shapes.Make(dtypes.Float32, n), nil)
	skipIfNotImplemented(t, err)
	y, err := f.Mul(x, twoB)
	skipIfNotImplemented(t, err)
	oneB, _ := f.BroadcastInDim(one, shapes.Make(dtypes.Float32, n), nil)
	y, err = f.Add(y, oneB)
	skipIfNotImplemented(t, err)
	s, err := f.ReduceSum(y, 0)
	skipIfNotImplemented(t, err)
	_ = f.Return([]compute.Value{y, s}, nil)
	e, err := bld.Compile()
	skipIfNotImplemented(t, err)
	defer e.Finalize()

	const goroutines, iters = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range iters {
				in := make([]float32, n)
				var want float64
				for i := range in {
					in[i] = float32((g*31+it*7+i)%97) - 48
					want += float64(2*in[i] + 1)
				}
				buf, err := b.BufferFromFlatData(0, in, shapes.Make(dtypes.Float32, n))
				if err != nil {
					errs <- err
					return
				}
				out, err := e.Execute([]compute.Buffer{buf}, []bool{it%2 == 0}, 0)
				if err != nil {
					errs <- err
					return
				}
				got, _ := out[0].Data()
				for i, v := range got.([]float32) {
					if v != 2*in[i]+1 {
						errs <- fmt.Errorf("goroutine %d iter %d: y[%d]=%g, want %g", g, it, i, v, 2*in[i]+1)
						return
					}
				}
				sum, _ := out[1].Data()
				if math.Abs(float64(sum.([]float32)[0])-want) > 1e-3*math.Max(1, math.Abs(want)) {
					errs <- fmt.Errorf("goroutine %d iter %d: sum=%g, want %g", g, it, sum.([]float32)[0], want)
					return
				}
				for _, o := range append(out, buf) {
					if err := o.Finalize(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestErrors(t *testing.T) {
	b := newBackend(t)
	f := b.Builder("errors").Main()
	x, _ := f.Parameter("x", shapes.Make(dtypes.Float32, 2, 3), nil)
	y, _ := f.Parameter("y", shapes.Make(dtypes.Float32, 4, 5), nil)
	check := func(op string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s: expected an error", op)
		case compute.IsNotImplemented(err):
			t.Logf("%s: not implemented yet: %v", op, err)
		case !strings.Contains(err.Error(), op):
			t.Errorf("%s: error should name the op: %v", op, err)
		}
	}
	_, err := f.Add(x, y)
	check("Add", err)
	_, err = f.DotGeneral(x, []int{1}, nil, y, []int{0}, nil, compute.DotGeneralConfig{})
	check("DotGeneral", err)
	_, err = f.Transpose(x, 0, 0)
	check("Transpose", err)
	_, err = f.ReduceSum(x, 2)
	check("ReduceSum", err)
	other := b.Builder("other").Main()
	if _, err := other.Neg(x); err == nil {
		t.Errorf("a value of another builder should be an error")
	}
	if _, err := f.Neg(nil); err == nil {
		t.Errorf("a nil value should be an error")
	}
}

func TestCall(t *testing.T) {
	b := newBackend(t)
	bld := b.Builder("call")
	callee, err := bld.NewFunction("square_plus")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := callee.Parameter("a", shapes.Make(dtypes.Float32, 3), nil)
	c, _ := callee.Parameter("c", shapes.Make(dtypes.Float32, 3), nil)
	sq, err := callee.Mul(a, a)
	skipIfNotImplemented(t, err)
	r, _ := callee.Add(sq, c)
	if err := callee.Return([]compute.Value{r, a}, nil); err != nil {
		t.Fatal(err)
	}
	f := bld.Main()
	x, _ := f.Parameter("x", shapes.Make(dtypes.Float32, 3), nil)
	outs, err := f.Call(callee, x, x)
	skipIfNotImplemented(t, err)
	if len(outs) != 2 {
		t.Fatalf("Call returned %d values, want 2", len(outs))
	}
	outs2, err := f.Call(callee, outs[0], x)
	skipIfNotImplemented(t, err)
	_ = f.Return([]compute.Value{outs[0], outs[1], outs2[0]}, nil)
	e, err := bld.Compile()
	skipIfNotImplemented(t, err)
	in, _ := b.BufferFromFlatData(0, []float32{1, 2, 3}, shapes.Make(dtypes.Float32, 3))
	res, err := e.Execute([]compute.Buffer{in}, nil, 0)
	skipIfNotImplemented(t, err)
	got0, _ := res[0].Data()
	got1, _ := res[1].Data()
	got2, _ := res[2].Data()
	expectEqual(t, "x*x+x", []float32{2, 6, 12}, got0)
	expectEqual(t, "a", []float32{1, 2, 3}, got1)
	expectEqual(t, "(x*x+x)^2+x", []float32{5, 38, 147}, got2)
}

func TestWhile(t *testing.T) {
	// (i, acc) = (0, start); while i < n: (i+1, acc*2 + step) -- step is captured from main.
	out := exec(t, []any{float32(1), int32(10), float32(0.5)}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
		cond, err := f.Closure()
		if err != nil {
			return nil, err
		}
		ci, _ := cond.Parameter("i", shapes.Make(dtypes.Int32), nil)
		_, _ = cond.Parameter("acc", shapes.Make(dtypes.Float32), nil)
		lt, err := cond.LessThan(ci, p[1])
		if err != nil {
			return nil, err
		}
		if err := cond.Return([]compute.Value{lt}, nil); err != nil {
			return nil, err
		}
		body, _ := f.Closure()
		bi, _ := body.Parameter("i", shapes.Make(dtypes.Int32), nil)
		bacc, _ := body.Parameter("acc", shapes.Make(dtypes.Float32), nil)
		one, _ := body.Constant([]int32{1})
		one, _ = body.Reshape(one)
		ni, err := body.Add(bi, one)
		if err != nil {
			return nil, err
		}
		two, _ := body.Constant([]float32{2})
		two, _ = body.Reshape(two)
		nacc, _ := body.Mul(bacc, two)
		nacc, _ = body.Add(nacc, p[2])
		if err := body.Return([]compute.Value{ni, nacc}, nil); err != nil {
			return nil, err
		}
		zero, _ := f.Constant([]int32{0})
		zero, _ = f.Reshape(zero)
		return f.While(cond, body, zero, p[0])
	})
	want := float32(1)
	for range 10 {
		want = want*2 + 0.5
	}
	expectEqual(t, "i", int32(10), out[0])
	expectEqual(t, "acc", want, out[1])
}

func TestIf(t *testing.T) {
	for _, pred := range []bool{true, false} {
		out := exec(t, []any{pred, []float32{1, 2}}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
			tb, _ := f.Closure()
			d, err := tb.Add(p[1], p[1]) // captured
			if err != nil {
				return nil, err
			}
			if err := tb.Return([]compute.Value{d}, nil); err != nil {
				return nil, err
			}
			fb, _ := f.Closure()
			n, _ := fb.Neg(p[1])
			if err := fb.Return([]compute.Value{n}, nil); err != nil {
				return nil, err
			}
			return f.If(p[0], tb, fb)
		})
		want := []float32{-1, -2}
		if pred {
			want = []float32{2, 4}
		}
		expectEqual(t, fmt.Sprintf("If(%v)", pred), want, out[0])
	}
}

func TestSort(t *testing.T) {
	// Sort values descending along axis 1, carrying an index tensor; stable keeps tie order.
	values := [][]float32{{3, 1, 2, 3, 0}, {5, 5, 4, 6, 5}}
	idx := [][]int32{{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}}
	out := exec(t, []any{values, idx}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
		cmp, _ := f.Closure()
		lv, _ := cmp.Parameter("lhs_v", shapes.Make(dtypes.Float32), nil)
		rv, _ := cmp.Parameter("rhs_v", shapes.Make(dtypes.Float32), nil)
		_, _ = cmp.Parameter("lhs_i", shapes.Make(dtypes.Int32), nil)
		_, _ = cmp.Parameter("rhs_i", shapes.Make(dtypes.Int32), nil)
		gt, err := cmp.GreaterThan(lv, rv)
		if err != nil {
			return nil, err
		}
		if err := cmp.Return([]compute.Value{gt}, nil); err != nil {
			return nil, err
		}
		return f.Sort(cmp, 1, true, p[0], p[1])
	})
	expectEqual(t, "values", [][]float32{{3, 3, 2, 1, 0}, {6, 5, 5, 5, 4}}, out[0])
	expectEqual(t, "indices", [][]int32{{0, 3, 2, 1, 4}, {3, 0, 1, 4, 2}}, out[1])
}

func TestTotalOrder(t *testing.T) {
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	inf := float32(math.Inf(1))
	lhs := []float32{negZero, 0, nan, inf, -inf, 1}
	rhs := []float32{0, negZero, nan, nan, negZero, 1}
	ops := []struct {
		name string
		fn   func(f compute.Function) func(a, b compute.Value) (compute.Value, error)
		want []bool
	}{
		{"EqualTotalOrder", func(f compute.Function) func(a, b compute.Value) (compute.Value, error) { return f.EqualTotalOrder },
			[]bool{false, false, true, false, false, true}},
		{"NotEqualTotalOrder", func(f compute.Function) func(a, b compute.Value) (compute.Value, error) { return f.NotEqualTotalOrder },
			[]bool{true, true, false, true, true, false}},
		{"LessThanTotalOrder", func(f compute.Function) func(a, b compute.Value) (compute.Value, error) { return f.LessThanTotalOrder },
			[]bool{true, false, false, true, true, false}},
		{"LessOrEqualTotalOrder", func(f compute.Function) func(a, b compute.Value) (compute.Value, error) {
			return f.LessOrEqualTotalOrder
		},
			[]bool{true, false, true, true, true, true}},
		{"GreaterThanTotalOrder", func(f compute.Function) func(a, b compute.Value) (compute.Value, error) {
			return f.GreaterThanTotalOrder
		},
			[]bool{false, true, false, false, false, false}},
		{"GreaterOrEqualTotalOrder", func(f compute.Function) func(a, b compute.Value) (compute.Value, error) {
			return f.GreaterOrEqualTotalOrder
		},
			[]bool{false, true, true, false, false, true}},
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			got := exec1(t, []any{lhs, rhs}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
				return op.fn(f)(p[0], p[1])
			})
			expectEqual(t, op.name, op.want, got)
		})
	}
	// The IEEE comparisons differ on the same inputs.
	got := exec1(t, []any{lhs, rhs}, func(f compute.Function, p []compute.Value) (compute.Value, error) { return f.Equal(p[0], p[1]) })
	expectEqual(t, "Equal", []bool{true, true, false, false, false, true}, got)
}

func TestShifts(t *testing.T) {
	x := []int32{1, -16, -16, 0x40000000, 7}
	n := []int32{3, 2, 28, 1, 0}
	got := exec(t, []any{x, n}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
		l, err := f.ShiftLeft(p[0], p[1])
		if err != nil {
			return nil, err
		}
		ra, err := f.ShiftRightArithmetic(p[0], p[1])
		if err != nil {
			return nil, err
		}
		rl, err := f.ShiftRightLogical(p[0], p[1])
		return []compute.Value{l, ra, rl}, err
	})
	expectEqual(t, "ShiftLeft", []int32{8, -64, 0, math.MinInt32, 7}, got[0])
	expectEqual(t, "ShiftRightArithmetic", []int32{0, -4, -1, 0x20000000, 7}, got[1])
	expectEqual(t, "ShiftRightLogical", []int32{0, int32(uint32(0xFFFFFFF0) >> 2), 15, 0x20000000, 7}, got[2])

	u := exec1(t, []any{[]uint8{0x81, 0xF0}, []uint8{1, 4}}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
		return f.ShiftRightArithmetic(p[0], p[1])
	})
	expectEqual(t, "ShiftRightArithmetic uint8 is logical", []uint8{0x40, 0x0F}, u)
}

func TestPad(t *testing.T) {
	x := [][]float32{{1, 2, 3}, {4, 5, 6}}
	got := exec1(t, []any{x, float32(-1)}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
		return f.Pad(p[0], p[1], compute.PadAxis{Start: 1, End: 0}, compute.PadAxis{Start: 0, End: 2, Interior: 1})
	})
	expectEqual(t, "Pad", [][]float32{
		{-1, -1, -1, -1, -1, -1, -1},
		{1, -1, 2, -1, 3, -1, -1},
		{4, -1, 5, -1, 6, -1, -1},
	}, got)
	// Negative padding crops.
	got = exec1(t, []any{x, float32(0)}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
		return f.Pad(p[0], p[1], compute.PadAxis{}, compute.PadAxis{Start: -1, End: 1})
	})
	expectEqual(t, "Pad crop", [][]float32{{2, 3, 0}, {5, 6, 0}}, got)
}

func TestScatterMin(t *testing.T) {
	operand := []float32{10, 10, 10, 10, 10}
	indices := [][]int32{{1}, {3}, {1}, {9}}
	updates := []float32{5, 20, 3, -100}
	got := exec1(t, []any{operand, indices, updates}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
		return f.ScatterMin(p[0], p[1], p[2], 1, nil, []int{0}, []int{0}, false, false)
	})
	expectEqual(t, "ScatterMin", []float32{10, 3, 10, 10, 10}, got)
	got = exec1(t, []any{operand, indices, updates}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
		return f.ScatterMax(p[0], p[1], p[2], 1, nil, []int{0}, []int{0}, false, false)
	})
	expectEqual(t, "ScatterMax", []float32{10, 10, 10, 20, 10}, got)
}

func TestDynamicSlice(t *testing.T) {
	x := [][]int32{{0, 1, 2, 3, 4}, {5, 6, 7, 8, 9}, {10, 11, 12, 13, 14}, {15, 16, 17, 18, 19}}
	for _, tc := range []struct {
		r, c int32
		want [][]int32
	}{
		{1, 2, [][]int32{{7, 8}, {12, 13}}},
		{3, 9, [][]int32{{13, 14}, {18, 19}}}, // starts clamped to (2, 3)
		{-2, 0, [][]int32{{0, 1}, {5, 6}}},
	} {
		got := exec1(t, []any{x, tc.r, tc.c}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
			return f.DynamicSlice(p[0], []compute.Value{p[1], p[2]}, []int{2, 2})
		})
		expectEqual(t, fmt.Sprintf("DynamicSlice(%d,%d)", tc.r, tc.c), tc.want, got)
	}
	got := exec1(t, []any{[][]float32{{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, [][]float32{{1, 2}, {3, 4}}, int32(1), int32(5)},
		func(f compute.Function, p []compute.Value) (compute.Value, error) {
			return f.DynamicUpdateSlice(p[0], p[1], []compute.Value{p[2], p[3]})
		})
	expectEqual(t, "DynamicUpdateSlice", [][]float32{{0, 0, 0}, {0, 1, 2}, {0, 3, 4}}, got)
}

func TestComplex(t *testing.T) {
	got := exec(t, []any{[]float32{1, -2}, []float32{3, 0.5}}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
		c, err := f.Complex(p[0], p[1])
		if err != nil {
			return nil, err
		}
		cj, err := f.Conj(c)
		if err != nil {
			return nil, err
		}
		re, err := f.Real(cj)
		if err != nil {
			return nil, err
		}
		im, err := f.Imag(cj)
		return []compute.Value{c, cj, re, im}, err
	})
	expectEqual(t, "Complex", []complex64{complex(1, 3), complex(-2, 0.5)}, got[0])
	expectEqual(t, "Conj", []complex64{complex(1, -3), complex(-2, -0.5)}, got[1])
	expectEqual(t, "Real", []float32{1, -2}, got[2])
	expectEqual(t, "Imag", []float32{-3, -0.5}, got[3])
}

func TestFFT(t *testing.T) {
	x := []complex128{1, 2i, -1, 0.5}
	want := make([]complex128, 4)
	for k := range want {
		for n, v := range x {
			want[k] += v * cmplx.Exp(complex(0, -2*math.Pi*float64(k*n)/4))
		}
	}
	got := exec(t, []any{x}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
		fw, err := f.FFT(p[0], compute.FFTForward, []int{4})
		if err != nil {
			return nil, err
		}
		inv, err := f.FFT(fw, compute.FFTInverse, []int{4})
		return []compute.Value{fw, inv}, err
	})
	closeC := func(label string, want, got []complex128) {
		for i := range want {
			if cmplx.Abs(want[i]-got[i]) > 1e-9 {
				t.Errorf("%s[%d] = %v, want %v", label, i, got[i], want[i])
			}
		}
	}
	closeC("FFT", want, got[0].([]complex128))
	closeC("IFFT(FFT)", x, got[1].([]complex128))

	r := []float32{1, 2, 3, 4}
	got = exec(t, []any{r}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
		fw, err := f.FFT(p[0], compute.FFTForwardReal, []int{4})
		if err != nil {
			return nil, err
		}
		inv, err := f.FFT(fw, compute.FFTInverseReal, []int{4})
		return []compute.Value{fw, inv}, err
	})
	rf := got[0].([]complex64)
	wantR := []complex64{10, complex(-2, 2), -2}
	for i := range wantR {
		if cmplx.Abs(complex128(rf[i]-wantR[i])) > 1e-5 {
			t.Errorf("RFFT[%d] = %v, want %v", i, rf[i], wantR[i])
		}
	}
	expectClose(t, "IRFFT(RFFT)", r, got[1], 1e-5)
}

func TestBatchNorm(t *testing.T) {
	x := [][]float32{{1, 2}, {3, 6}, {2, 4}}
	scale, offset := []float32{1, 2}, []float32{0, 1}
	const eps = 0.01
	// Reference statistics per feature (axis 1), in float64.
	mean, variance := make([]float64, 2), make([]float64, 2)
	for j := range 2 {
		for i := range 3 {
			mean[j] += float64(x[i][j]) / 3
		}
		for i := range 3 {
			d := float64(x[i][j]) - mean[j]
			variance[j] += d * d / 3
		}
	}
	norm := func(i, j int) float64 {
		return (float64(x[i][j]) - mean[j]) / math.Sqrt(variance[j]+eps)
	}
	wantNorm := make([][]float32, 3)
	for i := range 3 {
		wantNorm[i] = []float32{float32(norm(i, 0)*1 + 0), float32(norm(i, 1)*2 + 1)}
	}
	t.Run("Training", func(t *testing.T) {
		got := exec(t, []any{x, scale, offset}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
			n, m, v, err := f.BatchNormForTraining(p[0], p[1], p[2], eps, 1)
			return []compute.Value{n, m, v}, err
		})
		expectClose(t, "normalized", wantNorm, got[0], 1e-4)
		expectClose(t, "mean", []float32{float32(mean[0]), float32(mean[1])}, got[1], 1e-5)
		expectClose(t, "variance", []float32{float32(variance[0]), float32(variance[1])}, got[2], 1e-5)
	})
	t.Run("Inference", func(t *testing.T) {
		m := []float32{float32(mean[0]), float32(mean[1])}
		v := []float32{float32(variance[0]), float32(variance[1])}
		got := exec1(t, []any{x, scale, offset, m, v}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
			return f.BatchNormForInference(p[0], p[1], p[2], p[3], p[4], eps, 1)
		})
		expectClose(t, "inference", wantNorm, got, 1e-4)
	})
	t.Run("Gradient", func(t *testing.T) {
		gy := [][]float32{{0.5, -1}, {1, 2}, {-0.25, 0.75}}
		wantGX := make([][]float32, 3)
		for i := range wantGX {
			wantGX[i] = make([]float32, 2)
		}
		var wantGS, wantGO [2]float32
		for j := range 2 {
			var sumGy, sumGyXhat float64
			for i := range 3 {
				sumGy += float64(gy[i][j])
				sumGyXhat += float64(gy[i][j]) * norm(i, j)
			}
			wantGO[j], wantGS[j] = float32(sumGy), float32(sumGyXhat)
			for i := range 3 {
				g := float64(scale[j]) / math.Sqrt(variance[j]+eps) * (float64(gy[i][j]) - sumGy/3 - norm(i, j)*sumGyXhat/3)
				wantGX[i][j] = float32(g)
			}
		}
		m := []float32{float32(mean[0]), float32(mean[1])}
		v := []float32{float32(variance[0]), float32(variance[1])}
		got := exec(t, []any{x, scale, m, v, gy}, func(f compute.Function, p []compute.Value) ([]compute.Value, error) {
			gx, gs, gOff, err := f.BatchNormGradient(p[0], p[1], p[2], p[3], p[4], eps, 1)
			return []compute.Value{gx, gs, gOff}, err
		})
		expectClose(t, "grad operand", wantGX, got[0], 1e-4)
		expectClose(t, "grad scale", wantGS[:], got[1], 1e-4)
		expectClose(t, "grad offset", wantGO[:], got[2], 1e-4)
	})
}

func TestNotImplementedWraps(t *testing.T) {
	b := newBackend(t)
	bld := b.Builder("ni")
	f := bld.Main()
	x, _ := f.Parameter("x", shapes.Make(dtypes.Float32, 2), nil)
	if _, err := f.AllReduce([]compute.Value{x}, compute.ReduceOpSum, nil); err == nil || errors.Is(err, compute.ErrNotImplemented) {
		t.Errorf("AllReduce outside an SPMD program should be a plain error, got %v", err)
	}
	if err := bld.DistributedAutoSharding(compute.Mesh{Name: "m", AxesSizes: []int{1}, AxesNames: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	spec := &compute.ShardingSpec{Mesh: "m", Axes: [][]string{{"a"}}}
	_, err := f.Parameter("packed", shapes.Make(dtypes.Int4, 2), spec)
	if !errors.Is(err, compute.ErrNotImplemented) {
		t.Errorf("sharding a packed dtype should wrap compute.ErrNotImplemented, got %v", err)
	}
}

// A shape without elements takes nil flat data (GoMLX's tensors.FromRaw passes nil for it);
// nil for a shape with elements is still an error.
func TestBufferFromNilFlatData(t *testing.T) {
	b := newBackend(t)
	buf, err := b.BufferFromFlatData(0, nil, shapes.Make(dtypes.Float32, 0))
	if err != nil {
		t.Fatalf("zero-sized buffer from nil: %v", err)
	}
	if err := buf.ToFlatData(make([]float32, 0)); err != nil {
		t.Fatalf("reading it back: %v", err)
	}
	if err := buf.Finalize(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.BufferFromFlatData(0, nil, shapes.Make(dtypes.Float32, 2)); err == nil || !strings.Contains(err.Error(), "must be a slice") {
		t.Errorf("nil flat data for 2 elements: %v, want a 'must be a slice' error", err)
	}
}

// GoMLX's nn.LayerNorm hands the backend the axes as its caller wrote them: -1 is the last.
func TestFusedLayerNormNegativeAxis(t *testing.T) {
	x := [][]float32{{1, 2, 3, 6}, {-1, 0, 0, 1}}
	want := make([][]float32, 2)
	for i, row := range x {
		var mean, variance float64
		for _, v := range row {
			mean += float64(v) / 4
		}
		for _, v := range row {
			variance += (float64(v) - mean) * (float64(v) - mean) / 4
		}
		for _, v := range row {
			want[i] = append(want[i], float32((float64(v)-mean)/math.Sqrt(variance+1e-5)))
		}
	}
	got := exec1(t, []any{x}, func(f compute.Function, p []compute.Value) (compute.Value, error) {
		return f.FusedLayerNorm(p[0], []int{-1}, 1e-5, nil, nil)
	})
	expectClose(t, "FusedLayerNorm axis -1", want, got, 1e-5)
}
