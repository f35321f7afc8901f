// Command lathe-dataparallel trains one MLP twice with GoMLX graphs: on one device with
// the whole batch, then data-parallel over N devices of the same backend (an SPMD program: each
// replica takes 1/N of the batch, its gradients are summed over the replicas with AllReduce, and
// every replica applies the same SGD update to its copy of the weights). Both runs start from
// the same weights and see the same batches, so their loss curves must agree up to the rounding
// of sums taken in another order; the program prints both curves and fails if they drift apart.
//
//	go run ./cmd/lathe-dataparallel                            # lathe:cpu with 2 devices
//	go run ./cmd/lathe-dataparallel -backend lathe:cpu -devices 4
//	go run ./cmd/lathe-dataparallel -backend lathe:cuda -devices 2   # two GPUs
//	go run ./cmd/lathe-launch -n 2 go run ./cmd/lathe-dataparallel -devices 1   # a job of 2 processes
//
// In a job of P processes (docs/ARCHITECTURE.md "A job of several processes") every process runs
// the single-device reference on the whole batch, and the data-parallel run has P*N replicas: the
// replica r of process p takes the (p*N+r)-th slice of the batch, and the AllReduce sums over all
// P*N of them -- which is why the loss divides by the global batch size, not by N.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/distributed"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/lathe-dev/lathe/compute/lathe" // registers "lathe"
)

type config struct {
	features, hidden, classes, batch, steps int
	lr                                      float32
}

func main() {
	flag.CommandLine = flag.NewFlagSet("lathe-dataparallel", flag.ExitOnError) // not go run's build-cache path
	backendName := flag.String("backend", "lathe:cpu", `backend configuration; lathe:cpu gets ",devices=N" for the data-parallel run, a GPU backend uses its GPUs`)
	devices := flag.Int("devices", 2, "devices of the data-parallel run (the batch must split evenly)")
	steps := flag.Int("steps", 200, "SGD steps")
	batch := flag.Int("batch", 256, "global batch size")
	tol := flag.Float64("tol", 1e-4, "largest relative difference of the two loss curves accepted")
	flag.Parse()
	c := config{features: 32, hidden: 64, classes: 4, batch: *batch, steps: *steps, lr: 0.5}
	if err := run(*backendName, *devices, c, *tol); err != nil {
		fmt.Fprintf(os.Stderr, "lathe-dataparallel: %v\n", err)
		os.Exit(1)
	}
}

func run(backendName string, n int, c config, tol float64) error {
	if n < 1 || c.batch%n != 0 {
		return fmt.Errorf("a batch of %d does not split over %d devices", c.batch, n)
	}
	one, err := lathe.NewWithConfig(backendName) // errors where compute.NewWithConfig panics
	if err != nil {
		return err
	}
	defer one.Finalize()
	manyName := backendName // a GPU backend brings its GPUs as devices
	if strings.HasPrefix(backendName, "lathe:cpu") {
		manyName = fmt.Sprintf("%s,devices=%d", backendName, n)
	}
	many, err := lathe.NewWithConfig(manyName)
	if err != nil {
		return err
	}
	defer many.Finalize()
	if many.NumDevices() != n {
		return fmt.Errorf("%s has %d devices, want %d", many.Name(), many.NumDevices(), n)
	}
	proc, procs := lathe.JobInfo()
	if c.batch%(n*procs) != 0 {
		return fmt.Errorf("a batch of %d does not split over %d devices in each of %d processes", c.batch, n, procs)
	}
	xs, ys := makeData(c)
	w0 := initWeights(c)
	var single, parallel []float32
	var tSingle, tParallel time.Duration
	err = exceptions.TryCatch[error](func() {
		start := time.Now()
		single = train(one, 1, 1, 0, c, xs, ys, w0)
		tSingle = time.Since(start)
		start = time.Now()
		parallel = train(many, n, procs, proc, c, xs, ys, w0)
		tParallel = time.Since(start)
	})
	if err != nil {
		return err
	}
	if procs > 1 {
		fmt.Printf("process %d of a job of %d: %d devices here, %d replicas in all\n", proc, procs, n, n*procs)
		n *= procs
	}
	fmt.Printf("MLP %d-%d-%d, batch %d, %d SGD steps: 1 device (%s) vs %d devices (%s)\n",
		c.features, c.hidden, c.classes, c.batch, c.steps, one.Description(), n, many.Description())
	fmt.Printf("%6s %12s %12s %10s\n", "step", "1 device", fmt.Sprintf("%d devices", n), "rel. diff")
	worst := 0.0
	for s := range single {
		d := math.Abs(float64(single[s]-parallel[s])) / math.Max(math.Abs(float64(single[s])), 1e-6)
		worst = math.Max(worst, d)
		if s%(max(c.steps/10, 1)) == 0 || s == c.steps-1 {
			fmt.Printf("%6d %12.6f %12.6f %10.2e\n", s, single[s], parallel[s], d)
		}
	}
	fmt.Printf("largest relative difference %.2e over %d steps (accepted: %.0e); times: %s vs %s\n",
		worst, c.steps, tol, tSingle.Round(time.Millisecond), tParallel.Round(time.Millisecond))
	if single[len(single)-1] > 0.5*single[0] {
		return fmt.Errorf("training did not converge: loss %.4f -> %.4f", single[0], single[len(single)-1])
	}
	if worst > tol {
		return fmt.Errorf("the data-parallel loss curve differs from the single-device one by %.2e", worst)
	}
	return nil
}

