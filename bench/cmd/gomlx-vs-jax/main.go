// Command gomlx-vs-jax times GoMLX training steps on lathe, on GoMLX's own `go` backend, on
// GoMLX's `xla` backend (xla:cpu or xla:cuda, when its PJRT plugin is there) and, as outside
// references, the same steps written in JAX (jax_steps.py) and, for the language models, in
// PyTorch (torch_steps.py, eager and torch.compile): all interleaved in one run (round after
// round, one step of each contender in turn, each round starting one contender later), so that
// a noisy machine slows them alike. It prints median step times and ratios, and draws the ratios
// as an SVG chart.
//
// Workloads (the loss read back after every step):
//   - MLP 784-1024-1024-10 (ReLU), batch 256, softmax cross-entropy, SGD;
//   - CNN: conv 3x3 3->32, ReLU, 2x2 max-pool, conv 3x3 32->64, ReLU, spatial mean, dense 64->10,
//     on 28x28x3 images, batch 32 and 128, SGD;
//   - transformer block d768, 12 heads (pre-norm: x + MHA(LN x), then + FFN 3072 with GELU),
//     batch 1, sequence 128 and 512, mean squared error, SGD;
//   - with -lm, instead: the causal language model of steps.LMConfig (token and positional
//     embeddings, pre-norm blocks with causal attention and a GELU MLP, final LayerNorm, logits,
//     sparse softmax cross-entropy on the next token; AdamW), its attention either GoMLX's
//     MultiHeadAttention ("MHA") or explicit products (Einsum Q·Kᵀ, scale, MaskedSoftmax, ·V),
//     in Float32 or BFloat16 ("bf16": parameters and activations; the LayerNorm statistics,
//     the loss and AdamW's moments in Float32). On the CPU "LM tiny" (2 layers d64 h4 s32 b2
//     vocabulary 128); with -gpu "LM small" (4 layers d512 h8 s512 b8 vocabulary 8192) and
//     "GPT-2 small" (12 layers d768 h12 s1024 b8 vocabulary 50257).
//
// Columns: the median step time, the first step (build, compile, initialisation and one step),
// the ratio to the first contender, the loss of the first step (the GoMLX backends share GoMLX's
// initialisation, so lathe's and xla's agree; JAX's and PyTorch's models are initialised alike
// but not identically: all start near ln(vocabulary) for the LM), and for the LM tokens per
// second, model FLOP utilisation (GPU only) and peak device memory.
//
// Model FLOPs per LM step (steps.LMConfig.FLOPs) = 6·N·T + 12·L·S·D·T, with N the parameters
// outside the token and positional embeddings (the untied logits projection included), T =
// batch·sequence tokens, L layers, S the sequence, D the width: the products with the weights
// forward and backward, plus the attention's two products over the full S×S square. MFU =
// FLOPs / median step time / the device's peak: -peak-tflops gives the dense BFloat16 and
// TF32 peaks (default 989,494: H100 SXM); Float32 rows, exact or TF32, are measured against
// the TF32 peak, BFloat16 rows against the BFloat16 one.
//
// Peak device memory, per contender, over the timed steps: lathe's own counters
// (lathe.Backend.MemoryStats, reset after the warm-up rounds; on lathe:cpu they are the
// process's host pool, marked "(process)"; "n/a" where a device keeps none yet); JAX's
// memory_stats()['peak_bytes_in_use'] (since its process started: it cannot be reset, and a
// fresh JAX process serves each workload; -gpu sets XLA_PYTHON_CLIENT_PREALLOCATE=false);
// PyTorch's torch.cuda.max_memory_allocated() (reset after the warm-up). GoMLX's xla backend
// (go-xla v0.4.13) exposes no device memory statistics (its PJRT wrapper has no
// PJRT_Device_MemoryStats, only each executable's compile-time estimate, unexported), so it
// reads "n/a"; it does not preallocate on CUDA (go-xla's default preallocate=false;
// "-xla xla:cuda,preallocate=false" says so explicitly). Since the GoMLX contenders share one
// process and one GPU, the whole-process peak of one of them is measured by running it alone
// and watching nvidia-smi (the memory recipe below).
//
// Setup: bench/cmd/gomlx-vs-jax/setup.sh installs JAX (and, with LATHE_BENCH_XLA=1, XLA's CPU
// plugin) under .deps/. Run from the repository root (the Python scripts are read from
// bench/cmd/gomlx-vs-jax/ relative to the working directory):
//
//	go run ./bench/cmd/gomlx-vs-jax -rounds 15 -svg docs/gomlx-vs-jax.svg
//	go run ./bench/cmd/gomlx-vs-jax -lm -rounds 5 -warmup 1      # LM tiny on the CPU
//
// On the GPU machine (no Go there: build the binary here with
// `go build -o .gpu/gvj ./bench/cmd/gomlx-vs-jax`), from the repository root, one line per
// size (both in one command may pass 10 minutes: torch.compile and XLA compile each workload):
//
//	LATHE_BENCH_LM_SIZES=gpt2 bench/cuda-bench.sh .gpu lm 5
//
// which links JAX's CUDA PJRT plugin for xla:cuda (PJRT_PLUGIN_LIBRARY_PATH), lets JAX grow to
// 90% of the card (XLA_PYTHON_CLIENT_MEM_FRACTION=.9) and runs
//
//	.gpu/gvj -gpu -lm -lm-sizes gpt2 -serial -rounds 5 -warmup 2 -go-rounds 0 -lathe "lathe:cuda;lathe:cuda,tf32=1" -xla xla:cuda,preallocate=false -python python3 -torch python3
//
// -serial runs the contenders one after another, each alone on the GPU: GPT-2 small in Float32
// takes tens of GB per contender (issue 44: lathe:cuda 51.9 GB, xla:cuda 22.4 GB), more than one
// 80 GB card holds for all of them at once; it also fills the nvidia-smi column (each
// contender's process, after its timed steps, alone in it). Without -serial the contenders are
// interleaved round by round in one process (LM small fits: -lm-sizes small).
//
// Memory recipe for the whole-process peak of one contender, sampled by nvidia-smi every
// 100 ms (here lathe:cuda,tf32=1 on GPT-2 small, Float32, MHA):
//
//	nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > mem.log & .gpu/gvj -gpu -lm -lm-sizes gpt2 -only "MHA f32" -rounds 3 -warmup 1 -go-rounds 0 -lathe "lathe:cuda,tf32=1" -xla "" -python "" -torch ""; kill %1; sort -n mem.log | tail -1
//
// (-lathe "" -xla xla:cuda, -lathe "" -xla "" -python python3, or -lathe "" -xla "" -torch
// python3 -torch-modes compile measure the others alone the same way; JAX needs
// XLA_PYTHON_CLIENT_PREALLOCATE=false in the environment, which -gpu sets for its process, and
// xla:cuda needs PJRT_PLUGIN_LIBRARY_PATH as bench/cuda-bench.sh sets it.)
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend" // registers "go"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/model"

	"github.com/lathe-dev/lathe/bench/internal/steps"
	"github.com/lathe-dev/lathe/compute/lathe" // registers "lathe"
)

