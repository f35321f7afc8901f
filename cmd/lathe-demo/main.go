// Command lathe-demo trains a handwritten-digit classifier with GoMLX on lathe: a model
// built from GoMLX's layers (a feed-forward network with layer normalization), GoMLX's autodiff
// and Adam optimizer, its training loop and progress bar, on the 1797 8x8 digit images that
// scikit-learn's wheel bundles (scripts/setup-data.sh takes them from the wheel). It reports the
// accuracy on held-out images and the training speed; -backend go runs the same program on GoMLX's
// own Go backend, to compare.
//
//	./scripts/demo.sh                          # lathe (best device)
//	./scripts/demo.sh -backend go              # GoMLX's pure-Go backend
//	./scripts/demo.sh -backend lathe:cpu,threads=2 -steps 3000
package main

import (
	"compress/gzip"
	"encoding/csv"
	"flag"
	"fmt"
	"io"
	mathrand "math/rand"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	_ "github.com/gomlx/compute/gobackend" // registers "go"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/ml/dataset"
	"github.com/gomlx/gomlx/ml/layers/activation"
	"github.com/gomlx/gomlx/ml/layers/fnn"
	"github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train"
	"github.com/gomlx/gomlx/ml/train/loss"
	"github.com/gomlx/gomlx/ml/train/metric"
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/lathe-dev/lathe/compute/lathe" // registers "lathe"
	_ "github.com/lathe-dev/lathe/compute/mlx" // registers "mlx" (its engine is in with -tags mlx)
	"github.com/lathe-dev/lathe/internal/progress"
)

func main() {
	// a fixed name in -h and errors: under go run, os.Args[0] is a path in Go's build cache
	flag.CommandLine = flag.NewFlagSet("lathe-demo", flag.ExitOnError)
	flag.CommandLine.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: ./scripts/demo.sh [flags] (or go run ./cmd/lathe-demo [flags])\n")
		flag.PrintDefaults()
		fmt.Fprintf(os.Stderr, "\nbackend configs: lathe (CUDA when usable, else the CPU), lathe:<options>, go, "+
			"mlx (with -tags mlx), and these options:\n%s", lathe.OptionsHelp())
	}
	backendName := flag.String("backend", "lathe", `compute backend configuration ("lathe", "lathe:cpu,threads=2", "go")`)
	data := flag.String("data", "build/data/digits.csv.gz", "digits CSV (64 pixel values 0..16 and the label per row), gzipped")
	steps := flag.Int("steps", 2000, "training steps")
	batch := flag.Int("batch", 64, "examples per step")
	hidden := flag.Int("hidden", 128, "units per hidden layer")
	layers := flag.Int("layers", 2, "hidden layers")
	lr := flag.Float64("lr", 0.001, "Adam learning rate")
	heldOut := flag.Float64("held-out", 0.2, "fraction of the images held out for the accuracy")
	seed := flag.Uint64("seed", 42, "random seed (split, initialisation, batches)")
	flag.Parse()
	if err := run(*backendName, *data, *steps, *batch, *hidden, *layers, *lr, *heldOut, *seed); err != nil {
		fmt.Fprintf(os.Stderr, "lathe-demo: %v\n", err) // one line: the message names the fix
		os.Exit(1)
	}
}

// readDigits reads the gzipped CSV: 64 pixel intensities (0..16) and the digit, per row.
func readDigits(path string) (pixels [][]float32, labels []int32, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w (./scripts/setup-data.sh extracts it from scikit-learn's wheel)", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, err
	}
	r := csv.NewReader(z)
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if len(rec) != 65 {
			return nil, nil, fmt.Errorf("%s: a row with %d fields, want 65", path, len(rec))
		}
		row := make([]float32, 64)
		for i := range row {
			v, err := strconv.ParseFloat(rec[i], 32)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", path, err)
			}
			row[i] = float32(v) / 16
		}
		label, err := strconv.Atoi(rec[64])
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		pixels = append(pixels, row)
		labels = append(labels, int32(label))
	}
	return pixels, labels, nil
}

