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

func cQuant(q *compute.Quantization) C.lathe_quantization {
	return C.lathe_quantization{scheme: C.lathe_quant_scheme(q.Scheme), ggml_type: C.lathe_ggml_type(q.GGMLType),
		block_axis: C.int(q.BlockAxis), block_size: C.int64_t(q.BlockSize)}
}

// FusedQuantizedDense is activation(x @ dequantize(weights) + bias).
func (f *Function) FusedQuantizedDense(x, weights, bias compute.Value, q *compute.Quantization, activation compute.ActivationType) (compute.Value, error) {
	if q == nil {
		return nil, errors.New("lathe: FusedQuantizedDense: quantization is nil")
	}
	cs, err := f.optValues("FusedQuantizedDense", x, weights, bias, q.Scale, q.ZeroPoint)
	if err != nil {
		return nil, err
	}
	cq := cQuant(q)
	var out C.lathe_value_t
	if err := toError(C.lathe_fused_quantized_dense(f.c, cs[0], cs[1], &cq, cs[3], cs[4], cs[2], C.lathe_activation(activation), &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// QuantizedEmbeddingLookup gathers and dequantizes embedding rows.
func (f *Function) QuantizedEmbeddingLookup(data, indices compute.Value, q *compute.Quantization) (compute.Value, error) {
	if q == nil {
		return nil, errors.New("lathe: QuantizedEmbeddingLookup: quantization is nil")
	}
	cq := cQuant(q)
	return f.op1("QuantizedEmbeddingLookup", []compute.Value{data, indices}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_quantized_embedding_lookup(f.c, cs[0], cs[1], &cq, out)
	})
}
