// Package mlp builds a small multi-layer perceptron classifier with the GoMLX compute API
// directly: one compiled graph per training step (forward, hand-written backward, SGD
// update), parameters donated from step to step. The lathe demo and benchmark share it.
package mlp

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// Config sizes the network: Inputs -> Hidden -> Hidden -> Classes, ReLU between layers.
type Config struct {
	Inputs, Hidden, Classes int
	Batch                   int     // examples per training step
	LearningRate            float32 // plain SGD
}

// Model holds the parameters (w1, b1, w2, b2, w3, b3) as backend buffers and the compiled
// training step.
type Model struct {
	Config
	Backend compute.Backend
	Params  []compute.Buffer
	step    compute.Executable
	predict map[int]compute.Executable
}

func (c Config) paramShapes() []shapes.Shape {
	f := dtypes.Float32
	return []shapes.Shape{
		shapes.Make(f, c.Inputs, c.Hidden), shapes.Make(f, c.Hidden),
		shapes.Make(f, c.Hidden, c.Hidden), shapes.Make(f, c.Hidden),
		shapes.Make(f, c.Hidden, c.Classes), shapes.Make(f, c.Classes),
	}
}

// New initialises the parameters (He-normal weights, zero biases; seeded) and compiles the
// training step.
func New(backend compute.Backend, cfg Config, seed uint64) (*Model, error) {
	m := &Model{Config: cfg, Backend: backend, predict: map[int]compute.Executable{}}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for i, s := range cfg.paramShapes() {
		flat := make([]float32, s.Size())
		if i%2 == 0 { // weights
			std := math.Sqrt(2 / float64(s.Dimensions[0]))
			for k := range flat {
				flat[k] = float32(rng.NormFloat64() * std)
			}
		}
		buf, err := backend.BufferFromFlatData(0, flat, s)
		if err != nil {
			return nil, err
		}
		m.Params = append(m.Params, buf)
	}
	var err error
	m.step, err = BuildStep(backend, cfg)
	return m, err
}

// graph wraps a Function to build with less error plumbing: the first error sticks and
// later calls return nil values.
type graph struct {
	f   compute.Function
	err error
}

func (g *graph) do(v compute.Value, err error) compute.Value {
	if g.err == nil && err != nil {
		g.err = err
	}
	return v
}

func (g *graph) shape(v compute.Value) shapes.Shape {
	if g.err != nil {
		return shapes.Invalid()
	}
	s, err := g.f.Shape(v)
	g.do(nil, err)
	return s
}

func (g *graph) scalar(v float32) compute.Value {
	if g.err != nil {
		return nil
	}
	c := g.do(g.f.Constant([]float32{v}))
	return g.do(g.f.Reshape(c))
}

// matmul contracts lhs axis la with rhs axis ra.
func (g *graph) matmul(lhs compute.Value, la int, rhs compute.Value, ra int) compute.Value {
	if g.err != nil {
		return nil
	}
	return g.do(g.f.DotGeneral(lhs, []int{la}, nil, rhs, []int{ra}, nil, compute.DotGeneralConfig{}))
}

// bcast broadcasts x to shape, x's axes going to axes.
func (g *graph) bcast(x compute.Value, shape shapes.Shape, axes ...int) compute.Value {
	if g.err != nil {
		return nil
	}
	return g.do(g.f.BroadcastInDim(x, shape, axes))
}

func (g *graph) op2(fn func(a, b compute.Value) (compute.Value, error), a, b compute.Value) compute.Value {
	if g.err != nil {
		return nil
	}
	return g.do(fn(a, b))
}

func (g *graph) op1(fn func(a compute.Value) (compute.Value, error), a compute.Value) compute.Value {
	if g.err != nil {
		return nil
	}
	return g.do(fn(a))
}

func (g *graph) sum(x compute.Value, axes ...int) compute.Value {
	if g.err != nil {
		return nil
	}
	return g.do(g.f.ReduceSum(x, axes...))
}

// dense is x @ w + b.
func (g *graph) dense(x, w, b compute.Value) compute.Value {
	y := g.matmul(x, 1, w, 0)
	return g.op2(g.f.Add, y, g.bcast(b, g.shape(y), 1))
}

