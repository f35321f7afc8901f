package lathe

/*
#include <stdlib.h>
#include "lathe.h"
*/
import "C"

import (
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/pkg/errors"
)

// Programs over several devices (lathe:cpu,devices=N): SPMD replicas with AllReduce, and
// AutoSharding over meshes. The engine does the work (src/graph/distribution.c,
// src/runtime/distributed.c); these methods convert and forward.

// cMalloc allocates n C values of type T (zeroed), for arrays C keeps no pointer to.
func cMalloc[T any](n int) *T {
	var zero T
	if n == 0 {
		n = 1
	}
	return (*T)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(zero))))
}

// cStrings copies strs into C memory; free releases them.
func cStrings(strs []string) (**C.char, func()) {
	arr := cMalloc[*C.char](len(strs))
	all := unsafe.Slice(arr, max(len(strs), 1))
	for i, s := range strs {
		all[i] = C.CString(s)
	}
	return arr, func() {
		for i := range strs {
			C.free(unsafe.Pointer(all[i]))
		}
		C.free(unsafe.Pointer(arr))
	}
}

// cSharding converts a ShardingSpec (the C struct lives in C memory until free).
func cSharding(s *compute.ShardingSpec) (*C.lathe_sharding, func()) {
	spec := cMalloc[C.lathe_sharding](1)
	var frees []func()
	mesh := C.CString(s.Mesh)
	spec.mesh = mesh
	spec.rank = C.int(min(len(s.Axes), C.LATHE_MAX_RANK))
	for a := 0; a < int(spec.rank); a++ {
		arr, free := cStrings(s.Axes[a])
		frees = append(frees, free)
		spec.axes[a] = arr
		spec.n_axes[a] = C.int(len(s.Axes[a]))
	}
	return spec, func() {
		for _, f := range frees {
			f()
		}
		C.free(unsafe.Pointer(mesh))
		C.free(unsafe.Pointer(spec))
	}
}

// DistributedSPMD makes the program run as numDevices replicas, one per device; they exchange
// values through AllReduce.
func (bld *Builder) DistributedSPMD(numDevices int) error {
	if err := bld.check("DistributedSPMD"); err != nil {
		return err
	}
	return toError(C.lathe_builder_spmd(bld.state.c, C.int(numDevices)))
}

// DistributedAutoSharding makes the program run over the devices of the meshes, its parameters
// and outputs split by their sharding specs. lathe computes such a program whole on the first
// device of the assignment and splits the outputs: exact results, the work on one device
// (docs/LIMITATIONS.md).
func (bld *Builder) DistributedAutoSharding(meshes ...compute.Mesh) error {
	if err := bld.check("DistributedAutoSharding"); err != nil {
		return err
	}
	cm := cMalloc[C.lathe_mesh](len(meshes))
	defer C.free(unsafe.Pointer(cm))
	all := unsafe.Slice(cm, max(len(meshes), 1))
	var frees []func()
	defer func() {
		for _, f := range frees {
			f()
		}
	}()
	for i, m := range meshes {
		name := C.CString(m.Name)
		frees = append(frees, func() { C.free(unsafe.Pointer(name)) })
		sizes := cMalloc[C.int](len(m.AxesSizes))
		frees = append(frees, func() { C.free(unsafe.Pointer(sizes)) })
		for k, v := range m.AxesSizes {
			unsafe.Slice(sizes, len(m.AxesSizes))[k] = C.int(v)
		}
		names, freeNames := cStrings(m.AxesNames)
		frees = append(frees, freeNames)
		all[i].name = name
		all[i].rank = C.int(len(m.AxesSizes))
		all[i].axis_sizes = sizes
		all[i].axis_names = names
		if len(m.LogicalDeviceAssignment) > 0 {
			logical := cMalloc[C.int](len(m.LogicalDeviceAssignment))
			frees = append(frees, func() { C.free(unsafe.Pointer(logical)) })
			for k, v := range m.LogicalDeviceAssignment {
				unsafe.Slice(logical, len(m.LogicalDeviceAssignment))[k] = C.int(v)
			}
			all[i].logical_devices = logical
		}
	}
	return toError(C.lathe_builder_auto_sharding(bld.state.c, cm, C.int(len(meshes))))
}

// DeviceAssignment fixes the devices of the compiled executable: one for a single-device
// program, one per replica or mesh device for a distributed one.
func (bld *Builder) DeviceAssignment(devices ...compute.DeviceNum) error {
	if err := bld.check("DeviceAssignment"); err != nil {
		return err
	}
	cdev := make([]C.int, len(devices))
	for i, d := range devices {
		cdev[i] = C.int(d)
	}
	return toError(C.lathe_builder_assign_devices(bld.state.c, ptr(cdev), C.int(len(cdev))))
}

// AllReduce reduces each operand over the replicas of its group (groups nil: every replica).
func (f *Function) AllReduce(operands []compute.Value, reductionType compute.ReduceOpType,
	replicaGroups [][]int) ([]compute.Value, error) {
	cs, err := f.values("AllReduce", operands)
	if err != nil {
		return nil, err
	}
	op, err := reduceOp("AllReduce", reductionType)
	if err != nil {
		return nil, err
	}
	var flat, sizes []C.int
	for _, g := range replicaGroups {
		sizes = append(sizes, C.int(len(g)))
		for _, r := range g {
			flat = append(flat, C.int(r))
		}
	}
	if len(replicaGroups) == 0 {
		flat, sizes = []C.int{0}, []C.int{0}
	}
	out := make([]C.lathe_value_t, len(cs))
	if len(cs) == 0 {
		return nil, errors.New("lathe: AllReduce: needs at least one operand")
	}
	err = toError(C.lathe_all_reduce(f.c, ptr(cs), C.int(len(cs)), op, ptr(flat), ptr(sizes), C.int(len(replicaGroups)), ptr(out)))
	if err != nil {
		return nil, err
	}
	return f.wrapAll(out), nil
}
