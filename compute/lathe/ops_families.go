package lathe

/*
#include <stdlib.h>
#include "lathe.h"
*/
import "C"

import (
	"strings"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// Indexing.

// Gather in XLA's general form.
func (f *Function) Gather(operand, startIndices compute.Value, indexVectorAxis int,
	offsetOutputAxes, collapsedSliceAxes, startIndexMap, sliceSizes []int, indicesAreSorted bool) (compute.Value, error) {
	oo, cs_, sm, ss := cInts(offsetOutputAxes), cInts(collapsedSliceAxes), cInts(startIndexMap), cInt64s(sliceSizes)
	return f.op1("Gather", []compute.Value{operand, startIndices}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_gather(f.c, cs[0], cs[1], C.int(indexVectorAxis), ptr(oo), C.int(len(oo)), ptr(cs_), C.int(len(cs_)),
			ptr(sm), C.int(len(sm)), ptr(ss), C.int(len(ss)), C.bool(indicesAreSorted), out)
	})
}

func (f *Function) scatter(op string, cop C.lathe_op, operand, indices, updates compute.Value, indexVectorAxis int,
	updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int, indicesAreSorted, uniqueIndices bool) (compute.Value, error) {
	uw, iw, sa := cInts(updateWindowAxes), cInts(insertedWindowAxes), cInts(scatterAxesToOperandAxes)
	return f.op1(op, []compute.Value{operand, indices, updates}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_scatter(f.c, cop, cs[0], cs[1], cs[2], C.int(indexVectorAxis), ptr(uw), C.int(len(uw)),
			ptr(iw), C.int(len(iw)), ptr(sa), C.int(len(sa)), C.bool(indicesAreSorted), C.bool(uniqueIndices), out)
	})
}

// ScatterSum adds updates into operand at the indexed windows.
func (f *Function) ScatterSum(operand, indices, updates compute.Value, indexVectorAxis int,
	updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int, indicesAreSorted, uniqueIndices bool) (compute.Value, error) {
	return f.scatter("ScatterSum", C.LATHE_OP_SCATTER_SUM, operand, indices, updates, indexVectorAxis,
		updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes, indicesAreSorted, uniqueIndices)
}

// ScatterMax takes the max of operand and updates at the indexed windows.
func (f *Function) ScatterMax(operand, indices, updates compute.Value, indexVectorAxis int,
	updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int, indicesAreSorted, uniqueIndices bool) (compute.Value, error) {
	return f.scatter("ScatterMax", C.LATHE_OP_SCATTER_MAX, operand, indices, updates, indexVectorAxis,
		updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes, indicesAreSorted, uniqueIndices)
}

// ScatterMin takes the min of operand and updates at the indexed windows.
func (f *Function) ScatterMin(operand, indices, updates compute.Value, indexVectorAxis int,
	updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int, indicesAreSorted, uniqueIndices bool) (compute.Value, error) {
	return f.scatter("ScatterMin", C.LATHE_OP_SCATTER_MIN, operand, indices, updates, indexVectorAxis,
		updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes, indicesAreSorted, uniqueIndices)
}

// DynamicSlice takes a slice of sizes sliceDims at run-time start indices.
func (f *Function) DynamicSlice(operand compute.Value, startIndices []compute.Value, sliceDims []int) (compute.Value, error) {
	sd := cInt64s(sliceDims)
	return f.op1("DynamicSlice", append([]compute.Value{operand}, startIndices...), func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_dynamic_slice(f.c, cs[0], ptr(cs[1:]), C.int(len(cs)-1), ptr(sd), C.int(len(sd)), out)
	})
}

// DynamicUpdateSlice writes update into operand at run-time start indices.
func (f *Function) DynamicUpdateSlice(operand, update compute.Value, startIndices []compute.Value) (compute.Value, error) {
	return f.op1("DynamicUpdateSlice", append([]compute.Value{operand, update}, startIndices...), func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_dynamic_update_slice(f.c, cs[0], cs[1], ptr(cs[2:]), C.int(len(cs)-2), out)
	})
}