// makeData draws inputs from N(0,1) and labels them with a random teacher network, so the task is learnable.
func makeData(c config) (xs [][]float32, ys [][]float32) {
	r := rand.New(rand.NewPCG(7, 11))
	teacher := make([]float32, c.features*c.classes)
	for i := range teacher {
		teacher[i] = float32(r.NormFloat64())
	}
	for s := 0; s < c.steps; s++ {
		x := make([]float32, c.batch*c.features)
		y := make([]float32, c.batch*c.classes) // one-hot
		for b := 0; b < c.batch; b++ {
			best, bestV := 0, float32(math.Inf(-1))
			for k := 0; k < c.classes; k++ {
				v := float32(0)
				for f := 0; f < c.features; f++ {
					if k == 0 {
						x[b*c.features+f] = float32(r.NormFloat64())
					}
					v += x[b*c.features+f] * teacher[f*c.classes+k]
				}
				if v > bestV {
					best, bestV = k, v
				}
			}
			y[b*c.classes+best] = 1
		}
		xs, ys = append(xs, x), append(ys, y)
	}
	return
}

type weights struct{ w1, b1, w2, b2 []float32 }

func initWeights(c config) weights {
	r := rand.New(rand.NewPCG(3, 5))
	fill := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	return weights{fill(c.features*c.hidden, 1/math.Sqrt(float64(c.features))), make([]float32, c.hidden),
		fill(c.hidden*c.classes, 1/math.Sqrt(float64(c.hidden))), make([]float32, c.classes)}
}

// stepHook, when set, is called before each step of a data-parallel run (tests make faults with it).
var stepHook func(step int)

// train runs c.steps SGD steps over n replicas in each of procs processes (this one is proc) and
// returns the global mean loss of each step.
// The step graph's parameters are (x, y, w1, b1, w2, b2) per replica; its outputs (loss, w1, b1,
// w2, b2) per replica; a replica's new weights stay on its device and feed its next step.
func train(backend compute.Backend, n, procs, proc int, c config, xs, ys [][]float32, w0 weights) []float32 {
	g := NewGraph(backend, "sgd_step")
	if n*procs > 1 {
		mesh, err := distributed.NewDeviceMesh([]int{n}, []string{"data"})
		if err != nil {
			panic(err)
		}
		if err := g.SetSPMD(mesh); err != nil {
			panic(err)
		}
		if n == 1 { // GoMLX assigns devices by itself only to meshes of several (a job's one device per process)
			if err := g.SetDeviceAssignment([]compute.DeviceNum{0}); err != nil {
				panic(err)
			}
		}
	}
	local := c.batch / (n * procs)
	x := Parameter(g, "x", shapes.Make(dtypes.Float32, local, c.features))
	y := Parameter(g, "y", shapes.Make(dtypes.Float32, local, c.classes))
	w1 := Parameter(g, "w1", shapes.Make(dtypes.Float32, c.features, c.hidden))
	b1 := Parameter(g, "b1", shapes.Make(dtypes.Float32, c.hidden))
	w2 := Parameter(g, "w2", shapes.Make(dtypes.Float32, c.hidden, c.classes))
	b2 := Parameter(g, "b2", shapes.Make(dtypes.Float32, c.classes))
	h := Max(Add(MatMul(x, w1), ExpandAxes(b1, 0)), ScalarZero(g, dtypes.Float32))
	logits := Add(MatMul(h, w2), ExpandAxes(b2, 0))
	// this replica's share of the global mean: its examples' cross-entropy over the global batch size
	loss := DivScalar(Neg(ReduceAllSum(Mul(y, LogSoftmax(logits, -1)))), float64(c.batch))
	params := []*Node{w1, b1, w2, b2}
	grads := Gradient(loss, params...)
	if n*procs > 1 { // the sums over all replicas: the global loss and the global batch's gradients
		reduced := g.Distributed().AllReduce(append([]*Node{loss}, grads...), compute.ReduceOpSum)
		loss, grads = reduced[0], reduced[1:]
	}
	outs := []*Node{loss}
	for i, p := range params {
		outs = append(outs, Sub(p, MulScalar(grads[i], float64(c.lr))))
	}
	if err := g.Compile(outs...); err != nil {
		panic(err)
	}
	defer g.Finalize()

	w := make([][]any, n) // per replica: w1, b1, w2, b2 (host slices first, then device tensors)
	for r := range w {
		w[r] = []any{
			tensors.FromFlatDataAndDimensions(w0.w1, c.features, c.hidden), tensors.FromFlatDataAndDimensions(w0.b1, c.hidden),
			tensors.FromFlatDataAndDimensions(w0.w2, c.hidden, c.classes), tensors.FromFlatDataAndDimensions(w0.b2, c.classes)}
	}
	losses := make([]float32, 0, c.steps)
	for s := 0; s < c.steps; s++ {
		if stepHook != nil && n*procs > 1 {
			stepHook(s)
		}
		var args []any
		for r := 0; r < n; r++ { // global replica q = proc*n+r takes rows [q*local, (q+1)*local) of the batch
			q := proc*n + r
			xr := xs[s][q*local*c.features : (q+1)*local*c.features]
			yr := ys[s][q*local*c.classes : (q+1)*local*c.classes]
			args = append(args, tensors.FromFlatDataAndDimensions(xr, local, c.features),
				tensors.FromFlatDataAndDimensions(yr, local, c.classes))
			args = append(args, w[r]...)
		}
		outputs := g.Run(args...)
		for r := 0; r < n; r++ {
			for i := range w[r] {
				w[r][i].(*tensors.Tensor).MustFinalizeAll()
				w[r][i] = outputs[r*5+1+i]
			}
			if r > 0 { // every replica holds the same global loss
				outputs[r*5].MustFinalizeAll()
			}
		}
		losses = append(losses, tensors.ToScalar[float32](outputs[0]))
		outputs[0].MustFinalizeAll()
	}
	for r := range w {
		for _, t := range w[r] {
			t.(*tensors.Tensor).MustFinalizeAll()
		}
	}
	return losses
}
