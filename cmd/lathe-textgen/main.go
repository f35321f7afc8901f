// Command lathe-textgen trains a small character-level transformer with GoMLX on lathe
// and samples text from it: GoMLX's zoo transformer (token embeddings, rotary position encoding,
// causal multi-head attention, layer normalization, GELU feed-forward blocks), trained with its
// autodiff, Adam and training loop on GoMLX's own documentation (the markdown files of the
// github.com/gomlx/gomlx module that the Go module proxy serves, found in the module cache), then
// sampled with GoMLX's temperature sampling (Gumbel noise from RNGBitGenerator, ArgMax).
//
//	./scripts/textgen.sh                       # lathe
//	./scripts/textgen.sh -backend go           # GoMLX's pure-Go backend
//	./scripts/textgen.sh -steps 3000 -temperature 0.6
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	_ "github.com/gomlx/compute/gobackend" // registers "go"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/ml/dataset"
	"github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train"
	"github.com/gomlx/gomlx/ml/train/loss"
	"github.com/gomlx/gomlx/ml/train/optimizer"
	"github.com/gomlx/gomlx/ml/zoo/transformer"
	"github.com/gomlx/gomlx/ml/zoo/transformer/generate/sample"

	"github.com/lathe-dev/lathe/compute/lathe" // registers "lathe"
	_ "github.com/lathe-dev/lathe/compute/mlx" // registers "mlx" (its engine is in with -tags mlx)
	"github.com/lathe-dev/lathe/internal/progress"
)

type config struct {
	backend                        string
	textDir                        string
	steps, batch, context, windows int
	embed, layers, heads, headDim  int
	lr, temperature                float64
	generate                       int
	prompt                         string
	seed                           uint64
}

func main() {
	var c config
	flag.CommandLine = flag.NewFlagSet("lathe-textgen", flag.ExitOnError) // not go run's build-cache path
	flag.CommandLine.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: ./scripts/textgen.sh [flags] (or go run ./cmd/lathe-textgen [flags])\n")
		flag.PrintDefaults()
		fmt.Fprintf(os.Stderr, "\nbackend configs: lathe (CUDA when usable, else the CPU), lathe:<options>, go, "+
			"mlx (with -tags mlx), and these options:\n%s", lathe.OptionsHelp())
	}
	flag.StringVar(&c.backend, "backend", "lathe", `compute backend configuration ("lathe", "lathe:cpu,threads=2", "go")`)
	flag.StringVar(&c.textDir, "text", "", "directory of the GoMLX module (its *.md files are the corpus); scripts/textgen.sh finds it")
	flag.IntVar(&c.steps, "steps", 800, "training steps")
	flag.IntVar(&c.batch, "batch", 32, "sequences per step")
	flag.IntVar(&c.context, "context", 64, "characters per sequence (the attention window)")
	flag.IntVar(&c.windows, "windows", 20000, "training sequences cut from the corpus")
	flag.IntVar(&c.embed, "embed", 64, "embedding size")
	flag.IntVar(&c.layers, "layers", 2, "transformer layers")
	flag.IntVar(&c.heads, "heads", 4, "attention heads per layer")
	flag.IntVar(&c.headDim, "head-dim", 16, "size of each attention head")
	flag.Float64Var(&c.lr, "lr", 0.002, "Adam learning rate")
	flag.Float64Var(&c.temperature, "temperature", 0.7, "sampling temperature")
	flag.IntVar(&c.generate, "generate", 400, "characters to sample after training")
	flag.StringVar(&c.prompt, "prompt", "GoMLX is ", "text the sample starts from")
	flag.Uint64Var(&c.seed, "seed", 7, "random seed (windows, initialisation, batches, sampling)")
	flag.Parse()
	if err := run(c); err != nil {
		fmt.Fprintf(os.Stderr, "lathe-textgen: %v\n", err) // one line: the message names the fix
		os.Exit(1)
	}
}

// readCorpus concatenates the module's markdown files (sorted by path, so the corpus is fixed).
func readCorpus(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("-text is empty: run through ./scripts/textgen.sh, which passes the GoMLX module's directory")
	}
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	var sb strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		sb.Write(data)
		sb.WriteByte('\n')
	}
	return sb.String(), nil
}

