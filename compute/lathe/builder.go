package lathe

/*
#include <stdlib.h>
#include "lathe.h"
*/
import "C"

import (
	"runtime"
	"slices"
	"sync"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// Builder implements compute.Builder over a lathe_builder_t. It belongs to one goroutine at
// a time (as the C builder). Compile frees the C builder: values of a compiled builder are
// no longer usable.
type Builder struct {
	backend *Backend
	name    string
	state   *builderState
	main    *Function
}

type builderState struct {
	c C.lathe_builder_t // holds its C backend reference
}

func (s *builderState) free() {
	if s.c != nil {
		C.lathe_builder_free(s.c)
		s.c = nil
	}
}

var _ compute.Builder = (*Builder)(nil)

// Builder creates a computation builder. Errors (a finalized backend) surface on first use.
func (b *Backend) Builder(name string) compute.Builder {
	bld := &Builder{backend: b, name: name, state: &builderState{}}
	cb, done, err := b.use("Builder")
	if err == nil {
		cname := C.CString(name)
		var c C.lathe_builder_t
		err = toError(C.lathe_builder_new(cb, cname, &c))
		C.free(unsafe.Pointer(cname))
		done()
		if err == nil {
			bld.state.c = c
			runtime.AddCleanup(bld, func(s *builderState) { s.free() }, bld.state)
		}
	}
	bld.main = &Function{builder: bld, name: compute.MainName, initErr: err}
	if err == nil {
		bld.main.c = C.lathe_builder_main(bld.state.c)
	}
	bld.main.init()
	return bld
}

// check returns an error once the builder is compiled or could not be created.
func (bld *Builder) check(op string) error {
	if bld.main.initErr != nil {
		return bld.main.initErr
	}
	if bld.state.c == nil {
		return errors.Errorf("lathe: %s: builder %q was already compiled", op, bld.name)
	}
	return nil
}

// Name returns the builder's name.
func (bld *Builder) Name() string { return bld.name }

// Main returns the main function.
func (bld *Builder) Main() compute.Function { return bld.main }

// NewFunction creates a named top-level function (to be used with Call).
func (bld *Builder) NewFunction(name string) (compute.Function, error) {
	if err := bld.check("NewFunction"); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var c C.lathe_function_t
	if err := toError(C.lathe_builder_new_function(bld.state.c, cname, &c)); err != nil {
		return nil, err
	}
	f := &Function{builder: bld, c: c, name: name}
	f.init()
	return f, nil
}

// OpShape returns the shape of a value.
func (bld *Builder) OpShape(op compute.Value) (shapes.Shape, error) {
	return bld.main.Shape(op)
}

// Compile compiles the main function and frees the builder.
func (bld *Builder) Compile() (compute.Executable, error) {
	if err := bld.check("Compile"); err != nil {
		return nil, err
	}
	if bld.backend.IsFinalized() {
		return nil, errors.Errorf("lathe: Compile: backend %q is finalized", bld.backend.config)
	}
	var c C.lathe_executable_t
	if err := toError(C.lathe_builder_compile(bld.state.c, &c)); err != nil {
		return nil, err
	}
	bld.state.free()
	return newExecutable(bld.backend, c), nil
}

// Executable implements compute.Executable over a lathe_executable_t, which is thread-safe:
// Execute may run from many goroutines at once. mu keeps Finalize from freeing it mid-run.
type Executable struct {
	backend *Backend
	mu      sync.RWMutex
	state   *execState
	cleanup runtime.Cleanup

	inputNames   []string
	inputShapes  []shapes.Shape
	outputShapes []shapes.Shape
	replicas     int // devices one execution runs on (distributed programs: inputs and outputs per device)
}

type execState struct {
	c C.lathe_executable_t // one C reference (which holds the C backend)
}

func (s *execState) free() { C.lathe_executable_release(s.c) }

var _ compute.Executable = (*Executable)(nil)

func newExecutable(b *Backend, c C.lathe_executable_t) *Executable {
	e := &Executable{backend: b, state: &execState{c: c}, replicas: int(C.lathe_executable_num_replicas(c))}
	for i := range int(C.lathe_executable_num_inputs(c)) {
		e.inputNames = append(e.inputNames, C.GoString(C.lathe_executable_input_name(c, C.int(i))))
		var cs C.lathe_shape
		_ = toError(C.lathe_executable_input_shape(c, C.int(i), &cs))
		e.inputShapes = append(e.inputShapes, goShape(&cs))
	}
	for i := range int(C.lathe_executable_num_outputs(c)) {
		var cs C.lathe_shape
		_ = toError(C.lathe_executable_output_shape(c, C.int(i), &cs))
		e.outputShapes = append(e.outputShapes, goShape(&cs))
	}
	e.cleanup = runtime.AddCleanup(e, func(s *execState) { s.free() }, e.state)
	return e
}

// Finalize frees the executable; later calls are no-ops.
func (e *Executable) Finalize() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != nil {
		e.cleanup.Stop()
		e.state.free()
		e.state = nil
	}
}

