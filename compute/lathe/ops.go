package lathe

/*
#include "lathe.h"
*/
import "C"

import (
	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

func (f *Function) unary(op string, cop C.lathe_op, x compute.Value) (compute.Value, error) {
	cx, err := f.value(op, x)
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	if err := toError(C.lathe_unary(f.c, cop, cx, &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

func (f *Function) binary(op string, cop C.lathe_op, lhs, rhs compute.Value) (compute.Value, error) {
	cs, err := f.values(op, []compute.Value{lhs, rhs})
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	if err := toError(C.lathe_binary(f.c, cop, cs[0], cs[1], &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

func (f *Function) reduce(op string, cop C.lathe_op, x compute.Value, axes []int) (compute.Value, error) {
	cx, err := f.value(op, x)
	if err != nil {
		return nil, err
	}
	ca := cInts(axes)
	var out C.lathe_value_t
	if err := toError(C.lathe_reduce(f.c, cop, cx, ptr(ca), C.int(len(ca)), &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// op1 runs a C builder on the converted operands and wraps its single result.
func (f *Function) op1(op string, operands []compute.Value, call func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t) (compute.Value, error) {
	cs, err := f.values(op, operands)
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	if err := toError(call(cs, &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// ConvertDType converts x to dtype.
func (f *Function) ConvertDType(x compute.Value, dtype dtypes.DType) (compute.Value, error) {
	return f.op1("ConvertDType", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_convert_dtype(f.c, cs[0], C.lathe_dtype(dtype), out)
	})
}

// Bitcast reinterprets the bits of x as targetDType.
func (f *Function) Bitcast(x compute.Value, targetDType dtypes.DType) (compute.Value, error) {
	return f.op1("Bitcast", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_bitcast(f.c, cs[0], C.lathe_dtype(targetDType), out)
	})
}

// Where selects onTrue or onFalse by condition.
func (f *Function) Where(condition, onTrue, onFalse compute.Value) (compute.Value, error) {
	return f.op1("Where", []compute.Value{condition, onTrue, onFalse}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_where(f.c, cs[0], cs[1], cs[2], out)
	})
}

// Clamp clamps x to [min, max].
func (f *Function) Clamp(min, x, max compute.Value) (compute.Value, error) {
	return f.op1("Clamp", []compute.Value{min, x, max}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_clamp(f.c, cs[0], cs[1], cs[2], out)
	})
}

// CumSum returns the running sums of x along axis (options: Exclusive, Reverse).
func (f *Function) CumSum(x compute.Value, axis int, options compute.CumSumOptions) (compute.Value, error) {
	return f.op1("CumSum", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_cum_sum(f.c, cs[0], C.int(axis), C.bool(options.Exclusive), C.bool(options.Reverse), out)
	})
}

// ArgMinMax returns the index of the min or max along axis.
func (f *Function) ArgMinMax(x compute.Value, axis int, outputDType dtypes.DType, isMin bool) (compute.Value, error) {
	return f.op1("ArgMinMax", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_arg_min_max(f.c, cs[0], C.int(axis), C.lathe_dtype(outputDType), C.bool(isMin), out)
	})
}

// Reshape gives x new dimensions.
func (f *Function) Reshape(x compute.Value, dimensions ...int) (compute.Value, error) {
	dims := cInt64s(dimensions)
	return f.op1("Reshape", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_reshape(f.c, cs[0], ptr(dims), C.int(len(dims)), out)
	})
}

// Transpose permutes the axes of x.
func (f *Function) Transpose(x compute.Value, permutation ...int) (compute.Value, error) {
	perm := cInts(permutation)
	return f.op1("Transpose", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_transpose(f.c, cs[0], ptr(perm), C.int(len(perm)), out)
	})
}

// BroadcastInDim broadcasts x to outputShape, axis i of x going to broadcastAxes[i].
func (f *Function) BroadcastInDim(x compute.Value, outputShape shapes.Shape, broadcastAxes []int) (compute.Value, error) {
	var names []*C.char
	defer func() { freeNames(names) }()
	shape, err := cShape(outputShape, &names)
	if err != nil {
		return nil, err
	}
	axes := cInts(broadcastAxes)
	return f.op1("BroadcastInDim", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_broadcast_in_dim(f.c, cs[0], &shape, ptr(axes), C.int(len(axes)), out)
	})
}

// Concatenate joins operands along axis.
func (f *Function) Concatenate(axis int, operands ...compute.Value) (compute.Value, error) {
	return f.op1("Concatenate", operands, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_concatenate(f.c, C.int(axis), ptr(cs), C.int(len(cs)), out)
	})
}

// Slice takes x[starts:limits:strides] (strides may be empty: all 1).
func (f *Function) Slice(x compute.Value, starts, limits, strides []int) (compute.Value, error) {
	if len(limits) != len(starts) || (len(strides) != 0 && len(strides) != len(starts)) {
		// The C API takes one rank for the three lists, so differing lengths stop here.
		return nil, errors.Errorf("lathe: Slice: got %d starts, %d limits and %d strides", len(starts), len(limits), len(strides))
	}
	cst, cli, csd := cInt64s(starts), cInt64s(limits), cInt64s(strides)
	return f.op1("Slice", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_slice(f.c, cs[0], ptr(cst), ptr(cli), ptr(csd), C.int(len(cst)), out)
	})
}

// Pad pads x with fillValue per axis (start, end, interior).
func (f *Function) Pad(x, fillValue compute.Value, axesConfig ...compute.PadAxis) (compute.Value, error) {
	axes := make([]C.lathe_pad_axis, len(axesConfig))
	for i, a := range axesConfig {
		axes[i] = C.lathe_pad_axis{start: C.int64_t(a.Start), end: C.int64_t(a.End), interior: C.int64_t(a.Interior)}
	}
	return f.op1("Pad", []compute.Value{x, fillValue}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_pad(f.c, cs[0], cs[1], ptr(axes), C.int(len(axes)), out)
	})
}

// Reverse reverses x along axes.
func (f *Function) Reverse(x compute.Value, axes ...int) (compute.Value, error) {
	ca := cInts(axes)
	return f.op1("Reverse", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_reverse(f.c, cs[0], ptr(ca), C.int(len(ca)), out)
	})
}