// Convolutions and windows.

func cPaddings(p [][2]int) []C.lathe_padding {
	out := make([]C.lathe_padding, len(p))
	for i, lh := range p {
		out[i] = C.lathe_padding{low: C.int64_t(lh[0]), high: C.int64_t(lh[1])}
	}
	return out
}

// ConvGeneral is XLA's general dilated convolution. The C structs borrow C-allocated arrays
// (a Go struct handed to C may not hold Go pointers).
func (f *Function) ConvGeneral(input, kernel compute.Value, axes compute.ConvolveAxesConfig, strides []int,
	paddings [][2]int, inputDilations, kernelDilations []int, channelGroupCount, batchGroupCount int) (compute.Value, error) {
	var a cAlloc
	defer a.free()
	ca := C.lathe_conv_axes{
		input_batch: C.int(axes.InputBatch), input_channels: C.int(axes.InputChannels),
		input_spatial: a.ints(axes.InputSpatial), n_input_spatial: C.int(len(axes.InputSpatial)),
		kernel_input_channels: C.int(axes.KernelInputChannels), kernel_output_channels: C.int(axes.KernelOutputChannels),
		kernel_spatial: a.ints(axes.KernelSpatial), n_kernel_spatial: C.int(len(axes.KernelSpatial)),
		output_batch: C.int(axes.OutputBatch), output_channels: C.int(axes.OutputChannels),
		output_spatial: a.ints(axes.OutputSpatial), n_output_spatial: C.int(len(axes.OutputSpatial)),
	}
	cp := C.lathe_conv_params{
		strides: a.int64s(strides), n_strides: C.int(len(strides)),
		paddings: a.paddings(paddings), n_paddings: C.int(len(paddings)),
		input_dilations: a.int64s(inputDilations), n_input_dilations: C.int(len(inputDilations)),
		kernel_dilations: a.int64s(kernelDilations), n_kernel_dilations: C.int(len(kernelDilations)),
		channel_group_count: C.int64_t(channelGroupCount), batch_group_count: C.int64_t(batchGroupCount),
	}
	if a.err != nil {
		return nil, a.err
	}
	return f.op1("ConvGeneral", []compute.Value{input, kernel}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_conv_general(f.c, cs[0], cs[1], &ca, &cp, out)
	})
}

// reduceOp maps a compute.ReduceOpType (ReduceOpSum, ...) to the engine's Reduce* op.
func reduceOp(op string, r compute.ReduceOpType) (C.lathe_op, error) {
	name := "Reduce" + strings.TrimPrefix(r.String(), "ReduceOp")
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	cop := C.lathe_op_from_name(cname)
	if cop == C.LATHE_OP_COUNT {
		return cop, errors.Wrapf(compute.ErrNotImplemented, "lathe: %s: reduction %s", op, r)
	}
	return cop, nil
}

func windowParams(a *cAlloc, windowDimensions, strides, inputDilations, windowDilations []int, paddings [][2]int) C.lathe_window_params {
	return C.lathe_window_params{
		window_dims: a.int64s(windowDimensions), n_window_dims: C.int(len(windowDimensions)),
		strides: a.int64s(strides), n_strides: C.int(len(strides)),
		input_dilations: a.int64s(inputDilations), n_input_dilations: C.int(len(inputDilations)),
		window_dilations: a.int64s(windowDilations), n_window_dilations: C.int(len(windowDilations)),
		paddings: a.paddings(paddings), n_paddings: C.int(len(paddings)),
	}
}

// ReduceWindow reduces each window of input.
func (f *Function) ReduceWindow(input compute.Value, reductionType compute.ReduceOpType,
	windowDimensions, strides, inputDilations, windowDilations []int, paddings [][2]int) (compute.Value, error) {
	cop, err := reduceOp("ReduceWindow", reductionType)
	if err != nil {
		return nil, err
	}
	var a cAlloc
	defer a.free()
	p := windowParams(&a, windowDimensions, strides, inputDilations, windowDilations, paddings)
	if a.err != nil {
		return nil, a.err
	}
	return f.op1("ReduceWindow", []compute.Value{input}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_reduce_window(f.c, cop, cs[0], &p, out)
	})
}