// contender runs one workload's step and returns its duration.
type contender interface {
	name() string
	step() (time.Duration, error)
	// loss0 is the loss of the first step (ok false when unknown).
	loss0() (float32, bool)
	// resetPeak restarts the peak device memory count; peak reads it ("n/a" when unknown).
	resetPeak()
	peak() string
	// pid is the process that runs the contender's steps.
	pid() int
	close()
}

// memoryStats is what lathe.Backend offers for device memory (compute/lathe/profile.go).
type memoryStats interface {
	MemoryStats(device int) (lathe.MemoryStats, error)
}

type memoryResetter interface {
	MemoryResetPeak(device int) error
}

// gomlxStep is a workload's training step on one GoMLX backend: the loss, the optimizer's update
// of the variables (kept on the backend between steps), and the loss read back.
type gomlxStep struct {
	label, backendName string
	backend            compute.Backend
	exec               *model.Exec
	x, y               *tensors.Tensor
	firstLoss          float32
	stepped            bool
}

func newGomlxStep(label, backendName string, w steps.Workload, seed uint64) (*gomlxStep, error) {
	backend, err := compute.NewWithConfig(backendName)
	if err != nil {
		return nil, err
	}
	store := model.NewStore()
	store.SetParam(model.ParamInitialSeed, int64(seed))
	opt := w.NewOptimizer()
	e, err := model.NewExec(backend, store, func(scope *model.Scope, x, y *Node) *Node {
		l := w.Loss(scope, x, y)
		opt.UpdateGraph(scope, x.Graph(), l)
		return l
	})
	if err != nil {
		backend.Finalize()
		return nil, err
	}
	x, y := w.Inputs(rand.New(rand.NewPCG(seed, 1)))
	return &gomlxStep{label: label, backendName: backendName, backend: backend, exec: e, x: x, y: y}, nil
}

