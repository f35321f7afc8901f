package steps

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/layers"
	"github.com/gomlx/gomlx/ml/layers/activation"
	"github.com/gomlx/gomlx/ml/layers/attention"
	"github.com/gomlx/gomlx/ml/layers/norm"
	"github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train/loss"
	"github.com/gomlx/gomlx/ml/train/optimizer"
)

// LMConfig is a GPT-2-like causal language model: token embedding plus a learned positional
// embedding; Layers pre-norm blocks (x + attention(LN x), causal, Heads heads of D/Heads; then
// x + Dense 4D -> exact GELU -> Dense D of LN x); a final LayerNorm; logits by a Dense to Vocab
// (untied from the token embedding); sparse softmax cross-entropy on the next token. Trained with
// AdamW (GoMLX's optimizer.Adam with weight decay: learning rate 3e-4, betas 0.9 and 0.999,
// epsilon 1e-8, weight decay 0.1 on every variable). Variables get GoMLX's default initializer
// (He normal, zero biases; LayerNorm gain 1, offset 0), LayerNorm epsilon 1e-5.
//
// BF16: GoMLX v0.28.16 has no store-wide dtype for its layers (only the zoo transformer's
// "transformer_dtype"); each layer makes its variables in its input's dtype, so giving the
// token Embedding BFloat16 makes the whole model BFloat16, as a user would. LayerNorm then
// normalises in Float32 (its default for BFloat16), the logits go to Float32 for the loss, and
// Adam, which computes in the loss's dtype, keeps Float32 moments.
type LMConfig struct {
	Label                               string // "LM tiny", "LM small", "GPT-2 small"
	Layers, D, Heads, Seq, Batch, Vocab int
	Explicit                            bool // attention as explicit products instead of MultiHeadAttention
	BF16                                bool // parameters and activations in BFloat16
}

// LMTiny is a test size for CPUs: 2 layers, d64, 4 heads, sequence 32, batch 2, vocabulary 128.
func LMTiny() LMConfig {
	return LMConfig{Label: "LM tiny", Layers: 2, D: 64, Heads: 4, Seq: 32, Batch: 2, Vocab: 128}
}

// LMSmall is 4 layers, d512, 8 heads, sequence 512, batch 8, vocabulary 8192 (21 M parameters).
func LMSmall() LMConfig {
	return LMConfig{Label: "LM small", Layers: 4, D: 512, Heads: 8, Seq: 512, Batch: 8, Vocab: 8192}
}

// GPT2Small is GPT-2 small's shape: 12 layers, d768, 12 heads, sequence 1024, batch 8,
// vocabulary 50257 (85 M parameters in the blocks, 124 M with the embeddings, 163 M with the
// untied logits projection).
func GPT2Small() LMConfig {
	return LMConfig{Label: "GPT-2 small", Layers: 12, D: 768, Heads: 12, Seq: 1024, Batch: 8, Vocab: 50257}
}

// WithAttention returns c with attention written as explicit products (true) or by GoMLX's
// MultiHeadAttention (false).
func (c LMConfig) WithAttention(explicit bool) LMConfig { c.Explicit = explicit; return c }

// WithBF16 returns c with BFloat16 parameters and activations.
func (c LMConfig) WithBF16(bf16 bool) LMConfig { c.BF16 = bf16; return c }

// NonEmbeddingParams counts every parameter but the token and positional embedding tables:
// per block 12·D² + 13·D (Q, K, V, output projections with biases, the two MLP Dense layers
// with biases, two LayerNorms), the final LayerNorm (2·D) and the logits Dense (D·Vocab +
// Vocab, untied, so it counts: its products are real work).
func (c LMConfig) NonEmbeddingParams() int {
	d := c.D
	return c.Layers*(12*d*d+13*d) + 2*d + d*c.Vocab + c.Vocab
}

// FLOPs is the model FLOPs of one training step, after Kaplan et al. and PaLM's appendix:
// 6·N·T + 12·L·S·D·T, where N is NonEmbeddingParams, T = Batch·Seq tokens, L layers, S the
// sequence, D the width: 6·N per token for the products with the weights (forward 2, backward
// 4), and 12·L·S·D per token for the attention's two products, counted over the full S×S square
// (as PaLM does; a causal kernel that skips the masked half does half of it).
func (c LMConfig) FLOPs() float64 {
	t := float64(c.Batch * c.Seq)
	return 6*float64(c.NonEmbeddingParams())*t + 12*float64(c.Layers*c.Seq*c.D)*t
}

func (c LMConfig) form() string {
	if c.Explicit {
		return "explicit"
	}
	return "mha"
}

func (c LMConfig) dtypeName() string {
	if c.BF16 {
		return "bf16"
	}
	return "f32"
}