// Iota fills shape with the index along iotaAxis.
func (f *Function) Iota(shape shapes.Shape, iotaAxis int) (compute.Value, error) {
	if err := f.builder.check("Iota"); err != nil {
		return nil, err
	}
	var names []*C.char
	defer func() { freeNames(names) }()
	cs, err := cShape(shape, &names)
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	if err := toError(C.lathe_iota(f.c, &cs, C.int(iotaAxis), &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// DotGeneral is the generalised matrix product. An unset OutputDType means the operands'
// dtype (as GoMLX's reference backend and backendtest expect, whatever the doc comment says).
func (f *Function) DotGeneral(lhs compute.Value, lhsContractingAxes, lhsBatchAxes []int, rhs compute.Value,
	rhsContractingAxes, rhsBatchAxes []int, config compute.DotGeneralConfig) (compute.Value, error) {
	lc, lb, rc, rb := cInts(lhsContractingAxes), cInts(lhsBatchAxes), cInts(rhsContractingAxes), cInts(rhsBatchAxes)
	cfg := C.lathe_dot_config{accumulator_dtype: C.lathe_dtype(config.AccumulatorDType), output_dtype: C.lathe_dtype(config.OutputDType)}
	return f.op1("DotGeneral", []compute.Value{lhs, rhs}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_dot_general(f.c, cs[0], ptr(lc), C.int(len(lc)), ptr(lb), C.int(len(lb)),
			cs[1], ptr(rc), C.int(len(rc)), ptr(rb), C.int(len(rb)), &cfg, out)
	})
}