func (s *gomlxStep) name() string { return s.label }

func (s *gomlxStep) step() (time.Duration, error) {
	d, l, err := steps.RunLoss(s.exec, s.x, s.y)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.backendName, err)
	}
	if !s.stepped {
		s.firstLoss, s.stepped = l, true
	}
	return d, nil
}

func (s *gomlxStep) loss0() (float32, bool) { return s.firstLoss, s.stepped }

func (s *gomlxStep) resetPeak() {
	if r, ok := s.backend.(memoryResetter); ok {
		_ = r.MemoryResetPeak(0)
	}
}

func (s *gomlxStep) peak() string {
	m, ok := s.backend.(memoryStats)
	if !ok {
		return "n/a"
	}
	st, err := m.MemoryStats(0)
	if err != nil {
		if !errors.Is(err, compute.ErrNotImplemented) {
			fmt.Fprintf(os.Stderr, "gomlx-vs-jax: %s: MemoryStats: %v\n", s.label, err)
		}
		return "n/a"
	}
	if st.ProcessWide {
		return bytesStr(st.Peak) + " (process)"
	}
	return bytesStr(st.Peak)
}

func (s *gomlxStep) pid() int { return os.Getpid() }

func (s *gomlxStep) close() {
	s.exec.Finalize()
	s.backend.Finalize()
}

// pyServer is jax_steps.py or torch_steps.py, a child process that builds a workload's step on
// request and times single steps: "init SPEC" answers "ok FIRST_SECONDS LOSS [NOTES]", "step"
// answers "SECONDS", "mem" the peak device bytes (or "n/a"), "reset" restarts that peak.
type pyServer struct {
	label string
	cmd   *exec.Cmd
	in    *bufio.Writer
	out   *bufio.Scanner
}

func startPython(label string, env []string, python string, args ...string) (*pyServer, error) {
	cmd := exec.Command(python, args...)
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &pyServer{label: label, cmd: cmd, in: bufio.NewWriter(stdin), out: bufio.NewScanner(stdout)}
	return s, nil
}

func (s *pyServer) ask(cmd string) (string, error) {
	if _, err := s.in.WriteString(cmd + "\n"); err != nil {
		return "", err
	}
	if err := s.in.Flush(); err != nil {
		return "", err
	}
	if !s.out.Scan() {
		return "", fmt.Errorf("%s: %s ended (command %q)", s.label, filepath.Base(s.cmd.Path), cmd)
	}
	line := s.out.Text()
	if strings.HasPrefix(line, "error") {
		return "", fmt.Errorf("%s: %s", s.label, line)
	}
	return line, nil
}