func run(c config) error {
	text, err := readCorpus(c.textDir)
	if err != nil {
		return err
	}
	if len(text) < 10*c.context {
		return fmt.Errorf("corpus of %d bytes is too small for a context of %d", len(text), c.context)
	}
	// Byte vocabulary: the bytes the corpus uses.
	var present [256]bool
	for i := 0; i < len(text); i++ {
		present[text[i]] = true
	}
	var toID [256]int32
	var fromID []byte
	for b := range 256 {
		if present[b] {
			toID[b] = int32(len(fromID))
			fromID = append(fromID, byte(b))
		}
	}
	vocab := len(fromID)

	backend, err := lathe.NewWithConfig(c.backend) // errors where compute.NewWithConfig panics
	if err != nil {
		return err
	}
	defer backend.Finalize()
	fmt.Printf("backend %s (%s)\n", c.backend, backend.Description())
	fmt.Printf("corpus: %d bytes of GoMLX's documentation, %d distinct bytes\n", len(text), vocab)
	fmt.Printf("model: GoMLX transformer, %d layers, %d heads x %d, embedding %d, context %d, RoPE, layer norm\n",
		c.layers, c.heads, c.headDim, c.embed, c.context)

	// Training windows: inputs text[s:s+ctx], labels the next byte of each position.
	rng := rand.New(rand.NewPCG(c.seed, 1))
	inputs := make([][]int32, c.windows)
	labels := make([][][]int32, c.windows)
	for w := range c.windows {
		s := rng.IntN(len(text) - c.context - 1)
		inputs[w] = make([]int32, c.context)
		labels[w] = make([][]int32, c.context)
		for i := range c.context {
			inputs[w][i] = toID[text[s+i]]
			labels[w][i] = []int32{toID[text[s+i+1]]}
		}
	}
	ds, err := dataset.InMemoryFromData(backend, "windows", []any{inputs}, []any{labels})
	if err != nil {
		return err
	}
	ds.Shuffle().BatchSize(c.batch, true).Infinite(true)

	store := model.NewStore()
	store.SetParam(model.ParamInitialSeed, int64(c.seed))
	newModel := func(scope *model.Scope) *transformer.Model {
		return transformer.New(scope.In("transformer")).
			WithVocabSize(vocab).WithEmbedDim(c.embed).WithNumLayers(c.layers).
			WithNumHeads(c.heads).WithHeadDim(c.headDim).WithFFNDim(4 * c.embed).
			WithMaxPosEmbed(c.context).WithRoPE(10000).WithCausalMask(true).
			WithFinalNormalization("layer")
	}
	modelFn := func(scope *model.Scope, _ any, in []*Node) []*Node {
		return []*Node{newModel(scope).Logits(in[0], transformer.CallOptions{})}
	}
	trainer := train.NewTrainer(backend, store, modelFn, loss.SparseCategoricalCrossEntropyLogits,
		optimizer.Adam().LearningRate(c.lr).Done(), nil, nil)
	loop := train.NewLoop(trainer)
	progress.Attach(loop, trainer, c.steps)
	start := time.Now()
	metrics, err := loop.RunSteps(ds, c.steps)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Printf("\ntrained %d steps in %s (%.1f steps/s, first step's compile included); moving-average loss %.3f nats/char\n",
		c.steps, elapsed.Round(time.Millisecond), float64(c.steps)/elapsed.Seconds(), metrics[1].Value().(float32))

	// Sampling: the last `context` characters in, the next one out (temperature sampling).
	sampler, err := model.NewExec(backend, store, func(scope *model.Scope, tokens *Node) *Node {
		logits := newModel(scope).Logits(tokens, transformer.CallOptions{}) // [1, ctx, vocab]
		last := Slice(logits, AxisRange(), AxisElem(-1), AxisRange())       // [1, 1, vocab]
		last = Reshape(last, 1, vocab)
		return sample.Temperature(scope, last, c.temperature) // [1] Int32
	})
	if err != nil {
		return err
	}
	window := make([]int32, c.context)
	for i := range window { // left-padded with spaces
		window[i] = toID[' ']
	}
	out := []byte(c.prompt)
	for _, b := range out {
		if !present[b] {
			return fmt.Errorf("prompt byte %q is not in the corpus", b)
		}
		window = append(window[1:], toID[b])
	}
	start = time.Now()
	for range c.generate {
		res, err := sampler.Exec([][]int32{window})
		if err != nil {
			return err
		}
		id := res[0].Value().([]int32)[0]
		res[0].FinalizeAll()
		out = append(out, fromID[id])
		window = append(window[1:], id)
	}
	fmt.Printf("sampled %d characters at temperature %g in %s:\n\n%s\n", c.generate, c.temperature,
		time.Since(start).Round(time.Millisecond), out)
	return nil
}