func run(backendName, dataPath string, steps, batch, hidden, numLayers int, lr, heldOut float64, seed uint64) error {
	backend, err := lathe.NewWithConfig(backendName) // errors where compute.NewWithConfig panics
	if err != nil {
		return err
	}
	defer backend.Finalize()
	pixels, labels, err := readDigits(dataPath)
	if err != nil {
		return err
	}

	// A fixed shuffle, then the split: the first images train, the rest are held out.
	rng := rand.New(rand.NewPCG(seed, 7))
	perm := rng.Perm(len(pixels))
	nTest := int(float64(len(pixels)) * heldOut)
	nTrain := len(pixels) - nTest
	split := func(idx []int) ([][]float32, [][]int32) {
		x, y := make([][]float32, len(idx)), make([][]int32, len(idx))
		for i, j := range idx {
			x[i], y[i] = pixels[j], []int32{labels[j]}
		}
		return x, y
	}
	trainX, trainY := split(perm[:nTrain])
	testX, testY := split(perm[nTrain:])
	fmt.Printf("backend %s (%s)\n", backendName, backend.Description())
	fmt.Printf("data: %d handwritten digits (8x8), %d for training, %d held out\n", len(pixels), nTrain, nTest)
	fmt.Printf("model: GoMLX fnn %d-%dx%d-10 (ReLU, layer norm), Adam lr %g, batch %d, %d steps\n",
		64, numLayers, hidden, lr, batch, steps)

	trainDS, err := dataset.InMemoryFromData(backend, "train", []any{trainX}, []any{trainY})
	if err != nil {
		return err
	}
	trainDS.WithRand(mathrand.New(mathrand.NewSource(int64(seed)))).Shuffle().BatchSize(batch, true).Infinite(true)
	trainEval, err := dataset.InMemoryFromData(backend, "train-eval", []any{trainX}, []any{trainY})
	if err != nil {
		return err
	}
	trainEval.BatchSize(256, false)
	testDS, err := dataset.InMemoryFromData(backend, "held-out", []any{testX}, []any{testY})
	if err != nil {
		return err
	}
	testDS.BatchSize(256, false)

	store := model.NewStore()
	store.SetParam(model.ParamInitialSeed, int64(seed))
	modelFn := func(scope *model.Scope, _ any, inputs []*Node) []*Node {
		logits := fnn.New(scope.In("classifier"), inputs[0], 10).
			NumHiddenLayers(numLayers, hidden).
			Activation(activation.TypeRelu).
			Normalization("layer").
			Done()
		return []*Node{logits}
	}
	trainer := train.NewTrainer(backend, store, modelFn,
		loss.SparseCategoricalCrossEntropyLogits,
		optimizer.Adam().LearningRate(lr).Done(),
		[]metric.Interface{metric.NewMovingAverageSparseCategoricalAccuracy("Moving Average Accuracy", "~acc", 0.01)},
		[]metric.Interface{metric.NewSparseCategoricalAccuracy("Accuracy", "acc")})

	// The first step compiles the training graph: time it apart from the steady state, which the
	// loop with the progress bar runs.
	start := time.Now()
	if _, err := train.NewLoop(trainer).RunSteps(trainDS, 1); err != nil {
		return err
	}
	compileTime := time.Since(start)
	loop := train.NewLoop(trainer)
	progress.Rows(loop, trainer, steps)
	start = time.Now()
	if _, err := loop.RunSteps(trainDS, steps-1); err != nil {
		return err
	}
	elapsed := time.Since(start)

	report := func(name string, ds train.Dataset) (float64, error) {
		m, err := trainer.Eval(ds)
		if err != nil {
			return 0, err
		}
		acc := m[1].Value().(float32)
		fmt.Printf("%-9s loss %.4f, accuracy %.2f%%\n", name, m[0].Value().(float32), 100*acc)
		return float64(acc), nil
	}
	fmt.Println()
	if _, err := report("train", trainEval); err != nil {
		return err
	}
	if _, err := report("held-out", testDS); err != nil {
		return err
	}
	fmt.Printf("%d steps in %s after a first step (compile) of %s: %.0f steps/s on %s\n",
		steps-1, elapsed.Round(time.Millisecond), compileTime.Round(time.Millisecond),
		float64(steps-1)/elapsed.Seconds(), backendName)
	return nil
}
