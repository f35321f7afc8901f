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
// Lifetimes are the C engine's reference counts: the Backend owns one reference to the C
// backend, and every buffer, builder and executable holds its own (taken in C), so Finalize only
// drops the Backend's reference and the engine frees the device after the last object made
// from it. After Finalize no new object can be made and executions are refused.
type Backend struct {
	mu        sync.Mutex
	c         C.lathe_backend_t // nil after Finalize
	finalized bool

	name, config, description string
	shared                    bool
	numDevices                int
	capsOnce                  sync.Once
	caps                      compute.Capabilities
}

var _ compute.Backend = (*Backend)(nil)

// New creates a lathe backend from the configuration after "lathe:" ("cpu", "cpu,threads=2",
// or "" for the best device).
func New(config string) (compute.Backend, error) { return NewNamed(BackendName, config) }

// NewNamed creates a backend of the C engine's registry by name and configuration: "lathe", or
// "mlx" (the MLX device, when the engine is built with it: see compute/mlx). config is the part
// after "name:".
func NewNamed(name, config string) (compute.Backend, error) {
	full := name
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
		numDevices:  int(C.lathe_backend_num_devices(cb)),
	}
	return b, nil
}

// use returns a C reference to the backend for one call (release it with done); it fails
// once the backend is finalized.
func (b *Backend) use(op string) (c C.lathe_backend_t, done func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finalized {
		return nil, nil, errors.Errorf("lathe: %s: backend %q is finalized", op, b.config)
	}
	c = C.lathe_backend_retain(b.c)
	return c, func() { C.lathe_backend_release(c) }, nil
}

// Name returns "lathe".
func (b *Backend) Name() string { return b.name }

// String returns the normalised configuration, e.g. "lathe:cpu,threads=2".
func (b *Backend) String() string { return b.config }

// Description describes the engine and device.
func (b *Backend) Description() string { return b.description }

// NumDevices returns the number of devices of the backend.
func (b *Backend) NumDevices() int { return b.numDevices }

// DeviceDescription describes one device.
func (b *Backend) DeviceDescription(deviceNum compute.DeviceNum) string {
	c, done, err := b.use("DeviceDescription")
	if err != nil {
		return ""
	}
	defer done()
	return C.GoString(C.lathe_backend_device_description(c, C.int(deviceNum)))
}

// Finalize drops the Backend's reference to the engine; the device goes once its buffers,
// builders and executables are finalized (or collected) too. Calling it again is a no-op.
func (b *Backend) Finalize() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.finalized {
		return
	}
	b.finalized = true
	C.lathe_backend_release(b.c)
	b.c = nil
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
		cb, done, err := b.use("Capabilities")
		if err != nil {
			b.caps = compute.Capabilities{Operations: map[compute.OpType]bool{}, DTypes: map[dtypes.DType]bool{}}
			return
		}
		defer done()
		b.caps = capabilitiesOf(cb)
	})
	return b.caps.Clone()
}

// capabilitiesOf asks the engine about every compute.OpType (matched by name) and dtype.
func capabilitiesOf(cb C.lathe_backend_t) compute.Capabilities {
	caps := compute.Capabilities{
		Operations: map[compute.OpType]bool{},
		DTypes:     map[dtypes.DType]bool{},
		// Native: one plan serves every binding (mlx:dynamic); Recompiling: a specialisation per
		// binding (lathe:cpu, lathe:cuda, compiled mlx). DynamicAxes (deprecated) follows it.
		DynamicShapes: compute.DynamicShapesSupport(C.lathe_backend_dynamic_shapes(cb)),
		// DynamicShape and DynamicDimensionSize give Int64 sizes on every device.
		DynamicDimDType: dtypes.Int64,
	}
	caps.DynamicAxes = caps.DynamicShapes != compute.DynamicShapesNone
	var supported []C.lathe_dtype
	for dt := dtypes.DType(1); dt < dtypes.DType(C.LATHE_DTYPE_LIMIT); dt++ {
		if C.lathe_backend_supports_dtype(cb, C.lathe_dtype(dt)) {
			caps.DTypes[dt] = true
			supported = append(supported, C.lathe_dtype(dt))
		}
	}
	for _, op := range compute.OpTypeValues() {
		cop, ok := opOf(op)
		if !ok || noBuilder[op] {
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

// noBuilder lists the op types the engine runs but compute.Function has no method for (AllGather
// is commented out of compute v0.1.14's interface): a GoMLX program cannot build them, so they are
// not its capabilities. The engine's own API (lathe_all_gather) has them.
var noBuilder = map[compute.OpType]bool{compute.OpTypeAllGather: true}

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
