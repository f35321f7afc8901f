package lathe

/*
#include "lathe.h"
*/
import "C"

import (
	"github.com/gomlx/compute"
	"github.com/pkg/errors"
)

// compute's enums reach the engine through these tables, keyed by compute's own constants and
// never converted by number: compute renumbers them between releases (ActivationType in v0.1.9),
// and lathe.h keeps numbers of its own. A value a table lacks (a newer compute's) is
// UNIMPLEMENTED naming it, so GoMLX falls back instead of lathe running something else.
// TestEnumTables fails when compute lists a value a table does not.

var activations = map[compute.ActivationType]C.lathe_activation{
	compute.ActivationNone:            C.LATHE_ACTIVATION_NONE,
	compute.ActivationRelu:            C.LATHE_ACTIVATION_RELU,
	compute.ActivationSigmoid:         C.LATHE_ACTIVATION_SIGMOID,
	compute.ActivationHardSigmoid:     C.LATHE_ACTIVATION_HARD_SIGMOID,
	compute.ActivationLeakyRelu:       C.LATHE_ACTIVATION_LEAKY_RELU,
	compute.ActivationSelu:            C.LATHE_ACTIVATION_SELU,
	compute.ActivationSilu:            C.LATHE_ACTIVATION_SILU,
	compute.ActivationHardSwish:       C.LATHE_ACTIVATION_HARD_SWISH,
	compute.ActivationTanh:            C.LATHE_ACTIVATION_TANH,
	compute.ActivationGelu:            C.LATHE_ACTIVATION_GELU,
	compute.ActivationGeluApproximate: C.LATHE_ACTIVATION_GELU_APPROXIMATE,
	compute.ActivationSwiGLU:          C.LATHE_ACTIVATION_SWIGLU,
}

var denseLayouts = map[compute.DenseLayout]C.lathe_dense_layout{
	compute.DenseLayoutInputOutputs: C.LATHE_DENSE_INPUT_OUTPUTS,
	compute.DenseLayoutOutputsInput: C.LATHE_DENSE_OUTPUTS_INPUT,
}

var attentionLayouts = map[compute.AttentionAxesLayout]C.lathe_attention_layout{
	compute.AttentionAxesLayoutBHSD: C.LATHE_ATTENTION_LAYOUT_BHSD,
	compute.AttentionAxesLayoutBSHD: C.LATHE_ATTENTION_LAYOUT_BSHD,
}

var fftTypes = map[compute.FFTType]C.lathe_fft_type{
	compute.FFTForward:     C.LATHE_FFT_TYPE_FORWARD,
	compute.FFTInverse:     C.LATHE_FFT_TYPE_INVERSE,
	compute.FFTForwardReal: C.LATHE_FFT_TYPE_FORWARD_REAL,
	compute.FFTInverseReal: C.LATHE_FFT_TYPE_INVERSE_REAL,
}

var quantSchemes = map[compute.QuantizationScheme]C.lathe_quant_scheme{
	compute.QuantLinear: C.LATHE_QUANT_LINEAR,
	compute.QuantNF4:    C.LATHE_QUANT_NF4,
	compute.QuantGGML:   C.LATHE_QUANT_GGML,
}

var ggmlTypes = map[compute.GGMLQuantType]C.lathe_ggml_type{
	compute.GGMLQ4_0:  C.LATHE_GGML_Q4_0,
	compute.GGMLQ8_0:  C.LATHE_GGML_Q8_0,
	compute.GGMLIQ4NL: C.LATHE_GGML_IQ4_NL,
	compute.GGMLQ2_K:  C.LATHE_GGML_Q2_K,
	compute.GGMLQ3_K:  C.LATHE_GGML_Q3_K,
	compute.GGMLQ4_K:  C.LATHE_GGML_Q4_K,
	compute.GGMLQ5_K:  C.LATHE_GGML_Q5_K,
	compute.GGMLQ6_K:  C.LATHE_GGML_Q6_K,
}

// enumOf looks v up in table for op; what names the kind of value in the error.
func enumOf[K comparable, V any](op, what string, table map[K]V, v K) (V, error) {
	if c, ok := table[v]; ok {
		return c, nil
	}
	var zero V
	return zero, errors.Wrapf(compute.ErrNotImplemented, "lathe: %s: %s %v is not known to lathe", op, what, v)
}

func activationOf(op string, a compute.ActivationType) (C.lathe_activation, error) {
	return enumOf(op, "activation", activations, a)
}