// LM is the workload of c: x is [Batch, Seq] Int32 tokens, y [Batch, Seq, 1] the next
// tokens (random sequences of Seq+1 tokens, shifted by one).
func LM(c LMConfig) Workload {
	attn := "MHA"
	if c.Explicit {
		attn = "explicit attn"
	}
	dt := dtypes.Float32
	if c.BF16 {
		dt = dtypes.BFloat16
	}
	attn += " " + c.dtypeName()
	return Workload{
		Name: fmt.Sprintf("%s L%d d%d h%d s%d b%d v%d %s", c.Label, c.Layers, c.D, c.Heads, c.Seq, c.Batch, c.Vocab, attn),
		JaxSpec: fmt.Sprintf("lm %d %d %d %d %d %d %s %s", c.Layers, c.D, c.Heads, c.Seq, c.Batch, c.Vocab,
			c.form(), c.dtypeName()),
		Batch:  c.Batch,
		Tokens: c.Batch * c.Seq,
		FLOPs:  c.FLOPs(),
		BF16:   c.BF16,
		Inputs: func(rng *rand.Rand) (*tensors.Tensor, *tensors.Tensor) {
			x := make([]int32, c.Batch*c.Seq)
			y := make([]int32, c.Batch*c.Seq)
			for b := range c.Batch {
				seq := randLabels(rng, c.Seq+1, c.Vocab)
				copy(x[b*c.Seq:], seq[:c.Seq])
				copy(y[b*c.Seq:], seq[1:])
			}
			return tensors.FromFlatDataAndDimensions(x, c.Batch, c.Seq),
				tensors.FromFlatDataAndDimensions(y, c.Batch, c.Seq, 1)
		},
		Loss: func(scope *model.Scope, x, y *Node) *Node {
			g := x.Graph()
			h := layers.Embedding(scope.In("token"), x, dt, c.Vocab, c.D)
			pos := scope.In("position").VariableWithShape("embeddings", shapes.Make(dt, c.Seq, c.D)).NodeValue(g)
			h = Add(h, ExpandAxes(pos, 0))
			for l := range c.Layers {
				block := scope.In("block_%d", l)
				n := norm.LayerNorm(block.In("ln_attention"), h, -1).Epsilon(1e-5).Done()
				var a *Node
				if c.Explicit {
					a = explicitAttention(block.In("attention"), n, c.Heads)
				} else {
					a = attention.SelfAttention(block.In("attention"), n, c.Heads, c.D/c.Heads).WithCausalMask(true).Done()
				}
				h = Add(h, a)
				n = norm.LayerNorm(block.In("ln_mlp"), h, -1).Epsilon(1e-5).Done()
				f := activation.Gelu(layers.Dense(block.In("mlp_in"), n, true, 4*c.D))
				h = Add(h, layers.Dense(block.In("mlp_out"), f, true, c.D))
			}
			h = norm.LayerNorm(scope.In("ln_final"), h, -1).Epsilon(1e-5).Done()
			logits := layers.Dense(scope.In("logits"), h, true, c.Vocab)
			if logits.DType() != dtypes.Float32 {
				logits = ConvertDType(logits, dtypes.Float32) // the softmax and the loss in Float32
			}
			return loss.SparseCategoricalCrossEntropyLogits([]*Node{y}, []*Node{logits})
		},
		Optimizer: func() optimizer.Interface {
			return optimizer.Adam().LearningRate(3e-4).Betas(0.9, 0.999).Epsilon(1e-8).WeightDecay(0.1).Done()
		},
	}
}

// explicitAttention is causal multi-head self-attention written as a user would without
// MultiHeadAttention: Q, K, V projections (Dense with bias to [heads, D/heads]), the scores
// Q·Kᵀ by Einsum, scaled by 1/√(D/heads), a masked softmax over the lower triangle, the
// coefficients ·V by Einsum, and the output projection.
func explicitAttention(scope *model.Scope, x *Node, heads int) *Node {
	g := x.Graph()
	b, s, d := x.Shape().Dim(0), x.Shape().Dim(1), x.Shape().Dim(2)
	hd := d / heads
	q := layers.Dense(scope.In("query"), x, true, heads, hd) // [b, s, heads, hd]
	k := layers.Dense(scope.In("key"), x, true, heads, hd)
	v := layers.Dense(scope.In("value"), x, true, heads, hd)
	scores := MulScalar(Einsum("bqhd,bkhd->bhqk", q, k), 1/math.Sqrt(float64(hd)))
	mask := Reshape(LowerTriangular(g, s), 1, 1, s, s)
	coef := MaskedSoftmax(scores, mask, -1)
	out := Reshape(Einsum("bhqk,bkhd->bqhd", coef, v), b, s, d)
	return layers.Dense(scope.In("output"), out, true, d)
}
