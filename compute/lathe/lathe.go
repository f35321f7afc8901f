// Package lathe registers the "lathe" GoMLX compute backend: an engine written in C (the
// repository's src/ tree, compiled here by cgo) behind github.com/gomlx/compute's Backend API.
//
// Import it for its side effect:
//
//	import _ "github.com/lathe-dev/lathe/compute/lathe"
//	backend, err := compute.NewWithConfig("lathe:cpu,threads=4")
//
// This package only converts types and forwards calls to include/lathe.h: shape inference,
// validation and kernels all live in C. A C status becomes a Go error; an UNIMPLEMENTED
// status wraps compute.ErrNotImplemented.
package lathe

//go:generate go run ./internal/gensrc

/*
#cgo CFLAGS: -I${SRCDIR}/../../include -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
#cgo amd64 CFLAGS: -march=x86-64-v2
#cgo LDFLAGS: -lopenblas -lm -lpthread -ldl
#include <stdlib.h>
#include "lathe.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/pkg/errors"
)

// BackendName is the name registered with compute.Register.
const BackendName = "lathe"

func init() {
	compute.Register(BackendName, New)
}

// Backend implements compute.Backend over a lathe_backend_t.
//
// The C backend must outlive every buffer, builder and executable made from it, so each of
// those holds a reference (acquire/release) and Finalize frees the C backend only once the
// last reference is gone.
type Backend struct {
	mu        sync.Mutex
	c         C.lathe_backend_t
	refs      int
	finalized bool

	name, config, description string
	shared                    bool
	capsOnce                  sync.Once
	caps                      compute.Capabilities
}

var _ compute.Backend = (*Backend)(nil)

// New creates a lathe backend from the configuration after "lathe:" ("cpu", "cpu,threads=2",
// or "" for the best device).
func New(config string) (compute.Backend, error) {
	full := BackendName
	if config != "" {
		full += ":" + config
	}
	cfg := C.CString(full)
	defer C.free(unsafe.Pointer(cfg))
	var cb C.lathe_backend_t
	if err := toError(C.lathe_backend_new(cfg, &cb)); err != nil {
		return nil, err
	}
	b := &Backend{
		c:           cb,
		name:        C.GoString(C.lathe_backend_name(cb)),
		config:      C.GoString(C.lathe_backend_config(cb)),
		description: C.GoString(C.lathe_backend_description(cb)),
		shared:      bool(C.lathe_backend_has_shared_buffers(cb)),
	}
	return b, nil
}

// acquire takes a reference to the C backend for a new object; it fails once finalized.
func (b *Backend) acquire() (C.lathe_backend_t, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finalized {
		return nil, errors.Errorf("lathe: backend %q is finalized", b.config)
	}
	b.refs++
	return b.c, nil
}

// release drops a reference taken by acquire, freeing the C backend after Finalize.
func (b *Backend) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refs--
	b.freeIfDoneLocked()
}

func (b *Backend) freeIfDoneLocked() {
	if b.finalized && b.refs == 0 && b.c != nil {
		C.lathe_backend_free(b.c)
		b.c = nil
	}
}

// Name returns "lathe".
func (b *Backend) Name() string { return b.name }

// String returns the normalised configuration, e.g. "lathe:cpu,threads=2".
func (b *Backend) String() string { return b.config }

// Description describes the engine and device.
func (b *Backend) Description() string { return b.description }

// NumDevices returns the number of devices of the backend.
func (b *Backend) NumDevices() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c == nil {
		return 0
	}
	return int(C.lathe_backend_num_devices(b.c))
}

// DeviceDescription describes one device.
func (b *Backend) DeviceDescription(deviceNum compute.DeviceNum) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c == nil {
		return ""
	}
	return C.GoString(C.lathe_backend_device_description(b.c, C.int(deviceNum)))
}

// Finalize releases the backend; the C side goes once its buffers, builders and executables
// are finalized too. Calling it again is a no-op.
func (b *Backend) Finalize() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finalized = true
	b.freeIfDoneLocked()
}

// IsFinalized reports whether Finalize was called.
func (b *Backend) IsFinalized() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.finalized
}

// HasSharedBuffers reports whether buffers are host memory Go can read and write in place.
func (b *Backend) HasSharedBuffers() bool { return b.shared }

// Capabilities are generated from the C engine's queries, once per backend.
func (b *Backend) Capabilities() compute.Capabilities {
	b.capsOnce.Do(func() {
		cb, err := b.acquire()
		if err != nil {
			b.caps = compute.Capabilities{Operations: map[compute.OpType]bool{}, DTypes: map[dtypes.DType]bool{}}
			return
		}
		defer b.release()
		b.caps = capabilitiesOf(cb)
	})
	return b.caps.Clone()
}

// capabilitiesOf asks the engine about every compute.OpType (matched by name) and dtype.
func capabilitiesOf(cb C.lathe_backend_t) compute.Capabilities {
	caps := compute.Capabilities{
		Operations:  map[compute.OpType]bool{},
		DTypes:      map[dtypes.DType]bool{},
		DynamicAxes: bool(C.lathe_backend_supports_dynamic_axes(cb)),
	}
	var supported []C.lathe_dtype
	for dt := dtypes.DType(1); dt < dtypes.DType(C.LATHE_DTYPE_LIMIT); dt++ {
		if C.lathe_backend_supports_dtype(cb, C.lathe_dtype(dt)) {
			caps.DTypes[dt] = true
			supported = append(supported, C.lathe_dtype(dt))
		}
	}
	for _, op := range compute.OpTypeValues() {
		cop, ok := opOf(op)
		if !ok {
			continue
		}
		for _, dt := range supported {
			if C.lathe_backend_supports_op(cb, cop, dt) {
				caps.Operations[op] = true
				break
			}
		}
	}
	for _, op := range []compute.OpType{compute.OpTypeCall, compute.OpTypeWhile, compute.OpTypeIf, compute.OpTypeSort} {
		caps.Functions = caps.Functions || caps.Operations[op]
	}
	return caps
}

// opOf maps a compute.OpType to the engine's op by its GoMLX name.
func opOf(op compute.OpType) (C.lathe_op, bool) {
	name := strings.TrimPrefix(op.String(), "OpType")
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	cop := C.lathe_op_from_name(cname)
	return cop, cop != C.LATHE_OP_COUNT
}

// toError converts (and frees) a C status: nil for OK; UNIMPLEMENTED wraps
// compute.ErrNotImplemented.
func toError(st C.lathe_status_t) error {
	if st == nil {
		return nil
	}
	defer C.lathe_status_free(st)
	msg := C.GoString(C.lathe_status_message(st))
	if C.lathe_status_code_of(st) == C.LATHE_STATUS_UNIMPLEMENTED {
		return errors.WithStack(fmt.Errorf("%w: lathe: %s", compute.ErrNotImplemented, msg))
	}
	code := C.GoString(C.lathe_status_code_name(C.lathe_status_code_of(st)))
	return errors.Errorf("lathe: %s (%s)", msg, code)
}