// forward returns the pre-activations z1, z2, activations h1, h2 and the logits.
func (g *graph) forward(p []compute.Value, x compute.Value) (z1, h1, z2, h2, logits compute.Value) {
	zero := g.scalar(0)
	z1 = g.dense(x, p[0], p[1])
	h1 = g.op2(g.f.Max, z1, zero)
	z2 = g.dense(h1, p[2], p[3])
	h2 = g.op2(g.f.Max, z2, zero)
	logits = g.dense(h2, p[4], p[5])
	return
}

// BuildStep compiles one SGD step of softmax cross-entropy. Inputs: w1, b1, w2, b2, w3, b3,
// x Float32[batch, inputs], labels Int32[batch]. Outputs: the six updated parameters and
// the mean loss (Float32 scalar).
func BuildStep(backend compute.Backend, cfg Config) (compute.Executable, error) {
	bld := backend.Builder("mlp_step")
	g := &graph{f: bld.Main()}
	f := g.f
	var p []compute.Value
	for i, s := range cfg.paramShapes() {
		p = append(p, g.do(f.Parameter(fmt.Sprintf("param%d", i), s, nil)))
	}
	x := g.do(f.Parameter("x", shapes.Make(dtypes.Float32, cfg.Batch, cfg.Inputs), nil))
	labels := g.do(f.Parameter("labels", shapes.Make(dtypes.Int32, cfg.Batch), nil))

	z1, h1, z2, h2, logits := g.forward(p, x)
	bc := shapes.Make(dtypes.Float32, cfg.Batch, cfg.Classes)

	// One-hot labels: labels[b] == iota over classes.
	classes := g.do(f.Iota(shapes.Make(dtypes.Int32, cfg.Batch, cfg.Classes), 1))
	onehot := g.op2(f.Equal, g.bcast(labels, shapes.Make(dtypes.Int32, cfg.Batch, cfg.Classes), 0), classes)
	onehot = g.do(f.ConvertDType(onehot, dtypes.Float32))

	// Stable log-softmax and the mean cross-entropy.
	mx := g.bcast(g.do(f.ReduceMax(logits, 1)), bc, 0)
	shifted := g.op2(f.Sub, logits, mx)
	e := g.op1(f.Exp, shifted)
	se := g.bcast(g.sum(e, 1), bc, 0)
	logp := g.op2(f.Sub, shifted, g.op1(f.Log, se))
	invB := g.scalar(1 / float32(cfg.Batch))
	loss := g.op2(f.Mul, g.op1(f.Neg, g.sum(g.op2(f.Mul, onehot, logp), 0, 1)), invB)

	// Backward: d loss / d logits = (softmax - onehot) / batch.
	probs := g.op2(f.Div, e, se)
	dlogits := g.op2(f.Mul, g.op2(f.Sub, probs, onehot), invB)
	zero := g.scalar(0)
	dw3 := g.matmul(h2, 0, dlogits, 0)
	db3 := g.sum(dlogits, 0)
	dh2 := g.matmul(dlogits, 1, p[4], 1)
	dz2 := g.do(f.Where(g.op2(f.GreaterThan, z2, zero), dh2, zero))
	dw2 := g.matmul(h1, 0, dz2, 0)
	db2 := g.sum(dz2, 0)
	dh1 := g.matmul(dz2, 1, p[2], 1)
	dz1 := g.do(f.Where(g.op2(f.GreaterThan, z1, zero), dh1, zero))
	dw1 := g.matmul(x, 0, dz1, 0)
	db1 := g.sum(dz1, 0)

	lr := g.scalar(cfg.LearningRate)
	var outs []compute.Value
	for i, d := range []compute.Value{dw1, db1, dw2, db2, dw3, db3} {
		outs = append(outs, g.op2(f.Sub, p[i], g.op2(f.Mul, d, lr)))
	}
	outs = append(outs, loss)
	if g.err != nil {
		return nil, g.err
	}
	if err := f.Return(outs, nil); err != nil {
		return nil, err
	}
	return bld.Compile()
}

