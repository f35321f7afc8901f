// Command dataparallel-bench measures data-parallel training throughput: GoMLX training
// steps (bench/internal/steps: MLP 784-1024-1024-10, transformer block d768 h12) on one device,
// and as an SPMD program over N devices of the same backend, each device taking the same batch
// as the single device (weak scaling: N times the examples per step). A data-parallel step
// averages the replicas' gradients with AllReduce before SGD's update, so every replica keeps the
// same weights. One step of each runs in turn per round, the loss read back after each; it prints
// median step times and the throughput ratio N·t(1)/t(N) (N is ideal).
//
//	go run ./bench/cmd/dataparallel-bench -backend lathe:cuda -devices 2      # two GPUs
//	go run ./bench/cmd/dataparallel-bench -backend lathe:cpu,devices=2 -rounds 3 -mlp-batch 64 -tf-batch 1 -tf-seq 64
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/distributed"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/lathe-dev/lathe/bench/internal/steps"
	_ "github.com/lathe-dev/lathe/compute/lathe" // registers "lathe"
)

func main() {
	backendName := flag.String("backend", "lathe:cuda", "backend configuration; its devices 0..N-1 are used")
	n := flag.Int("devices", 2, "devices of the data-parallel step")
	rounds := flag.Int("rounds", 20, "timed rounds")
	warmup := flag.Int("warmup", 3, "untimed rounds first")
	mlpBatch := flag.Int("mlp-batch", 256, "MLP examples per device")
	tfBatch := flag.Int("tf-batch", 8, "transformer sequences per device")
	tfSeq := flag.Int("tf-seq", 512, "transformer sequence length")
	only := flag.String("only", "", "run only workloads whose name contains this")
	flag.Parse()
	backend, err := compute.NewWithConfig(*backendName)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dataparallel-bench: %v\n", err)
		os.Exit(1)
	}
	defer backend.Finalize()
	if backend.NumDevices() < *n {
		fmt.Fprintf(os.Stderr, "dataparallel-bench: %s has %d devices, %d asked for\n", backend.Name(), backend.NumDevices(), *n)
		os.Exit(1)
	}
	fmt.Printf("backend: %s (%s); %d devices against 1, the same batch per device\n", *backendName, backend.Description(), *n)
	fmt.Printf("%-34s %12s %12s %10s\n", "workload (per device)", "1 device", fmt.Sprintf("%d devices", *n), "throughput")
	for _, w := range []steps.Workload{steps.MLP(*mlpBatch), steps.Transformer(*tfBatch, *tfSeq)} {
		if *only != "" && !strings.Contains(strings.ToLower(w.Name), strings.ToLower(*only)) {
			continue
		}
		t1, tn, err := measure(backend, w, *n, *rounds, *warmup)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dataparallel-bench: %s: %+v\n", w.Name, err)
			os.Exit(1)
		}
		fmt.Printf("%-34s %10.3fms %10.3fms %9.2fx\n", w.Name, ms(t1), ms(tn), float64(*n)*float64(t1)/float64(tn))
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// stepper is one training step executable with its inputs (one x, y pair per replica).
type stepper struct {
	exec *model.Exec
	args []any
}

// newStepper builds w's SGD step over n replicas (n == 1: a plain single-device step).
func newStepper(backend compute.Backend, w steps.Workload, n int) (*stepper, error) {
	store := model.NewStore()
	store.SetParam(model.ParamInitialSeed, int64(42))
	sgd := optimizer.StochasticGradientDescent().WithLearningRate(0.001)
	e, err := model.NewExec(backend, store, func(scope *model.Scope, x, y *Node) *Node {
		l := w.Loss(scope, x, y)
		grads := scope.BuildTrainableVariablesGradientsGraph(l)
		if n > 1 { // the mean over replicas of the loss and of each gradient
			reduced := x.Graph().Distributed().AllReduce(append([]*Node{l}, grads...), compute.ReduceOpSum)
			for i := range reduced {
				reduced[i] = DivScalar(reduced[i], float64(n))
			}
			l, grads = reduced[0], reduced[1:]
		}
		sgd.UpdateGraphWithGradients(scope, grads, l.DType())
		return l
	})
	if err != nil {
		return nil, err
	}
	if n > 1 {
		mesh, err := distributed.NewDeviceMesh([]int{n}, []string{"data"})
		if err != nil {
			return nil, err
		}
		e.SPMD(mesh)
	}
	s := &stepper{exec: e}
	rng := rand.New(rand.NewPCG(7, 1))
	for range n {
		x, y := w.Inputs(rng)
		s.args = append(s.args, x, y)
	}
	return s, nil
}

// step runs one step and reads back the loss (of replica 0), so that the time includes the work.
func (s *stepper) step() (time.Duration, error) { return steps.Run(s.exec, s.args...) }

func measure(backend compute.Backend, w steps.Workload, n, rounds, warmup int) (t1, tn time.Duration, err error) {
	one, err := newStepper(backend, w, 1)
	if err != nil {
		return 0, 0, err
	}
	defer one.exec.Finalize()
	many, err := newStepper(backend, w, n)
	if err != nil {
		return 0, 0, err
	}
	defer many.exec.Finalize()
	var d1, dn []time.Duration
	for round := 0; round < warmup+rounds; round++ {
		a, err := one.step()
		if err != nil {
			return 0, 0, fmt.Errorf("1 device: %w", err)
		}
		b, err := many.step()
		if err != nil {
			return 0, 0, fmt.Errorf("%d devices: %w", n, err)
		}
		if round >= warmup {
			d1, dn = append(d1, a), append(dn, b)
		}
	}
	return steps.Median(d1), steps.Median(dn), nil
}
