package lathe

/*
#include "lathe.h"
*/
import "C"

import (
	"github.com/gomlx/compute"
	"github.com/pkg/errors"
)

// Quantized ops and fused attention. Optional operands (nil in Go) are NULL in C.

// optValues converts operands that may be nil; nil stays NULL.
func (f *Function) optValues(op string, vs ...compute.Value) ([]C.lathe_value_t, error) {
	out := make([]C.lathe_value_t, len(vs))
	for i, v := range vs {
		if v == nil {
			continue
		}
		if lv, ok := v.(*Value); ok && lv == nil {
			continue
		}
		c, err := f.value(op, v)
		if err != nil {
			return nil, errors.WithMessagef(err, "operand %d", i)
		}
		out[i] = c
	}
	return out, nil
}

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

// attentionConfig converts GoMLX's options (nil: defaults).
func (f *Function) attentionConfig(op string, o *compute.ScaledDotProductAttentionConfig) (C.lathe_attention_config, error) {
	var cfg C.lathe_attention_config
	if o == nil {
		return cfg, nil
	}
	vs, err := f.optValues(op, o.Mask, o.Bias, o.QuerySeqLen, o.KeyValueSeqLen)
	if err != nil {
		return cfg, err
	}
	cfg.scale, cfg.causal, cfg.quantized_matmuls = C.double(o.Scale), C.bool(o.Causal), C.bool(o.QuantizedMatmuls)
	cfg.mask, cfg.bias, cfg.query_seq_len, cfg.key_value_seq_len = vs[0], vs[1], vs[2], vs[3]
	return cfg, nil
}

// FusedScaledDotProductAttention is softmax(scale q.k^T + bias + mask).v per head; the
// per-row logsumexp is the state for the VJP.
func (f *Function) FusedScaledDotProductAttention(query, key, value compute.Value, layout compute.AttentionAxesLayout,
	options *compute.ScaledDotProductAttentionConfig) (compute.Value, []compute.Value, error) {
	cs, err := f.values("FusedScaledDotProductAttention", []compute.Value{query, key, value})
	if err != nil {
		return nil, nil, err
	}
	cfg, err := f.attentionConfig("FusedScaledDotProductAttention", options)
	if err != nil {
		return nil, nil, err
	}
	var out [2]C.lathe_value_t
	if err := toError(C.lathe_fused_scaled_dot_product_attention(f.c, cs[0], cs[1], cs[2], C.lathe_attention_layout(layout), &cfg, &out[0])); err != nil {
		return nil, nil, err
	}
	return f.wrap(out[0]), []compute.Value{f.wrap(out[1])}, nil
}

// FusedScaledDotProductAttentionVJP returns the gradients of query, key and value.
func (f *Function) FusedScaledDotProductAttentionVJP(query, key, value compute.Value, layout compute.AttentionAxesLayout,
	options *compute.ScaledDotProductAttentionConfig, output compute.Value, statesForVJP []compute.Value, dOutput compute.Value) (compute.Value, compute.Value, compute.Value, error) {
	const op = "FusedScaledDotProductAttentionVJP"
	cs, err := f.values(op, []compute.Value{query, key, value, output, dOutput})
	if err != nil {
		return nil, nil, nil, err
	}
	states, err := f.values(op, statesForVJP)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := f.attentionConfig(op, options)
	if err != nil {
		return nil, nil, nil, err
	}
	var out [3]C.lathe_value_t
	if err := toError(C.lathe_fused_scaled_dot_product_attention_vjp(f.c, cs[0], cs[1], cs[2], C.lathe_attention_layout(layout), &cfg,
		cs[3], ptr(states), C.int(len(states)), cs[4], &out[0])); err != nil {
		return nil, nil, nil, err
	}
	return f.wrap(out[0]), f.wrap(out[1]), f.wrap(out[2]), nil
}

// FusedAttentionQKVProjection projects x to query, key and value with optional biases.
func (f *Function) FusedAttentionQKVProjection(x, wQKV, biasQ, biasK, biasV compute.Value, queryDim, keyValueDim int) (compute.Value, compute.Value, compute.Value, error) {
	cs, err := f.optValues("FusedAttentionQKVProjection", x, wQKV, biasQ, biasK, biasV)
	if err != nil {
		return nil, nil, nil, err
	}
	var out [3]C.lathe_value_t
	if err := toError(C.lathe_fused_attention_qkv_projection(f.c, cs[0], cs[1], cs[2], cs[3], cs[4],
		C.int64_t(queryDim), C.int64_t(keyValueDim), &out[0])); err != nil {
		return nil, nil, nil, err
	}
	return f.wrap(out[0]), f.wrap(out[1]), f.wrap(out[2]), nil
}