// buildPredict compiles params + x Float32[n, inputs] -> predicted class Int32[n].
func buildPredict(backend compute.Backend, cfg Config, n int) (compute.Executable, error) {
	bld := backend.Builder("mlp_predict")
	g := &graph{f: bld.Main()}
	var p []compute.Value
	for i, s := range cfg.paramShapes() {
		p = append(p, g.do(g.f.Parameter(fmt.Sprintf("param%d", i), s, nil)))
	}
	x := g.do(g.f.Parameter("x", shapes.Make(dtypes.Float32, n, cfg.Inputs), nil))
	_, _, _, _, logits := g.forward(p, x)
	pred := g.do(g.f.ArgMinMax(logits, 1, dtypes.Int32, false))
	if g.err != nil {
		return nil, g.err
	}
	if err := g.f.Return([]compute.Value{pred}, nil); err != nil {
		return nil, err
	}
	return bld.Compile()
}

// Step runs one training step on a batch (x row-major [Batch, Inputs]); it returns the loss.
// The parameters are donated to the step and replaced by its outputs.
func (m *Model) Step(x []float32, labels []int32) (float32, error) {
	xb, err := m.Backend.BufferFromFlatData(0, x, shapes.Make(dtypes.Float32, m.Batch, m.Inputs))
	if err != nil {
		return 0, err
	}
	yb, err := m.Backend.BufferFromFlatData(0, labels, shapes.Make(dtypes.Int32, m.Batch))
	if err != nil {
		return 0, err
	}
	inputs := append(append([]compute.Buffer{}, m.Params...), xb, yb)
	donate := make([]bool, len(inputs))
	for i := range m.Params {
		donate[i] = true
	}
	outs, err := m.step.Execute(inputs, donate, 0)
	for _, b := range inputs {
		_ = b.Finalize() // donated handles (and x, y) are released either way
	}
	if err != nil {
		return 0, err
	}
	m.Params = outs[:len(m.Params)]
	loss := make([]float32, 1)
	err = outs[len(m.Params)].ToFlatData(loss)
	_ = outs[len(m.Params)].Finalize()
	return loss[0], err
}

// Predict returns the predicted class of each row of x.
func (m *Model) Predict(x []float32) ([]int32, error) {
	n := len(x) / m.Inputs
	e := m.predict[n]
	if e == nil {
		var err error
		if e, err = buildPredict(m.Backend, m.Config, n); err != nil {
			return nil, err
		}
		m.predict[n] = e
	}
	xb, err := m.Backend.BufferFromFlatData(0, x, shapes.Make(dtypes.Float32, n, m.Inputs))
	if err != nil {
		return nil, err
	}
	defer func() { _ = xb.Finalize() }()
	outs, err := e.Execute(append(append([]compute.Buffer{}, m.Params...), xb), nil, 0)
	if err != nil {
		return nil, err
	}
	pred := make([]int32, n)
	err = outs[0].ToFlatData(pred)
	_ = outs[0].Finalize()
	return pred, err
}

// Finalize releases the parameters and executables.
func (m *Model) Finalize() {
	for _, b := range m.Params {
		_ = b.Finalize()
	}
	if m.step != nil {
		m.step.Finalize()
	}
	for _, e := range m.predict {
		e.Finalize()
	}
}

// Blobs returns n points (row-major [n, 2]) around `classes` centres on a circle of radius 3,
// with unit-ish spread, and their labels.
func Blobs(n, classes int, seed uint64) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(seed, 1))
	x, y := make([]float32, 2*n), make([]int32, n)
	for i := range n {
		c := rng.IntN(classes)
		a := 2 * math.Pi * float64(c) / float64(classes)
		x[2*i] = float32(3*math.Cos(a) + 1.1*rng.NormFloat64())
		x[2*i+1] = float32(3*math.Sin(a) + 1.1*rng.NormFloat64())
		y[i] = int32(c)
	}
	return x, y
}

// Spiral returns n points on `classes` interleaved noisy spiral arms and their labels.
func Spiral(n, classes int, seed uint64) ([]float32, []int32) {
	rng := rand.New(rand.NewPCG(seed, 2))
	x, y := make([]float32, 2*n), make([]int32, n)
	for i := range n {
		c := rng.IntN(classes)
		r := rng.Float64()
		t := 4*r + 2*math.Pi*float64(c)/float64(classes) + 0.2*rng.NormFloat64()
		x[2*i] = float32(r * math.Cos(t) * 2)
		x[2*i+1] = float32(r * math.Sin(t) * 2)
		y[i] = int32(c)
	}
	return x, y
}
