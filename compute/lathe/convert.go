package lathe

/*
#include <stdlib.h>
#include "lathe.h"
*/
import "C"

import (
	"reflect"
	"unsafe"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// cShape converts a Go shape. Axis names are C strings appended to *names (the caller frees
// them with freeNames after the call that borrows the shape).
func cShape(s shapes.Shape, names *[]*C.char) (C.lathe_shape, error) {
	var cs C.lathe_shape
	if s.IsTuple() {
		return cs, errors.Errorf("lathe: tuple shapes are not supported (%s)", s)
	}
	if s.Rank() > C.LATHE_MAX_RANK {
		return cs, errors.Errorf("lathe: shape %s has rank %d, more than the maximum %d", s, s.Rank(), C.LATHE_MAX_RANK)
	}
	cs.dtype = C.lathe_dtype(s.DType)
	cs.rank = C.int(s.Rank())
	for i, d := range s.Dimensions {
		cs.dims[i] = C.int64_t(d)
		if i < len(s.AxisNames) && s.AxisNames[i] != "" {
			n := C.CString(s.AxisNames[i])
			*names = append(*names, n)
			cs.axis_names[i] = n
		}
	}
	return cs, nil
}

func freeNames(names []*C.char) {
	for _, n := range names {
		C.free(unsafe.Pointer(n))
	}
}

// goShape converts a C shape (axis names are copied).
func goShape(cs *C.lathe_shape) shapes.Shape {
	rank := int(cs.rank)
	dims := make([]int, rank)
	var names []string
	for i := range rank {
		dims[i] = int(cs.dims[i])
		if cs.axis_names[i] != nil {
			if names == nil {
				names = make([]string, rank)
			}
			names[i] = C.GoString(cs.axis_names[i])
		}
	}
	if names != nil {
		return shapes.MakeDynamic(dtypes.DType(cs.dtype), dims, names)
	}
	return shapes.Make(dtypes.DType(cs.dtype), dims...)
}

// cInts copies Go ints into a Go slice of C ints (plain memory, safe to pass for a call).
func cInts(v []int) []C.int {
	out := make([]C.int, len(v))
	for i, x := range v {
		out[i] = C.int(x)
	}
	return out
}

func cInt64s(v []int) []C.int64_t {
	out := make([]C.int64_t, len(v))
	for i, x := range v {
		out[i] = C.int64_t(x)
	}
	return out
}

// ptr returns the address of the first element, or nil for an empty slice.
func ptr[T any](v []T) *T {
	if len(v) == 0 {
		return nil
	}
	return &v[0]
}

// flatBytes views a flat Go slice as bytes and returns its dtype (by Go element type) and
// length. The bytes alias the slice: use them only for the duration of a C call that copies.
func flatBytes(flat any) ([]byte, dtypes.DType, int, error) {
	rv := reflect.ValueOf(flat)
	if flat == nil || rv.Kind() != reflect.Slice {
		return nil, dtypes.InvalidDType, 0, errors.Errorf("lathe: flat data must be a slice, got %T", flat)
	}
	dt := dtypes.FromGoType(rv.Type().Elem())
	if dt == dtypes.InvalidDType {
		return nil, dt, 0, errors.Errorf("lathe: flat data of type %T is not a slice of a supported dtype", flat)
	}
	n := rv.Len()
	if n == 0 {
		return nil, dt, 0, nil
	}
	size := int(rv.Type().Elem().Size())
	return unsafe.Slice((*byte)(rv.UnsafePointer()), n*size), dt, n, nil
}