func (f *Function) selectAndScatter(op string, cop C.lathe_op, operand, source compute.Value, windowDimensions, windowStrides []int, paddings [][2]int) (compute.Value, error) {
	var a cAlloc
	defer a.free()
	p := windowParams(&a, windowDimensions, windowStrides, nil, nil, paddings)
	if a.err != nil {
		return nil, a.err
	}
	return f.op1(op, []compute.Value{operand, source}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_select_and_scatter(f.c, cop, cs[0], cs[1], &p, out)
	})
}

// SelectAndScatterMax scatters source onto the max of each window.
func (f *Function) SelectAndScatterMax(operand, source compute.Value, windowDimensions, windowStrides []int, paddings [][2]int) (compute.Value, error) {
	return f.selectAndScatter("SelectAndScatterMax", C.LATHE_OP_SELECT_AND_SCATTER_MAX, operand, source, windowDimensions, windowStrides, paddings)
}

// SelectAndScatterMin scatters source onto the min of each window.
func (f *Function) SelectAndScatterMin(operand, source compute.Value, windowDimensions, windowStrides []int, paddings [][2]int) (compute.Value, error) {
	return f.selectAndScatter("SelectAndScatterMin", C.LATHE_OP_SELECT_AND_SCATTER_MIN, operand, source, windowDimensions, windowStrides, paddings)
}

// Numerics.

// RNGBitGenerator returns the new state and random bits of the given shape (Philox).
func (f *Function) RNGBitGenerator(state compute.Value, shape shapes.Shape) (compute.Value, compute.Value, error) {
	cst, err := f.value("RNGBitGenerator", state)
	if err != nil {
		return nil, nil, err
	}
	var names []*C.char
	defer func() { freeNames(names) }()
	cs, err := cShape(shape, &names)
	if err != nil {
		return nil, nil, err
	}
	var out [2]C.lathe_value_t
	if err := toError(C.lathe_rng_bit_generator(f.c, cst, &cs, &out[0])); err != nil {
		return nil, nil, err
	}
	return f.wrap(out[0]), f.wrap(out[1]), nil
}

// FFT over the innermost len(fftLength) axes.
func (f *Function) FFT(operand compute.Value, fftType compute.FFTType, fftLength []int) (compute.Value, error) {
	ft, err := enumOf("FFT", "FFT type", fftTypes, fftType)
	if err != nil {
		return nil, err
	}
	fl := cInt64s(fftLength)
	return f.op1("FFT", []compute.Value{operand}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_fft(f.c, cs[0], ft, ptr(fl), C.int(len(fl)), out)
	})
}

// BatchNormForInference normalises with the given mean and variance.
func (f *Function) BatchNormForInference(operand, scale, offset, mean, variance compute.Value, epsilon float32, featureAxis int) (compute.Value, error) {
	return f.op1("BatchNormForInference", []compute.Value{operand, scale, offset, mean, variance}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_batch_norm_for_inference(f.c, cs[0], cs[1], cs[2], cs[3], cs[4], C.float(epsilon), C.int(featureAxis), out)
	})
}

// BatchNormForTraining normalises with the batch statistics, which it also returns.
func (f *Function) BatchNormForTraining(operand, scale, offset compute.Value, epsilon float32, featureAxis int) (compute.Value, compute.Value, compute.Value, error) {
	cs, err := f.values("BatchNormForTraining", []compute.Value{operand, scale, offset})
	if err != nil {
		return nil, nil, nil, err
	}
	var out [3]C.lathe_value_t
	if err := toError(C.lathe_batch_norm_for_training(f.c, cs[0], cs[1], cs[2], C.float(epsilon), C.int(featureAxis), &out[0])); err != nil {
		return nil, nil, nil, err
	}
	return f.wrap(out[0]), f.wrap(out[1]), f.wrap(out[2]), nil
}