func (s *pyServer) stop() {
	_, _ = s.in.WriteString("quit\n")
	_ = s.in.Flush()
	_ = s.cmd.Wait()
}

// pyStep is a contender served by a pyServer that has built the workload's step.
type pyStep struct {
	srv       *pyServer
	firstLoss float32
	hasLoss   bool
}

func (p *pyStep) name() string { return p.srv.label }
func (p *pyStep) step() (time.Duration, error) {
	line, err := p.srv.ask("step")
	if err != nil {
		return 0, err
	}
	sec, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	return time.Duration(sec * float64(time.Second)), err
}
func (p *pyStep) loss0() (float32, bool) { return p.firstLoss, p.hasLoss }
func (p *pyStep) resetPeak()             { _, _ = p.srv.ask("reset") }
func (p *pyStep) peak() string {
	line, err := p.srv.ask("mem")
	if err != nil {
		return "n/a"
	}
	b, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return "n/a"
	}
	return bytesStr(b)
}
func (p *pyStep) pid() int { return p.srv.cmd.Process.Pid }
func (p *pyStep) close()   { p.srv.stop() }

// initPython starts srv's step for w: it returns the contender, its first step's time and the
// notes the server added (for PyTorch, the SDPA backend).
func initPython(srv *pyServer, w steps.Workload) (*pyStep, time.Duration, string, error) {
	line, err := srv.ask("init " + w.JaxSpec)
	if err != nil {
		return nil, 0, "", err
	}
	f := strings.Fields(line)
	p := &pyStep{srv: srv}
	var first time.Duration
	if len(f) > 1 {
		if sec, err := strconv.ParseFloat(f[1], 64); err == nil {
			first = time.Duration(sec * float64(time.Second))
		}
	}
	if len(f) > 2 {
		if l, err := strconv.ParseFloat(f[2], 32); err == nil {
			p.firstLoss, p.hasLoss = float32(l), true
		}
	}
	notes := ""
	if len(f) > 3 {
		notes = strings.Join(f[3:], " ")
	}
	return p, first, notes, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

func bytesStr(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
}

// result of one workload: per contender, its median step time and the rest of its row.
type result struct {
	workload  string
	w         steps.Workload
	names     []string
	medians   map[string]time.Duration
	first     map[string]time.Duration
	precision map[string]string
	loss0     map[string]string
	peak      map[string]string
	smi       map[string]string // with -serial -gpu: nvidia-smi's view of the process after the timed steps
	notes     []string
}

// options are the command line's choices that runWorkload needs.
type options struct {
	latheCfg, goCfg, xlaCfg, xlaPlugin string
	python, torch                      string
	torchModes                         []string
	torchPrecision                     string
	gpu, serial                        bool
	rounds, warmup, goRounds           int
	peakBF16, peakTF32                 float64 // FLOP/s
}

func main() {
	rounds := flag.Int("rounds", 15, "timed rounds (one step of each contender per round)")
	warmup := flag.Int("warmup", 3, "untimed rounds first (after the first step, which compiles)")
	goRounds := flag.Int("go-rounds", 3, "timed rounds for GoMLX's go backend (10-20x slower; 0 leaves it out)")
	latheCfg := flag.String("lathe", "lathe:cpu,threads=2", `lathe backend configuration (several: separated by ";", the first is the base of the ratios; "" leaves lathe out)`)
	gpu := flag.Bool("gpu", false, "the GPU workloads (MLP b256, CNN b128, transformer b8 s512; with -lm: LM small and GPT-2 small) instead of the CPU ones; JAX and PyTorch on CUDA")
	lm := flag.Bool("lm", false, "the causal language models (LM tiny on the CPU; LM small and GPT-2 small with -gpu) instead of MLP, CNN and transformer block")
	lmSizes := flag.String("lm-sizes", "", `with -lm, the models: tiny, small, gpt2, comma-separated (default: tiny on the CPU, "small,gpt2" with -gpu); each in three variants (MHA f32, explicit f32, MHA bf16)`)
	goCfg := flag.String("go", "go", "GoMLX go backend configuration")
	xlaCfg := flag.String("xla", "xla:cpu", `GoMLX xla backend configuration, e.g. xla:cuda or xla:cuda,preallocate=false ("" leaves it out)`)
	python := flag.String("python", ".deps/jax/bin/python", `Python with JAX ("" leaves JAX out)`)
	torch := flag.String("torch", "", `Python with PyTorch, for the LM workloads ("" leaves PyTorch out)`)
	torchModes := flag.String("torch-modes", "eager,compile", "PyTorch contenders: eager, compile (torch.compile), comma-separated")
	torchPrecision := flag.String("torch-precision", "tf32", "PyTorch's float32 products on CUDA: tf32 (allow_tf32, comparable with JAX's and XLA's default) or fp32")
	peakTFLOPs := flag.String("peak-tflops", "989,494", "the device's dense peak TFLOP/s for BFloat16 and for TF32, for MFU (default: H100 SXM)")
	serial := flag.Bool("serial", false, "run the contenders one after another, each alone on the device (made, timed, closed), instead of interleaved: for models that do not fit on the device together; with -gpu it adds nvidia-smi's view of each contender's process")
	only := flag.String("only", "", "comma-separated substrings: run only workloads whose name has one")
	svgPath := flag.String("svg", "", "write the ratio chart here (SVG)")
	flag.Parse()

	o := options{latheCfg: *latheCfg, goCfg: *goCfg, xlaCfg: *xlaCfg, python: *python, torch: *torch,
		torchPrecision: *torchPrecision, gpu: *gpu, serial: *serial, rounds: *rounds, warmup: *warmup, goRounds: *goRounds}
	for _, m := range strings.Split(*torchModes, ",") {
		if m = strings.TrimSpace(m); m != "" {
			o.torchModes = append(o.torchModes, m)
		}
	}
	if _, err := fmt.Sscanf(*peakTFLOPs, "%g,%g", &o.peakBF16, &o.peakTF32); err != nil {
		fmt.Fprintf(os.Stderr, "gomlx-vs-jax: -peak-tflops %q: want BF16,TF32 (e.g. 989,494): %v\n", *peakTFLOPs, err)
		os.Exit(2)
	}
	o.peakBF16 *= 1e12
	o.peakTF32 *= 1e12

	workloads := []steps.Workload{steps.MLP(256), steps.CNN(32), steps.CNN(128), steps.Transformer(1, 128), steps.Transformer(1, 512)}
	switch {
	case *lm:
		sizes := *lmSizes
		if sizes == "" {
			sizes = pick(*gpu, "small,gpt2", "tiny")
		}
		workloads = nil
		for _, size := range strings.Split(sizes, ",") {
			c, ok := map[string]steps.LMConfig{"tiny": steps.LMTiny(), "small": steps.LMSmall(), "gpt2": steps.GPT2Small()}[strings.TrimSpace(size)]
			if !ok {
				fmt.Fprintf(os.Stderr, "gomlx-vs-jax: -lm-sizes: no model %q (tiny, small, gpt2)\n", size)
				os.Exit(2)
			}
			workloads = append(workloads, steps.LM(c), steps.LM(c.WithAttention(true)), steps.LM(c.WithBF16(true)))
		}
	case *gpu:
		workloads = []steps.Workload{steps.MLP(256), steps.CNN(128), steps.Transformer(8, 512)}
	}
	if o.xlaCfg != "" {
		var err error
		if o.xlaPlugin, err = xlaConfig(o.xlaCfg); err != nil {
			fmt.Printf("xla:   left out: %v\n", err)
			o.xlaCfg = ""
		}
	}
	var results []result
	for _, w := range workloads {
		if *only != "" && !matchAny(w.Name, *only) {
			continue
		}
		r, err := runWorkload(w, &o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gomlx-vs-jax: %s: %+v\n", w.Name, err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	printTable(results, &o)
	if *svgPath != "" {
		if err := writeSVG(*svgPath, results); err != nil {
			fmt.Fprintf(os.Stderr, "gomlx-vs-jax: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("chart: %s\n", *svgPath)
	}
}

func matchAny(name, list string) bool {
	for _, s := range strings.Split(list, ",") {
		if s != "" && strings.Contains(strings.ToLower(name), strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// versionsShown keeps each Python's version line to one print per run.
var versionsShown = map[string]bool{}

// maker makes one contender of a workload (and builds its step); the first step's time and notes
// of the Python peers go into the result.
type maker struct {
	label string
	make  func() (contender, error)
}

// peerMakers makes, for w, a fresh JAX process and the PyTorch ones (LM workloads only), so that
// each workload's peak memory is its own.
func peerMakers(w steps.Workload, o *options, r *result) []maker {
	var ms []maker
	dir := filepath.Join("bench", "cmd", "gomlx-vs-jax")
	add := func(label, prec string, env []string, python string, args ...string) {
		r.precision[label] = prec
		ms = append(ms, maker{label, func() (contender, error) {
			srv, err := startPython(label, env, python, args...)
			if err != nil {
				return nil, err
			}
			v, err := srv.ask("version")
			if err == nil && !versionsShown[label] {
				versionsShown[label] = true
				fmt.Printf("%-18s %s\n", label+":", v)
			}
			var p *pyStep
			var first time.Duration
			var notes string
			if err == nil {
				p, first, notes, err = initPython(srv, w)
			}
			if err != nil {
				srv.stop()
				return nil, err
			}
			r.first[label] = first
			if notes != "" {
				r.notes = append(r.notes, label+": "+notes)
			}
			return p, nil
		}})
	}
	f32 := "FP32"
	if o.gpu {
		f32 = "TF32" // JAX's default precision on the GPU
	}
	if o.python != "" {
		var env []string
		if o.gpu {
			env = append(env, envDefault("JAX_PLATFORMS", "cuda"), envDefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false"))
		}
		add("jax", pick(w.BF16, "BF16", f32), env, o.python, filepath.Join(dir, "jax_steps.py"))
	}
	if o.torch != "" && w.Tokens > 0 {
		device, prec := "cpu", "fp32"
		if o.gpu {
			device, prec = "cuda", o.torchPrecision
		}
		tprec := strings.ToUpper(prec)
		if w.BF16 {
			tprec = "BF16 autocast"
		}
		for _, m := range o.torchModes {
			label := "torch eager"
			if m == "compile" {
				label = "torch.compile"
			}
			add(label, tprec, nil, o.torch, filepath.Join(dir, "torch_steps.py"), m, device, prec)
		}
	}
	return ms
}

// envDefault is NAME=VALUE, or NAME's value in the environment when it is set.
func envDefault(name, value string) string {
	if v, ok := os.LookupEnv(name); ok {
		return name + "=" + v
	}
	return name + "=" + value
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// gomlxPrecision is the precision of a GoMLX backend's float32 products.
func gomlxPrecision(cfg string, w steps.Workload, o *options) string {
	switch {
	case w.BF16:
		return "BF16"
	case strings.HasPrefix(cfg, "lathe") && strings.Contains(cfg, "tf32=1"):
		return "TF32"
	case strings.HasPrefix(cfg, "xla") && o.gpu && !strings.Contains(cfg, "tf32=false"):
		return "TF32" // go-xla's default on CUDA
	}
	return "FP32"
}

// runWorkload times w's contenders: all at once, interleaved round by round, or with -serial one
// after another, each alone on the device (made, timed and closed before the next is made).
func runWorkload(w steps.Workload, o *options) (result, error) {
	r := result{workload: w.Name, w: w, medians: map[string]time.Duration{}, first: map[string]time.Duration{},
		precision: map[string]string{}, loss0: map[string]string{}, peak: map[string]string{}, smi: map[string]string{}}
	var makers []maker
	gomlx := func(label, cfg string) {
		r.precision[label] = gomlxPrecision(label, w, o)
		makers = append(makers, maker{label, func() (contender, error) { return newGomlxStep(label, cfg, w, 42) }})
	}
	for _, cfg := range strings.Split(o.latheCfg, ";") {
		if cfg != "" { // -lathe "" leaves lathe out (a profile of the peers alone)
			gomlx(cfg, cfg)
		}
	}
	if o.xlaCfg != "" {
		gomlx(o.xlaCfg, o.xlaPlugin)
	}
	peers := peerMakers(w, o, &r)
	makers = append(makers, peers...)
	if o.goRounds > 0 {
		gomlx(o.goCfg, o.goCfg)
	}
	// make returns m's contender; a Python peer that fails to start is left out with a message.
	mk := func(m maker) (contender, error) {
		c, err := m.make()
		if err != nil {
			for _, p := range peers {
				if p.label == m.label {
					fmt.Fprintf(os.Stderr, "\ngomlx-vs-jax: %s left out: %v\n", m.label, err)
					return nil, nil
				}
			}
			return nil, fmt.Errorf("%s: %w", m.label, err)
		}
		return c, nil
	}
	fmt.Printf("%s:", w.Name)
	if o.serial {
		for _, m := range makers {
			c, err := mk(m)
			if err != nil {
				return r, err
			}
			if c == nil {
				continue
			}
			err = runRounds(&r, []contender{c}, o)
			c.close()
			if err != nil {
				return r, err
			}
			// each contender's figures as it finishes: a run cut short keeps the ones done
			n := r.names[len(r.names)-1]
			fmt.Fprintf(os.Stderr, "\n%s %s: median %.2f ms, first %.2f ms, loss0 %s, peak %s, smi %s\n", w.Name, n,
				float64(r.medians[n])/1e6, float64(r.first[n])/1e6, r.loss0[n], r.peak[n], r.smi[n])
		}
	} else {
		var cs []contender
		defer func() {
			for _, c := range cs {
				c.close()
			}
		}()
		for _, m := range makers {
			c, err := mk(m)
			if err != nil {
				return r, err
			}
			if c != nil {
				cs = append(cs, c)
			}
		}
		if err := runRounds(&r, cs, o); err != nil {
			return r, err
		}
	}
	fmt.Println()
	if len(r.names) == 0 {
		return r, fmt.Errorf("no contender")
	}
	return r, nil
}

// runRounds times cs together, round by round, and adds their rows to r.
func runRounds(r *result, cs []contender, o *options) error {
	times := map[string][]time.Duration{}
	for round := -1; round < o.warmup+o.rounds; round++ {
		if round == o.warmup { // the peak memory of the timed steps
			for _, c := range cs {
				c.resetPeak()
			}
		}
		// Each round starts one contender later: a contender whose thread pool keeps spinning
		// after its step (JAX's, XLA's) slows whichever runs next, and a fixed order would put
		// the same one there every round.
		order := cs
		if round > 0 {
			k := round % len(cs)
			order = append(append([]contender{}, cs[k:]...), cs[:k]...)
		}
		for _, c := range order {
			isGo := c.name() == o.goCfg
			if isGo && round >= o.warmup+o.goRounds {
				continue
			}
			if isGo && round >= 0 && round < o.warmup && o.warmup > 1 {
				continue // the go backend warms up on its first step only
			}
			d, err := c.step()
			if err != nil {
				return fmt.Errorf("%s: %w", c.name(), err)
			}
			switch {
			case round < 0:
				if _, ok := r.first[c.name()]; !ok {
					r.first[c.name()] = d
				}
			case round >= o.warmup:
				times[c.name()] = append(times[c.name()], d)
			}
		}
		fmt.Print(".")
	}
	for _, c := range cs {
		n := c.name()
		r.names = append(r.names, n)
		r.medians[n] = steps.Median(times[n])
		r.loss0[n] = "-"
		if l, ok := c.loss0(); ok {
			r.loss0[n] = fmt.Sprintf("%.4f", l)
		}
		r.peak[n] = c.peak()
		if o.serial && o.gpu {
			r.smi[n] = smiUsed(c.pid())
		}
	}
	return nil
}

// smiUsed is the GPU memory that nvidia-smi sees process pid use now ("n/a" without nvidia-smi).
// After a contender's timed steps, with the contender alone in its process (-serial, the Python
// peers in their own), that is its allocator's pool: its whole-process peak for allocators that
// keep what they took (lathe's, XLA's BFC, PyTorch's caching allocator), plus the CUDA context.
func smiUsed(pid int) string {
	out, err := exec.Command("nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits").Output()
	if err != nil {
		return "n/a"
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(line, ",")
		if len(f) == 2 && strings.TrimSpace(f[0]) == strconv.Itoa(pid) {
			if mib, err := strconv.ParseInt(strings.TrimSpace(f[1]), 10, 64); err == nil {
				return bytesStr(mib << 20)
			}
		}
	}
	return "n/a"
}

func printTable(results []result, o *options) {
	lm, smi := false, false
	for _, r := range results {
		lm = lm || r.w.Tokens > 0
		smi = smi || len(r.smi) > 0
	}
	fmt.Println()
	head := fmt.Sprintf("%-48s %-28s %-13s %10s %10s %9s %8s", "workload", "contender", "precision", "median ms", "first ms", "vs first", "loss0")
	if lm {
		head += fmt.Sprintf(" %10s %6s %18s", "tokens/s", "MFU", "peak memory")
	}
	if smi {
		head += fmt.Sprintf(" %12s", "nvidia-smi")
	}
	fmt.Println(head)
	fmt.Println(strings.Repeat("-", len(head)))
	for _, r := range results {
		base := r.medians[r.names[0]]
		for _, n := range r.names {
			ratio := float64(r.medians[n]) / float64(base)
			line := fmt.Sprintf("%-48s %-28s %-13s %10s %10s %8.2fx %8s", r.workload, n, r.precision[n], ms(r.medians[n]), ms(r.first[n]), ratio, r.loss0[n])
			if lm {
				tps, mfu := "-", "-"
				if sec := r.medians[n].Seconds(); r.w.Tokens > 0 && sec > 0 {
					tps = fmt.Sprintf("%.0f", float64(r.w.Tokens)/sec)
					if o.gpu {
						peak := o.peakTF32
						if r.w.BF16 {
							peak = o.peakBF16
						}
						mfu = fmt.Sprintf("%.1f%%", 100*r.w.FLOPs/sec/peak)
					}
				}
				line += fmt.Sprintf(" %10s %6s %18s", tps, mfu, r.peak[n])
			}
			if smi {
				line += fmt.Sprintf(" %12s", r.smi[n])
			}
			fmt.Println(line)
		}
		for _, note := range r.notes {
			fmt.Printf("%-48s %s\n", r.workload, note)
		}
	}
	fmt.Println("vs first: the contender's median step time / the first contender's (above 1: the first is faster)")
	if lm {
		fmt.Println("loss0: the first step's loss (ln vocabulary at a uniform guess); MFU: model FLOPs (6·N·T + 12·L·S·D·T) / step time / peak (-peak-tflops; TF32's for float32 rows); peak memory over the timed steps")
	}
	if smi {
		fmt.Println("nvidia-smi: the GPU memory of the contender's process after its timed steps, the contender alone in it (-serial): its allocator's pool and the CUDA context")
	}
}
