// Package steps holds the GoMLX training workloads that lathe's benchmarks time (MLP, CNN,
// transformer block, causal language model): each is a loss built with GoMLX's layers on a
// model.Scope, the random inputs it is fed and its optimizer, so that every benchmark times the
// same graphs.
package steps

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

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

// Workload is one training step's model: its name for tables, the JAX script's spec for the
// same step ("mlp 256", "cnn 32", "transformer 128 1": sequence, then batch; "lm ..." for
// LM), its inputs, its loss and its optimizer.
type Workload struct {
	Name, JaxSpec string
	Batch         int // examples per step
	Inputs        func(rng *rand.Rand) (x, y *tensors.Tensor)
	Loss          func(scope *model.Scope, x, y *Node) *Node
	// Optimizer makes the step's optimizer; nil: SGD with learning rate 0.001 (NewOptimizer).
	Optimizer func() optimizer.Interface
	// Tokens per step and model FLOPs per step (LMConfig.FLOPs); 0 for the workloads that are
	// not language models.
	Tokens int
	FLOPs  float64
	// BF16 is set when the model's parameters and activations are BFloat16 (its peak
	// device rate is then the BFloat16 one).
	BF16 bool
}

// NewOptimizer returns a new instance of the workload's optimizer (SGD with learning rate
// 0.001 when it names none).
func (w Workload) NewOptimizer() optimizer.Interface {
	if w.Optimizer != nil {
		return w.Optimizer()
	}
	return optimizer.StochasticGradientDescent().WithLearningRate(0.001).Done()
}

func randFloats(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func randLabels(rng *rand.Rand, n, classes int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(rng.IntN(classes))
	}
	return v
}

// MLP is 784-1024-1024-10 with ReLU and softmax cross-entropy.
func MLP(batch int) Workload {
	return Workload{
		Name: fmt.Sprintf("MLP 784-1024-1024-10 b%d", batch), JaxSpec: fmt.Sprintf("mlp %d", batch), Batch: batch,
		Inputs: func(rng *rand.Rand) (*tensors.Tensor, *tensors.Tensor) {
			return tensors.FromFlatDataAndDimensions(randFloats(rng, batch*784), batch, 784),
				tensors.FromFlatDataAndDimensions(randLabels(rng, batch, 10), batch, 1)
		},
		Loss: func(scope *model.Scope, x, y *Node) *Node {
			h := activation.Relu(layers.Dense(scope.In("d0"), x, true, 1024))
			h = activation.Relu(layers.Dense(scope.In("d1"), h, true, 1024))
			logits := layers.Dense(scope.In("d2"), h, true, 10)
			return loss.SparseCategoricalCrossEntropyLogits([]*Node{y}, []*Node{logits})
		},
	}
}

// CNN is conv 3x3 3->32, ReLU, 2x2 max-pool, conv 3x3 32->64, ReLU, spatial mean, dense 64->10
// on 28x28x3 images.
func CNN(batch int) Workload {
	w := CNNOf(batch, 28)
	w.JaxSpec = fmt.Sprintf("cnn %d", batch)
	return w
}

// CNNOf is CNN on size x size x 3 images; its convolutions are GoMLX's default, unpadded ("valid").
func CNNOf(batch, size int) Workload {
	return Workload{
		Name: fmt.Sprintf("CNN %dx%dx3 b%d", size, size, batch), Batch: batch,
		Inputs: func(rng *rand.Rand) (*tensors.Tensor, *tensors.Tensor) {
			return tensors.FromFlatDataAndDimensions(randFloats(rng, batch*size*size*3), batch, size, size, 3),
				tensors.FromFlatDataAndDimensions(randLabels(rng, batch, 10), batch, 1)
		},
		Loss: func(scope *model.Scope, x, y *Node) *Node {
			h := layers.Convolution(scope.In("c0"), x).Channels(32).KernelSize(3).Done()
			h = MaxPool(activation.Relu(h)).Window(2).Done()
			h = activation.Relu(layers.Convolution(scope.In("c1"), h).Channels(64).KernelSize(3).Done())
			h = ReduceMean(h, 1, 2)
			logits := layers.Dense(scope.In("d"), h, true, 10)
			return loss.SparseCategoricalCrossEntropyLogits([]*Node{y}, []*Node{logits})
		},
	}
}