// BatchNormGradient returns the gradients of the operand, scale and offset.
func (f *Function) BatchNormGradient(operand, scale, mean, variance, gradOutput compute.Value, epsilon float32, featureAxis int) (compute.Value, compute.Value, compute.Value, error) {
	cs, err := f.values("BatchNormGradient", []compute.Value{operand, scale, mean, variance, gradOutput})
	if err != nil {
		return nil, nil, nil, err
	}
	var out [3]C.lathe_value_t
	if err := toError(C.lathe_batch_norm_gradient(f.c, cs[0], cs[1], cs[2], cs[3], cs[4], C.float(epsilon), C.int(featureAxis), &out[0])); err != nil {
		return nil, nil, nil, err
	}
	return f.wrap(out[0]), f.wrap(out[1]), f.wrap(out[2]), nil
}

// Dynamic shapes.

// DynamicShape returns x's dims at run time as Int64[rank] (Capabilities.DynamicDimDType).
func (f *Function) DynamicShape(operand compute.Value) (compute.Value, error) {
	return f.op1("DynamicShape", []compute.Value{operand}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_dynamic_shape(f.c, cs[0], out)
	})
}

// DynamicDimensionSize returns the size of an axis at run time as an Int64 scalar.
func (f *Function) DynamicDimensionSize(operand compute.Value, axis int) (compute.Value, error) {
	return f.op1("DynamicDimensionSize", []compute.Value{operand}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_dynamic_dimension_size(f.c, cs[0], C.int(axis), out)
	})
}

// dimSpecs converts compute's dimension specs (names in C memory owned by a, value handles).
func (f *Function) dimSpecs(op string, a *cAlloc, dimensions []compute.DynamicDimensionSpec) ([]C.lathe_dim_spec, error) {
	specs := make([]C.lathe_dim_spec, len(dimensions))
	for i, d := range dimensions {
		specs[i].static_size = C.int64_t(d.Static)
		if d.Name != "" {
			specs[i].name = a.str(d.Name)
		}
		if d.Value != nil {
			v, err := f.value(op, d.Value)
			if err != nil {
				return nil, err
			}
			specs[i].value = v
		}
	}
	return specs, nil
}

