package lathe

/*
#include "lathe.h"
*/
import "C"

import (
	"github.com/gomlx/compute"
	"github.com/pkg/errors"
)

// The fused ops (FusedSoftmax, FusedActivation, FusedLayerNorm, FusedDense and the attention ops,
// with the VJPs GoMLX asks for).
// An error wrapping compute.ErrNotImplemented makes GoMLX decompose instead. Optional operands
// (nil in Go) are NULL in C.

// FusedSoftmax is softmax along axis.
func (f *Function) FusedSoftmax(x compute.Value, axis int) (compute.Value, error) {
	return f.op1("FusedSoftmax", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_fused_softmax(f.c, cs[0], C.int(axis), out)
	})
}

// FusedActivation applies cfg's activation (SwiGLU halves the last axis).
func (f *Function) FusedActivation(x compute.Value, cfg compute.ActivationConfig) (compute.Value, error) {
	act, err := activationOf("FusedActivation", cfg.Type)
	if err != nil {
		return nil, err
	}
	return f.op1("FusedActivation", []compute.Value{x}, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		return C.lathe_fused_activation(f.c, cs[0], act, out)
	})
}

// FusedActivationVJP is dOutput times the activation's derivative, from y or, where the
// activation needs it, from x (either may be nil where the other serves).
func (f *Function) FusedActivationVJP(y, x, dOutput compute.Value, cfg compute.ActivationConfig) (compute.Value, error) {
	const op = "FusedActivationVJP"
	act, err := activationOf(op, cfg.Type)
	if err != nil {
		return nil, err
	}
	cs, err := f.optValues(op, y, x, dOutput)
	if err != nil {
		return nil, err
	}
	var out C.lathe_value_t
	if err := toError(C.lathe_fused_activation_vjp(f.c, cs[0], cs[1], cs[2], act, &out)); err != nil {
		return nil, err
	}
	return f.wrap(out), nil
}

// FusedLayerNorm normalises over axes, with optional gamma and beta (nil).
func (f *Function) FusedLayerNorm(x compute.Value, axes []int, epsilon float64, gamma, beta compute.Value) (compute.Value, error) {
	ops := []compute.Value{x}
	hasGamma, hasBeta := gamma != nil, beta != nil
	if hasGamma {
		ops = append(ops, gamma)
	}
	if hasBeta {
		ops = append(ops, beta)
	}
	ca := cInts(axes)
	return f.op1("FusedLayerNorm", ops, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		var g, b C.lathe_value_t
		k := 1
		if hasGamma {
			g, k = cs[k], k+1
		}
		if hasBeta {
			b = cs[k]
		}
		return C.lathe_fused_layer_norm(f.c, cs[0], ptr(ca), C.int(len(ca)), C.double(epsilon), g, b, out)
	})
}

// FusedDense is activation(x @ weight + bias); bias may be nil.
func (f *Function) FusedDense(x, weight, bias compute.Value, options compute.DenseConfig) (compute.Value, error) {
	act, err := activationOf("FusedDense", options.Activation.Type)
	if err != nil {
		return nil, err
	}
	layout, err := enumOf("FusedDense", "weight layout", denseLayouts, options.WeightLayout)
	if err != nil {
		return nil, err
	}
	ops := []compute.Value{x, weight}
	if bias != nil {
		ops = append(ops, bias)
	}
	return f.op1("FusedDense", ops, func(cs []C.lathe_value_t, out *C.lathe_value_t) C.lathe_status_t {
		var b C.lathe_value_t
		if len(cs) == 3 {
			b = cs[2]
		}
		return C.lathe_fused_dense(f.c, cs[0], cs[1], b, act, layout, out)
	})
}

// FusedDenseVJP returns the gradients of FusedDense's x, weight and bias (nil when bias is nil).
func (f *Function) FusedDenseVJP(x, weight, bias, y, dOutput compute.Value, options compute.DenseConfig) (dx, dWeight, dBias compute.Value, err error) {
	const op = "FusedDenseVJP"
	act, err := activationOf(op, options.Activation.Type)
	if err != nil {
		return nil, nil, nil, err
	}
	layout, err := enumOf(op, "weight layout", denseLayouts, options.WeightLayout)
	if err != nil {
		return nil, nil, nil, err
	}
	cs, err := f.optValues(op, x, weight, bias, y, dOutput)
	if err != nil {
		return nil, nil, nil, err
	}
	var out [3]C.lathe_value_t
	if err := toError(C.lathe_fused_dense_vjp(f.c, cs[0], cs[1], cs[2], cs[3], cs[4], act,
		layout, &out[0])); err != nil {
		return nil, nil, nil, err
	}
	dx, dWeight = f.wrap(out[0]), f.wrap(out[1])
	if out[2] != nil {
		dBias = f.wrap(out[2])
	}
	return dx, dWeight, dBias, nil
}

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
	cl, err := enumOf("FusedScaledDotProductAttention", "axes layout", attentionLayouts, layout)
	if err != nil {
		return nil, nil, err
	}
	var out [2]C.lathe_value_t
	if err := toError(C.lathe_fused_scaled_dot_product_attention(f.c, cs[0], cs[1], cs[2], cl, &cfg, &out[0])); err != nil {
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
	cl, err := enumOf(op, "axes layout", attentionLayouts, layout)
	if err != nil {
		return nil, nil, nil, err
	}
	var out [3]C.lathe_value_t
	if err := toError(C.lathe_fused_scaled_dot_product_attention_vjp(f.c, cs[0], cs[1], cs[2], cl, &cfg,
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
