// Command lathe-demo trains a small MLP classifier (2 -> 64 -> 64 -> 3, ReLU, softmax
// cross-entropy) on synthetic 2-D data through the GoMLX compute API. Each training step is
// one compiled graph (forward, hand-written backward, SGD update) whose parameters are
// donated from step to step.
//
//	go run ./cmd/lathe-demo                    # lathe (best device)
//	go run ./cmd/lathe-demo -backend go        # GoMLX's pure-Go backend, for comparison
//	go run ./cmd/lathe-demo -backend lathe:cpu,threads=2 -data spiral -steps 4000
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"
	"github.com/lathe-dev/lathe/internal/mlp"

	_ "github.com/lathe-dev/lathe/compute/lathe"
)

func main() {
	backendName := flag.String("backend", "lathe", `compute backend configuration ("lathe", "lathe:cpu,threads=2", "go")`)
	data := flag.String("data", "blobs", `data set: "blobs" or "spiral"`)
	steps := flag.Int("steps", 1500, "training steps")
	batch := flag.Int("batch", 128, "examples per step")
	hidden := flag.Int("hidden", 64, "hidden units per layer")
	lr := flag.Float64("lr", 0.1, "SGD learning rate")
	n := flag.Int("n", 3000, "examples in the data set")
	seed := flag.Uint64("seed", 42, "random seed (data, initialisation, batches)")
	flag.Parse()
	if err := run(*backendName, *data, *steps, *batch, *hidden, float32(*lr), *n, *seed); err != nil {
		fmt.Fprintf(os.Stderr, "lathe-demo: %+v\n", err)
		os.Exit(1)
	}
}

func run(backendName, data string, steps, batch, hidden int, lr float32, n int, seed uint64) error {
	backend, err := compute.NewWithConfig(backendName)
	if err != nil {
		return err
	}
	defer backend.Finalize()
	const classes = 3
	var x []float32
	var y []int32
	switch data {
	case "blobs":
		x, y = mlp.Blobs(n, classes, seed)
	case "spiral":
		x, y = mlp.Spiral(n, classes, seed)
	default:
		return fmt.Errorf("unknown data set %q", data)
	}
	fmt.Printf("backend %s (%s)\ndata: %d %s points, %d classes; MLP 2-%d-%d-%d, batch %d, lr %g\n",
		backend, backend.Description(), n, data, classes, hidden, hidden, classes, batch, lr)

	start := time.Now()
	model, err := mlp.New(backend, mlp.Config{Inputs: 2, Hidden: hidden, Classes: classes, Batch: batch, LearningRate: lr}, seed)
	if err != nil {
		return err
	}
	defer model.Finalize()
	fmt.Printf("compiled the training step in %s\n", time.Since(start).Round(time.Millisecond))

	rng := rand.New(rand.NewPCG(seed, 3))
	bx, by := make([]float32, 2*batch), make([]int32, batch)
	perm := rng.Perm(n)
	next := 0
	var loss float32
	start = time.Now()
	for step := 1; step <= steps; step++ {
		for i := range batch { // sample without replacement, reshuffling each epoch
			if next == n {
				perm, next = rng.Perm(n), 0
			}
			j := perm[next]
			next++
			bx[2*i], bx[2*i+1], by[i] = x[2*j], x[2*j+1], y[j]
		}
		if loss, err = model.Step(bx, by); err != nil {
			return err
		}
		if step%25 == 0 || step == steps {
			progress(step, steps, loss, time.Since(start))
		}
	}
	elapsed := time.Since(start)
	fmt.Fprintln(os.Stderr)

	pred, err := model.Predict(x)
	if err != nil {
		return err
	}
	correct := 0
	for i, p := range pred {
		if p == y[i] {
			correct++
		}
	}
	fmt.Printf("final loss %.4f; accuracy %.1f%% (%d/%d; chance %.1f%%)\n", loss,
		100*float64(correct)/float64(n), correct, n, 100.0/classes)
	fmt.Printf("%d steps in %s: %.0f steps/s\n", steps, elapsed.Round(time.Millisecond), float64(steps)/elapsed.Seconds())
	return nil
}

// progress redraws a one-line text bar on stderr.
func progress(step, steps int, loss float32, elapsed time.Duration) {
	const width = 30
	done := width * step / steps
	fmt.Fprintf(os.Stderr, "\r[%s%s] step %d/%d  loss %.4f  %.0f steps/s ", strings.Repeat("#", done),
		strings.Repeat(".", width-done), step, steps, loss, float64(step)/elapsed.Seconds())
}