// DynamicReshape reshapes to static, named (sized by values) or inferred dimensions.
func (f *Function) DynamicReshape(operand compute.Value, dimensions ...compute.DynamicDimensionSpec) (compute.Value, error) {
	cx, err := f.value("DynamicReshape", operand)
	if err != nil {
		return nil, err
	}
	var a cAlloc
	defer a.free()
	specs, err := f.dimSpecs("DynamicReshape", &a, dimensions)
	if err != nil {
		return nil, err
	}
	// specs holds C pointers only (names in C memory, value handles), so Go may pass it.
	var out C.lathe_value_t
	if err := toError(C.lathe_dynamic_reshape(f.c, cx, ptr(specs), C.int(len(specs)), &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// DynamicBroadcastInDim broadcasts to dimensions that may be sized by values.
func (f *Function) DynamicBroadcastInDim(operand compute.Value, broadcastAxes []int, dimensions ...compute.DynamicDimensionSpec) (compute.Value, error) {
	cx, err := f.value("DynamicBroadcastInDim", operand)
	if err != nil {
		return nil, err
	}
	var a cAlloc
	defer a.free()
	specs, err := f.dimSpecs("DynamicBroadcastInDim", &a, dimensions)
	if err != nil {
		return nil, err
	}
	axes := cInts(broadcastAxes)
	var out C.lathe_value_t
	if err := toError(C.lathe_dynamic_broadcast_in_dim(f.c, cx, ptr(axes), C.int(len(axes)), ptr(specs), C.int(len(specs)), &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// DynamicIota counts along iotaAxis in dimensions that may be sized by values.
func (f *Function) DynamicIota(dtype dtypes.DType, iotaAxis int, dimensions ...compute.DynamicDimensionSpec) (compute.Value, error) {
	var a cAlloc
	defer a.free()
	specs, err := f.dimSpecs("DynamicIota", &a, dimensions)
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	if err := toError(C.lathe_dynamic_iota(f.c, C.lathe_dtype(dtype), C.int(iotaAxis), ptr(specs), C.int(len(specs)), &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// DynamicPad pads by amounts that may be values.
func (f *Function) DynamicPad(x, fillValue compute.Value, axesConfig ...compute.DynamicPadAxis) (compute.Value, error) {
	cs, err := f.values("DynamicPad", []compute.Value{x, fillValue})
	if err != nil {
		return nil, err
	}
	var a cAlloc
	defer a.free()
	axes := make([]C.lathe_dynamic_pad_axis, len(axesConfig))
	for i, p := range axesConfig {
		axes[i].start, axes[i].end, axes[i].interior = C.int64_t(p.Start), C.int64_t(p.End), C.int64_t(p.Interior)
		for _, v := range []struct {
			in  compute.Value
			out *C.lathe_value_t
		}{{p.StartValue, &axes[i].start_value}, {p.EndValue, &axes[i].end_value}, {p.InteriorValue, &axes[i].interior_value}} {
			if v.in == nil {
				continue
			}
			cv, err := f.value("DynamicPad", v.in)
			if err != nil {
				return nil, err
			}
			*v.out = cv
		}
		if p.TargetAxisName != "" {
			axes[i].target_name = a.str(p.TargetAxisName)
		}
	}
	var out C.lathe_value_t
	if err := toError(C.lathe_dynamic_pad(f.c, cs[0], cs[1], ptr(axes), C.int(len(axes)), &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// Barriers.

// OptimizationBarrier returns its operands unchanged, fencing the optimiser.
func (f *Function) OptimizationBarrier(operands ...compute.Value) ([]compute.Value, error) {
	cs, err := f.values("OptimizationBarrier", operands)
	if err != nil {
		return nil, err
	}
	out := make([]C.lathe_value_t, max(len(cs), 1))
	if err := toError(C.lathe_optimization_barrier(f.c, ptr(cs), C.int(len(cs)), &out[0])); err != nil {
		return nil, err
	}
	return f.wrapAll(out[:len(cs)]), nil
}

// SchedulingBarrier returns operand once all dependencies are computed.
func (f *Function) SchedulingBarrier(operand compute.Value, dependencies ...compute.Value) (compute.Value, error) {
	return f.op1("SchedulingBarrier", append([]compute.Value{operand}, dependencies...), func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_scheduling_barrier(f.c, cs[0], ptr(cs[1:]), C.int(len(cs)-1), out)
	})
}

// cAlloc holds C memory for arrays that C structs point to; free releases it all.
type cAlloc struct {
	ptrs []unsafe.Pointer
	err  error
}

func (a *cAlloc) alloc(n, size int) unsafe.Pointer {
	if n == 0 {
		return nil
	}
	p := C.malloc(C.size_t(n * size))
	if p == nil {
		a.err = errors.New("lathe: out of memory")
		return nil
	}
	a.ptrs = append(a.ptrs, p)
	return p
}

func (a *cAlloc) ints(v []int) *C.int {
	p := (*C.int)(a.alloc(len(v), int(unsafe.Sizeof(C.int(0)))))
	if p != nil {
		copy(unsafe.Slice(p, len(v)), cInts(v))
	}
	return p
}

func (a *cAlloc) int64s(v []int) *C.int64_t {
	p := (*C.int64_t)(a.alloc(len(v), 8))
	if p != nil {
		copy(unsafe.Slice(p, len(v)), cInt64s(v))
	}
	return p
}

func (a *cAlloc) paddings(v [][2]int) *C.lathe_padding {
	p := (*C.lathe_padding)(a.alloc(len(v), int(unsafe.Sizeof(C.lathe_padding{}))))
	if p != nil {
		copy(unsafe.Slice(p, len(v)), cPaddings(v))
	}
	return p
}

func (a *cAlloc) str(s string) *C.char {
	p := C.CString(s)
	a.ptrs = append(a.ptrs, unsafe.Pointer(p))
	return p
}

func (a *cAlloc) free() {
	for _, p := range a.ptrs {
		C.free(p)
	}
	a.ptrs = nil
}
