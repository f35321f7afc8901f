package lathe

/*
#include "lathe.h"
*/
import "C"

import (
	"reflect"
	"runtime"
	"sync"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// Buffer implements compute.Buffer over a lathe_buffer_t.
//
// mu guards the handle: executions hold it for reading (for writing when donating) so that a
// concurrent Finalize can never free memory in use. A buffer nobody finalizes is freed when
// it becomes unreachable, unless Go was handed its memory (Data, NewSharedBuffer): such a
// slice does not keep the buffer alive, so only Finalize frees those.
type Buffer struct {
	backend *Backend
	shape   shapes.Shape

	mu      sync.RWMutex
	state   *bufferState // nil after Finalize
	cleanup runtime.Cleanup
}

// bufferState is what the GC cleanup needs (it must not reference the Buffer itself).
type bufferState struct {
	c       C.lathe_buffer_t // one C reference (which holds the C backend)
	exposed bool             // Go holds a slice over the memory
	mu      sync.Mutex
}

func (s *bufferState) free() { C.lathe_buffer_release(s.c) }

var _ compute.Buffer = (*Buffer)(nil)

// newBuffer wraps a C buffer reference.
func newBuffer(b *Backend, c C.lathe_buffer_t) *Buffer {
	var cs C.lathe_shape
	_ = toError(C.lathe_buffer_shape(c, &cs))
	buf := &Buffer{backend: b, shape: goShape(&cs), state: &bufferState{c: c}}
	buf.cleanup = runtime.AddCleanup(buf, func(s *bufferState) {
		s.mu.Lock()
		exposed := s.exposed
		s.mu.Unlock()
		if !exposed {
			s.free()
		}
	}, buf.state)
	return buf
}

// BufferFromFlatData copies flat (a slice of the shape's Go type; []byte for packed
// sub-byte dtypes) into a new buffer.
func (b *Backend) BufferFromFlatData(deviceNum compute.DeviceNum, flat any, shape shapes.Shape) (compute.Buffer, error) {
	data, err := checkFlat("BufferFromFlatData", flat, shape)
	if err != nil {
		return nil, err
	}
	var names []*C.char
	defer func() { freeNames(names) }()
	cs, err := cShape(shape, &names)
	if err != nil {
		return nil, err
	}
	cb, done, err := b.use("BufferFromFlatData")
	if err != nil {
		return nil, err
	}
	defer done()
	var c C.lathe_buffer_t
	err = toError(C.lathe_buffer_from_host(cb, C.int(deviceNum), &cs, unsafe.Pointer(ptr(data)), C.size_t(len(data)), &c))
	runtime.KeepAlive(flat)
	if err != nil {
		return nil, err
	}
	return newBuffer(b, c), nil
}

// NewSharedBuffer returns a zeroed buffer and a Go slice over its memory (no copy).
func (b *Backend) NewSharedBuffer(deviceNum compute.DeviceNum, shape shapes.Shape) (compute.Buffer, any, error) {
	var names []*C.char
	defer func() { freeNames(names) }()
	cs, err := cShape(shape, &names)
	if err != nil {
		return nil, nil, err
	}
	cb, done, err := b.use("NewSharedBuffer")
	if err != nil {
		return nil, nil, err
	}
	defer done()
	var c C.lathe_buffer_t
	var p unsafe.Pointer
	if err := toError(C.lathe_buffer_new_shared(cb, C.int(deviceNum), &cs, &c, &p)); err != nil {
		return nil, nil, err
	}
	buf := newBuffer(b, c)
	buf.state.exposed = true
	return buf, sliceOver(p, buf.shape), nil
}

// checkFlat checks that flat's Go type matches shape's dtype and returns its bytes.
func checkFlat(op string, flat any, shape shapes.Shape) ([]byte, error) {
	if flat == nil && shape.Size() == 0 { // no elements, no data (GoMLX's tensors.FromRaw passes nil)
		return nil, nil
	}
	if shape.DType.IsPacked() {
		data, ok := flat.([]byte)
		if !ok {
			return nil, errors.Errorf("lathe: %s: packed dtype %s needs []byte flat data, got %T", op, shape.DType, flat)
		}
		return data, nil
	}
	data, dt, _, err := flatBytes(flat)
	if err != nil {
		return nil, errors.WithMessage(err, op)
	}
	if dt != shape.DType {
		return nil, errors.Errorf("lathe: %s: flat data is %T, shape %s needs []%s", op, flat, shape, shape.DType.GoType())
	}
	return data, nil
}

// sliceOver returns the Go slice (of the dtype's Go type) over n elements at p.
func sliceOver(p unsafe.Pointer, shape shapes.Shape) any {
	n := shape.Size()
	if n == 0 || p == nil {
		return reflect.MakeSlice(reflect.SliceOf(shape.DType.GoType()), 0, 0).Interface()
	}
	return dtypes.UnsafeAnySliceFromBytes(p, shape.DType, n)
}

// handle returns the live C handle; call with mu held.
func (buf *Buffer) handle(op string) (C.lathe_buffer_t, error) {
	if buf == nil {
		return nil, errors.Errorf("lathe: %s: buffer is nil", op)
	}
	if buf.state == nil {
		return nil, errors.Errorf("lathe: %s: buffer %s was finalized", op, buf.shape)
	}
	return buf.state.c, nil
}

// Backend returns the backend that owns the buffer.
func (buf *Buffer) Backend() compute.Backend { return buf.backend }

// Finalize frees the buffer now. A second call is an error.
func (buf *Buffer) Finalize() error {
	buf.mu.Lock()
	defer buf.mu.Unlock()
	if _, err := buf.handle("Finalize"); err != nil {
		return err
	}
	buf.cleanup.Stop()
	buf.state.free()
	buf.state = nil
	return nil
}

// Shape returns the buffer's shape.
func (buf *Buffer) Shape() (shapes.Shape, error) {
	buf.mu.RLock()
	defer buf.mu.RUnlock()
	if _, err := buf.handle("Shape"); err != nil {
		return shapes.Invalid(), err
	}
	return buf.shape.Clone(), nil
}

// DeviceNum returns the device holding the buffer.
func (buf *Buffer) DeviceNum() (compute.DeviceNum, error) {
	buf.mu.RLock()
	defer buf.mu.RUnlock()
	c, err := buf.handle("DeviceNum")
	if err != nil {
		return 0, err
	}
	var d C.int
	if err := toError(C.lathe_buffer_device(c, &d)); err != nil {
		return 0, err
	}
	return compute.DeviceNum(d), nil
}

// ToFlatData copies the contents into flat (a slice of the dtype's Go type, exact length).
func (buf *Buffer) ToFlatData(flat any) error {
	buf.mu.RLock()
	defer buf.mu.RUnlock()
	c, err := buf.handle("ToFlatData")
	if err != nil {
		return err
	}
	data, err := checkFlat("ToFlatData", flat, buf.shape)
	if err != nil {
		return err
	}
	err = toError(C.lathe_buffer_to_host(c, unsafe.Pointer(ptr(data)), C.size_t(len(data))))
	runtime.KeepAlive(flat)
	return err
}

// Data returns a slice over the buffer's memory (no copy). It is valid until the buffer is
// finalized or donated; holding the slice does not keep the buffer alive.
func (buf *Buffer) Data() (any, error) {
	buf.mu.RLock()
	defer buf.mu.RUnlock()
	c, err := buf.handle("Data")
	if err != nil {
		return nil, err
	}
	var p unsafe.Pointer
	if err := toError(C.lathe_buffer_data(c, &p)); err != nil {
		return nil, err
	}
	buf.state.mu.Lock()
	buf.state.exposed = true
	buf.state.mu.Unlock()
	return sliceOver(p, buf.shape), nil
}

// CopyToDevice copies the buffer to a device.
func (buf *Buffer) CopyToDevice(deviceNum compute.DeviceNum) (compute.Buffer, error) {
	buf.mu.RLock()
	defer buf.mu.RUnlock()
	c, err := buf.handle("CopyToDevice")
	if err != nil {
		return nil, err
	}
	if buf.backend.IsFinalized() {
		return nil, errors.Errorf("lathe: CopyToDevice: backend %q is finalized", buf.backend.config)
	}
	var out C.lathe_buffer_t
	if err := toError(C.lathe_buffer_copy_to_device(c, C.int(deviceNum), &out)); err != nil {
		return nil, err
	}
	return newBuffer(buf.backend, out), nil
}