// CNNSame is conv 3x3 3->32, ReLU, conv 3x3 32->32, ReLU, 2x2 max-pool, conv 3x3 32->64, ReLU,
// spatial mean, dense 64->10 on size x size x 3 images, every convolution with "same" padding:
// large images whose height can be split over devices (sharding-bench's spatial layout).
func CNNSame(batch, size int) Workload {
	return Workload{
		Name: fmt.Sprintf("CNN same %dx%dx3 b%d", size, size, batch), Batch: batch,
		Inputs: func(rng *rand.Rand) (*tensors.Tensor, *tensors.Tensor) {
			return tensors.FromFlatDataAndDimensions(randFloats(rng, batch*size*size*3), batch, size, size, 3),
				tensors.FromFlatDataAndDimensions(randLabels(rng, batch, 10), batch, 1)
		},
		Loss: func(scope *model.Scope, x, y *Node) *Node {
			conv := func(name string, h *Node, channels int) *Node {
				return activation.Relu(layers.Convolution(scope.In("%s", name), h).Channels(channels).KernelSize(3).PadSame().Done())
			}
			h := conv("c0", x, 32)
			h = MaxPool(conv("c1", h, 32)).Window(2).Done()
			h = ReduceMean(conv("c2", h, 64), 1, 2)
			logits := layers.Dense(scope.In("d"), h, true, 10)
			return loss.SparseCategoricalCrossEntropyLogits([]*Node{y}, []*Node{logits})
		},
	}
}

// Transformer is a pre-norm block, d768 with 12 heads (x + MHA(LN x), then + FFN 3072 with
// exact GELU), with mean squared error against a random target.
func Transformer(batch, seq int) Workload {
	const d, heads, ffn = 768, 12, 3072
	return Workload{
		Name: fmt.Sprintf("Transformer d768 h12 b%d s%d", batch, seq), JaxSpec: fmt.Sprintf("transformer %d %d", seq, batch), Batch: batch,
		Inputs: func(rng *rand.Rand) (*tensors.Tensor, *tensors.Tensor) {
			return tensors.FromFlatDataAndDimensions(randFloats(rng, batch*seq*d), batch, seq, d),
				tensors.FromFlatDataAndDimensions(randFloats(rng, batch*seq*d), batch, seq, d)
		},
		Loss: func(scope *model.Scope, x, y *Node) *Node {
			n := norm.LayerNorm(scope.In("ln0"), x, -1).Done()
			h := Add(x, attention.MultiHeadAttention(scope.In("mha"), n, n, n, heads, d/heads).Done())
			n = norm.LayerNorm(scope.In("ln1"), h, -1).Done()
			f := activation.Gelu(layers.Dense(scope.In("ff0"), n, true, ffn))
			out := Add(h, layers.Dense(scope.In("ff1"), f, true, d))
			return ReduceAllMean(Square(Sub(out, y)))
		},
	}
}

// Run executes one training step of e and reads its loss (output 0, a Float32 scalar) back to
// the host, so that the time covers the work; it frees the outputs and returns the time taken.
func Run(e *model.Exec, args ...any) (time.Duration, error) {
	d, _, err := RunLoss(e, args...)
	return d, err
}

// RunLoss is Run that also returns the loss.
func RunLoss(e *model.Exec, args ...any) (time.Duration, float32, error) {
	start := time.Now()
	out, err := e.Exec(args...)
	if err != nil {
		return 0, 0, err
	}
	l, ok := out[0].Value().(float32)
	if !ok {
		return 0, 0, fmt.Errorf("loss of type %T", out[0].Value())
	}
	d := time.Since(start)
	for _, t := range out {
		_ = t.FinalizeAll()
	}
	return d, l, nil
}

// Median of v (0 for none; the mean of the middle two for an even count); v is not reordered.
func Median(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
