package lathe

/*
#include <stdlib.h>
#include "lathe.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/notimplemented"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// Function implements compute.Function over a lathe_function_t. Ops the C API has no
// builder for come from the embedded notimplemented.Function and return an error wrapping
// compute.ErrNotImplemented.
type Function struct {
	notimplemented.Function
	builder *Builder
	c       C.lathe_function_t
	name    string
	parent  *Function
	initErr error // the builder could not be created
}

// Value is a node of a lathe graph: a handle owned by its builder.
type Value struct {
	c       C.lathe_value_t
	builder *Builder
}

var _ compute.Function = (*Function)(nil)

func (f *Function) init() {
	f.Function.ErrFn = func(op compute.OpType) error {
		return errors.Wrapf(compute.ErrNotImplemented, "lathe: %s is not implemented by the lathe backend", op)
	}
}

// Name returns the function's name ("main" for the main function).
func (f *Function) Name() string { return f.name }

// Builder returns the builder of the function.
func (f *Function) Builder() compute.Builder { return f.builder }

// Parent returns the parent of a closure, nil for top-level functions.
func (f *Function) Parent() compute.Function {
	if f.parent == nil {
		return nil
	}
	return f.parent
}

// Closure creates a closure of f: it may use f's values directly.
func (f *Function) Closure() (compute.Function, error) {
	if err := f.builder.check("Closure"); err != nil {
		return nil, err
	}
	var c C.lathe_function_t
	if err := toError(C.lathe_function_closure(f.c, &c)); err != nil {
		return nil, err
	}
	cl := &Function{builder: f.builder, c: c, name: C.GoString(C.lathe_function_name(c)), parent: f}
	cl.init()
	return cl, nil
}

// value converts a compute.Value of this builder to its C handle.
func (f *Function) value(op string, v compute.Value) (C.lathe_value_t, error) {
	if err := f.builder.check(op); err != nil {
		return nil, err
	}
	lv, ok := v.(*Value)
	if !ok || lv == nil {
		return nil, errors.Errorf("lathe: %s: operand is %T, not a lathe value", op, v)
	}
	if lv.builder != f.builder {
		return nil, errors.Errorf("lathe: %s: operand belongs to another builder", op)
	}
	return lv.c, nil
}

// values converts a list of operands into a Go slice of C handles (C pointers only).
func (f *Function) values(op string, vs []compute.Value) ([]C.lathe_value_t, error) {
	out := make([]C.lathe_value_t, len(vs))
	for i, v := range vs {
		c, err := f.value(op, v)
		if err != nil {
			return nil, errors.WithMessagef(err, "operand %d", i)
		}
		out[i] = c
	}
	return out, nil
}

func (f *Function) wrap(c C.lathe_value_t) *Value { return &Value{c: c, builder: f.builder} }

func (f *Function) wrapAll(cs []C.lathe_value_t) []compute.Value {
	out := make([]compute.Value, len(cs))
	for i, c := range cs {
		out[i] = f.wrap(c)
	}
	return out
}

// fn returns another function of the same builder as its C handle.
func (f *Function) fn(op string, g compute.Function) (C.lathe_function_t, error) {
	lg, ok := g.(*Function)
	if !ok || lg == nil {
		return nil, errors.Errorf("lathe: %s: function is %T, not a lathe function", op, g)
	}
	if lg.builder != f.builder {
		return nil, errors.Errorf("lathe: %s: function %q belongs to another builder", op, lg.name)
	}
	return lg.c, nil
}

// Parameter adds an input of the function; a sharding is for SPMD and AutoSharding programs.
func (f *Function) Parameter(name string, shape shapes.Shape, sharding *compute.ShardingSpec) (compute.Value, error) {
	if err := f.builder.check("Parameter"); err != nil {
		return nil, err
	}
	var names []*C.char
	defer func() { freeNames(names) }()
	cs, err := cShape(shape, &names)
	if err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var out C.lathe_value_t
	if sharding == nil {
		if err := toError(C.lathe_parameter(f.c, cname, &cs, &out)); err != nil {
			return nil, err
		}
		return f.wrap(out), nil
	}
	spec, free := cSharding(sharding)
	defer free()
	if err := toError(C.lathe_parameter_sharded(f.c, cname, &cs, spec, &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// Constant adds a constant with the values of flat (copied) and the given dimensions.
func (f *Function) Constant(flat any, dims ...int) (compute.Value, error) {
	if err := f.builder.check("Constant"); err != nil {
		return nil, err
	}
	data, dt, _, err := flatBytes(flat)
	if err != nil {
		return nil, errors.WithMessage(err, "Constant")
	}
	var names []*C.char
	cs, err := cShape(shapes.Make(dt, dims...), &names)
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	err = toError(C.lathe_constant(f.c, &cs, unsafe.Pointer(ptr(data)), C.size_t(len(data)), &out))
	runtime.KeepAlive(flat)
	if err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// Shape returns the shape of a value.
func (f *Function) Shape(v compute.Value) (shapes.Shape, error) {
	c, err := f.value("Shape", v)
	if err != nil {
		return shapes.Invalid(), err
	}
	var cs C.lathe_shape
	if err := toError(C.lathe_value_shape(c, &cs)); err != nil {
		return shapes.Invalid(), err
	}
	return goShape(&cs), nil
}

// Return sets the outputs of the function; shardings (AutoSharding programs only) name each
// output's sharding. An empty slice counts as none: GoMLX passes one for SPMD programs.
func (f *Function) Return(outputs []compute.Value, shardings []*compute.ShardingSpec) error {
	cs, err := f.values("Return", outputs)
	if err != nil {
		return err
	}
	if len(shardings) == 0 {
		return toError(C.lathe_function_return(f.c, ptr(cs), C.int(len(cs))))
	}
	if len(shardings) != len(outputs) {
		return errors.Errorf("lathe: Return: %d shardings for %d outputs", len(shardings), len(outputs))
	}
	specs := cMalloc[*C.lathe_sharding](len(shardings))
	defer C.free(unsafe.Pointer(specs))
	all := unsafe.Slice(specs, len(shardings))
	var frees []func()
	defer func() {
		for _, fr := range frees {
			fr()
		}
	}()
	for i, sh := range shardings {
		if sh != nil {
			spec, fr := cSharding(sh)
			all[i] = spec
			frees = append(frees, fr)
		}
	}
	return toError(C.lathe_function_return_sharded(f.c, ptr(cs), specs, C.int(len(cs))))
}

// multi runs a C builder with several results written to a caller array.
func (f *Function) multi(call func(out *C.lathe_value_t, max C.int, n *C.int) C.lathe_status_t) ([]compute.Value, error) {
	const max = 256
	out := make([]C.lathe_value_t, max)
	var n C.int
	if err := toError(call(&out[0], max, &n)); err != nil {
		return nil, err
	}
	return f.wrapAll(out[:n]), nil
}

// Call calls a top-level function of the builder.
func (f *Function) Call(target compute.Function, inputs ...compute.Value) ([]compute.Value, error) {
	ct, err := f.fn("Call", target)
	if err != nil {
		return nil, err
	}
	cs, err := f.values("Call", inputs)
	if err != nil {
		return nil, err
	}
	return f.multi(func(out *C.lathe_value_t, max C.int, n *C.int) C.lathe_status_t {
		return C.lathe_call(f.c, ct, ptr(cs), C.int(len(cs)), out, max, n)
	})
}

// While runs body while cond holds, starting from initialState.
func (f *Function) While(cond, body compute.Function, initialState ...compute.Value) ([]compute.Value, error) {
	cc, err := f.fn("While", cond)
	if err != nil {
		return nil, err
	}
	cb, err := f.fn("While", body)
	if err != nil {
		return nil, err
	}
	cs, err := f.values("While", initialState)
	if err != nil {
		return nil, err
	}
	return f.multi(func(out *C.lathe_value_t, max C.int, n *C.int) C.lathe_status_t {
		return C.lathe_while(f.c, cc, cb, ptr(cs), C.int(len(cs)), out, max, n)
	})
}

// If runs one of two closures depending on the Bool scalar pred.
func (f *Function) If(pred compute.Value, trueBranch, falseBranch compute.Function) ([]compute.Value, error) {
	cp, err := f.value("If", pred)
	if err != nil {
		return nil, err
	}
	ct, err := f.fn("If", trueBranch)
	if err != nil {
		return nil, err
	}
	cf, err := f.fn("If", falseBranch)
	if err != nil {
		return nil, err
	}
	return f.multi(func(out *C.lathe_value_t, max C.int, n *C.int) C.lathe_status_t {
		return C.lathe_if(f.c, cp, ct, cf, out, max, n)
	})
}

// Sort sorts inputs along axis with comparator.
func (f *Function) Sort(comparator compute.Function, axis int, isStable bool, inputs ...compute.Value) ([]compute.Value, error) {
	cc, err := f.fn("Sort", comparator)
	if err != nil {
		return nil, err
	}
	cs, err := f.values("Sort", inputs)
	if err != nil {
		return nil, err
	}
	out := make([]C.lathe_value_t, max(len(cs), 1))
	if err := toError(C.lathe_sort(f.c, cc, C.int(axis), C.bool(isStable), ptr(cs), C.int(len(cs)), &out[0])); err != nil {
		return nil, err
	}
	return f.wrapAll(out[:len(cs)]), nil
}

func (f *Function) String() string { return fmt.Sprintf("lathe.Function(%q)", f.name) }
