package lathe

/*
#include "lathe.h"
*/
import "C"

import (
	"github.com/gomlx/compute"
	"github.com/pkg/errors"
)

// The quantized ops (FusedQuantizedDense, QuantizedEmbeddingLookup). Optional operands (nil in
// Go) are NULL in C.

func cQuant(op string, q *compute.Quantization) (C.lathe_quantization, error) {
	scheme, err := enumOf(op, "quantization scheme", quantSchemes, q.Scheme)
	if err != nil {
		return C.lathe_quantization{}, err
	}
	ggml, err := enumOf(op, "GGML type", ggmlTypes, q.GGMLType)
	if err != nil && q.Scheme == compute.QuantGGML {
		return C.lathe_quantization{}, err
	}
	return C.lathe_quantization{scheme: scheme, ggml_type: ggml, block_axis: C.int(q.BlockAxis), block_size: C.int64_t(q.BlockSize)}, nil
}

// FusedQuantizedDense is activation(x @ dequantize(weights) + bias).
func (f *Function) FusedQuantizedDense(x, weights, bias compute.Value, q *compute.Quantization, activation compute.ActivationType) (compute.Value, error) {
	if q == nil {
		return nil, errors.New("lathe: FusedQuantizedDense: quantization is nil")
	}
	act, err := activationOf("FusedQuantizedDense", activation)
	if err != nil {
		return nil, err
	}
	cq, err := cQuant("FusedQuantizedDense", q)
	if err != nil {
		return nil, err
	}
	cs, err := f.optValues("FusedQuantizedDense", x, weights, bias, q.Scale, q.ZeroPoint)
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	if err := toError(C.lathe_fused_quantized_dense(f.c, cs[0], cs[1], &cq, cs[3], cs[4], cs[2], act, &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// QuantizedEmbeddingLookup gathers and dequantizes embedding rows.
func (f *Function) QuantizedEmbeddingLookup(data, indices compute.Value, q *compute.Quantization) (compute.Value, error) {
	if q == nil {
		return nil, errors.New("lathe: QuantizedEmbeddingLookup: quantization is nil")
	}
	cq, err := cQuant("QuantizedEmbeddingLookup", q)
	if err != nil {
		return nil, err
	}
	return f.op1("QuantizedEmbeddingLookup", []compute.Value{data, indices}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_quantized_embedding_lookup(f.c, cs[0], cs[1], &cq, out)
	})
}