// Inputs returns the parameter names and shapes.
func (e *Executable) Inputs() ([]string, []shapes.Shape) {
	return slices.Clone(e.inputNames), slices.Clone(e.inputShapes)
}

// Outputs returns the output shapes (dynamic axes as -1).
func (e *Executable) Outputs() []shapes.Shape { return slices.Clone(e.outputShapes) }

// Execute runs the executable. Donated inputs pass their memory to the run; their Go
// buffers stay valid handles that can only be finalized.
func (e *Executable) Execute(inputs []compute.Buffer, donate []bool, defaultDevice compute.DeviceNum) ([]compute.Buffer, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.state == nil {
		return nil, errors.New("lathe: Execute: executable was finalized")
	}
	if e.backend.IsFinalized() {
		return nil, errors.Errorf("lathe: Execute: backend %q is finalized", e.backend.config)
	}
	if donate != nil && len(donate) != len(inputs) {
		return nil, errors.Errorf("lathe: Execute: %d donate flags for %d inputs", len(donate), len(inputs))
	}
	bufs := make([]*Buffer, len(inputs))
	for i, in := range inputs {
		buf, ok := in.(*Buffer)
		if !ok || buf == nil {
			return nil, errors.Errorf("lathe: Execute: input %d is %T, not a lathe buffer", i, in)
		}
		if buf.backend != e.backend {
			return nil, errors.Errorf("lathe: Execute: input %d belongs to another backend", i)
		}
		bufs[i] = buf
	}
	unlock := lockBuffers(bufs, donate)
	defer unlock()

	cin := make([]C.lathe_buffer_t, len(bufs))
	cdonate := make([]C.bool, len(bufs))
	for i, buf := range bufs {
		c, err := buf.handle("Execute")
		if err != nil {
			return nil, errors.WithMessagef(err, "input %d", i)
		}
		cin[i] = c
		cdonate[i] = C.bool(donate != nil && donate[i])
	}
	n := len(e.outputShapes) * e.replicas
	cout := make([]C.lathe_buffer_t, n)
	err := toError(C.lathe_executable_execute(e.state.c, ptr(cin), ptr(cdonate), C.int(len(cin)),
		C.int(defaultDevice), ptr(cout), C.int(n)))
	if err != nil {
		return nil, err
	}
	outs := make([]compute.Buffer, n)
	for i, c := range cout {
		outs[i] = newBuffer(e.backend, c)
	}
	return outs, nil
}

// lockBuffers locks each distinct buffer once, for writing when it is donated, in a fixed
// (handle address) order so concurrent executions cannot deadlock.
func lockBuffers(bufs []*Buffer, donate []bool) (unlock func()) {
	write := map[*Buffer]bool{}
	for i, b := range bufs {
		write[b] = write[b] || (donate != nil && donate[i])
	}
	order := make([]*Buffer, 0, len(write))
	for b := range write {
		order = append(order, b)
	}
	slices.SortFunc(order, func(a, b *Buffer) int {
		pa, pb := uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b))
		switch {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
	for _, b := range order {
		if write[b] {
			b.mu.Lock()
		} else {
			b.mu.RLock()
		}
	}
	return func() {
		for _, b := range order {
			if write[b] {
				b.mu.Unlock()
			} else {
				b.mu.RUnlock()
			}
		}
	}
}
