// Command gomlx-vs-jax times three GoMLX training steps on lathe:cpu, on GoMLX's own `go`
// backend, on GoMLX's `xla` backend (xla:cpu, when its PJRT plugin is installed) and, as the
// outside reference, the same steps written in JAX on its CPU backend: all interleaved in one run
// (round after round, one step of each contender in turn, each round starting one contender
// later), so that a noisy machine slows them alike. It prints median step times and ratios, and draws the ratios as an SVG chart.
//
// Workloads (SGD, the loss read back after every step):
//   - MLP 784-1024-1024-10 (ReLU), batch 256, softmax cross-entropy;
//   - CNN: conv 3x3 3->32, ReLU, 2x2 max-pool, conv 3x3 32->64, ReLU, spatial mean, dense 64->10,
//     on 28x28x3 images, batch 32 and 128;
//   - transformer block d768, 12 heads (pre-norm: x + MHA(LN x), then + FFN 3072 with GELU),
//     batch 1, sequence 128 and 512, mean squared error.
//
// Setup: bench/cmd/gomlx-vs-jax/setup.sh installs JAX (and, with LATHE_BENCH_XLA=1, XLA's CPU
// plugin) under .deps/. Run from the repository root:
//
//	go run ./bench/cmd/gomlx-vs-jax -rounds 15 -svg docs/gomlx-vs-jax.svg
package main

import (
	"bufio"
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
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/lathe-dev/lathe/bench/internal/steps"
	_ "github.com/lathe-dev/lathe/compute/lathe" // registers "lathe"
)

// contender runs one workload's step and returns its duration.
type contender interface {
	name() string
	step() (time.Duration, error)
	close()
}

// gomlxStep is a workload's training step on one GoMLX backend: the loss, SGD's update of the
// variables (kept on the backend between steps), and the loss read back.
type gomlxStep struct {
	label, backendName string
	backend            compute.Backend
	exec               *model.Exec
	x, y               *tensors.Tensor
}

func newGomlxStep(label, backendName string, w steps.Workload, seed uint64) (*gomlxStep, error) {
	backend, err := compute.NewWithConfig(backendName)
	if err != nil {
		return nil, err
	}
	store := model.NewStore()
	store.SetParam(model.ParamInitialSeed, int64(seed))
	opt := optimizer.StochasticGradientDescent().WithLearningRate(0.001).Done()
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
	d, err := steps.Run(s.exec, s.x, s.y)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.backendName, err)
	}
	return d, nil
}

func (s *gomlxStep) close() {
	s.exec.Finalize()
	s.backend.Finalize()
}

// jaxServer is jax_steps.py, a child process that builds a workload's jitted step on request and
// times single steps: "init SPEC" answers "ok FIRST_SECONDS", "step" answers "SECONDS".
type jaxServer struct {
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Scanner
}

func startJax(python, script string) (*jaxServer, error) {
	cmd := exec.Command(python, script)
	cmd.Stderr = os.Stderr
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
	s := &jaxServer{cmd: cmd, in: bufio.NewWriter(stdin), out: bufio.NewScanner(stdout)}
	line, err := s.ask("version")
	if err != nil {
		return nil, err
	}
	fmt.Printf("jax:   %s\n", line)
	return s, nil
}

func (s *jaxServer) ask(cmd string) (string, error) {
	if _, err := s.in.WriteString(cmd + "\n"); err != nil {
		return "", err
	}
	if err := s.in.Flush(); err != nil {
		return "", err
	}
	if !s.out.Scan() {
		return "", fmt.Errorf("jax_steps.py ended (command %q)", cmd)
	}
	line := s.out.Text()
	if strings.HasPrefix(line, "error") {
		return "", fmt.Errorf("jax_steps.py: %s", line)
	}
	return line, nil
}

func (s *jaxServer) stop() {
	_, _ = s.in.WriteString("quit\n")
	_ = s.in.Flush()
	_ = s.cmd.Wait()
}

type jaxStep struct{ srv *jaxServer }

func (j jaxStep) name() string { return "jax" }
func (j jaxStep) step() (time.Duration, error) {
	line, err := j.srv.ask("step")
	if err != nil {
		return 0, err
	}
	sec, err := strconv.ParseFloat(strings.TrimSpace(line), 64)
	return time.Duration(sec * float64(time.Second)), err
}
func (j jaxStep) close() {}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

// result of one workload: median step time per contender ("" when it did not run).
type result struct {
	workload string
	names    []string
	medians  map[string]time.Duration
	first    map[string]time.Duration
}

func main() {
	rounds := flag.Int("rounds", 15, "timed rounds (one step of each contender per round)")
	warmup := flag.Int("warmup", 3, "untimed rounds first (after the first step, which compiles)")
	goRounds := flag.Int("go-rounds", 3, "timed rounds for GoMLX's go backend (10-20x slower; 0 leaves it out)")
	latheCfg := flag.String("lathe", "lathe:cpu,threads=2", `lathe backend configuration (several: separated by ";", the first is the base of the ratios)`)
	gpu := flag.Bool("gpu", false, "the GPU workloads (MLP b256, CNN b128, transformer b8 s512) instead of the CPU ones")
	goCfg := flag.String("go", "go", "GoMLX go backend configuration")
	xlaCfg := flag.String("xla", "xla:cpu", `GoMLX xla backend configuration ("" leaves it out)`)
	python := flag.String("python", ".deps/jax/bin/python", `Python with JAX ("" leaves JAX out)`)
	only := flag.String("only", "", "comma-separated substrings: run only workloads whose name has one")
	svgPath := flag.String("svg", "", "write the ratio chart here (SVG)")
	flag.Parse()

	workloads := []steps.Workload{steps.MLP(256), steps.CNN(32), steps.CNN(128), steps.Transformer(1, 128), steps.Transformer(1, 512)}
	if *gpu {
		workloads = []steps.Workload{steps.MLP(256), steps.CNN(128), steps.Transformer(8, 512)}
	}
	var jax *jaxServer
	if *python != "" {
		script := filepath.Join("bench", "cmd", "gomlx-vs-jax", "jax_steps.py")
		var err error
		if jax, err = startJax(*python, script); err != nil {
			fmt.Fprintf(os.Stderr, "gomlx-vs-jax: JAX left out: %v (run bench/cmd/gomlx-vs-jax/setup.sh)\n", err)
			jax = nil
		} else {
			defer jax.stop()
		}
	}
	xlaPlugin := ""
	if *xlaCfg != "" {
		var err error
		if xlaPlugin, err = xlaConfig(*xlaCfg); err != nil {
			fmt.Printf("xla:   left out: %v\n", err)
			*xlaCfg = ""
		}
	}
	var results []result
	for _, w := range workloads {
		if *only != "" && !matchAny(w.Name, *only) {
			continue
		}
		r, err := runWorkload(w, *latheCfg, *goCfg, *xlaCfg, xlaPlugin, jax, *rounds, *warmup, *goRounds)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gomlx-vs-jax: %s: %+v\n", w.Name, err)
			os.Exit(1)
		}
		results = append(results, r)
	}
	printTable(results)
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

func runWorkload(w steps.Workload, latheCfg, goCfg, xlaCfg, xlaPlugin string, jax *jaxServer, rounds, warmup, goRounds int) (result, error) {
	r := result{workload: w.Name, medians: map[string]time.Duration{}, first: map[string]time.Duration{}}
	var cs []contender
	defer func() {
		for _, c := range cs {
			c.close()
		}
	}()
	add := func(label, cfg string) error {
		s, err := newGomlxStep(label, cfg, w, 42)
		if err != nil {
			return err
		}
		cs = append(cs, s)
		return nil
	}
	for _, cfg := range strings.Split(latheCfg, ";") {
		if cfg == "" { // -lathe "" leaves lathe out (a profile of the peers alone)
			continue
		}
		if err := add(cfg, cfg); err != nil {
			return r, err
		}
	}
	if xlaCfg != "" {
		if err := add(xlaCfg, xlaPlugin); err != nil {
			return r, err
		}
	}
	if jax != nil {
		line, err := jax.ask("init " + w.JaxSpec)
		if err != nil {
			return r, err
		}
		cs = append(cs, jaxStep{jax})
		if f, err := strconv.ParseFloat(strings.TrimPrefix(line, "ok "), 64); err == nil {
			r.first["jax"] = time.Duration(f * float64(time.Second))
		}
	}
	if goRounds > 0 {
		if err := add(goCfg, goCfg); err != nil {
			return r, err
		}
	}
	times := map[string][]time.Duration{}
	fmt.Printf("%s:", w.Name)
	for round := -1; round < warmup+rounds; round++ {
		// Each round starts one contender later: a contender whose thread pool keeps spinning
		// after its step (JAX's, XLA's) slows whichever runs next, and a fixed order would put
		// the same one there every round.
		order := cs
		if round > 0 {
			k := round % len(cs)
			order = append(append([]contender{}, cs[k:]...), cs[:k]...)
		}
		for _, c := range order {
			isGo := c.name() == goCfg
			if isGo && round >= warmup+goRounds {
				continue
			}
			if isGo && round >= 0 && round < warmup && warmup > 1 {
				continue // the go backend warms up on its first step only
			}
			d, err := c.step()
			if err != nil {
				return r, fmt.Errorf("%s: %w", c.name(), err)
			}
			switch {
			case round < 0:
				if _, ok := r.first[c.name()]; !ok {
					r.first[c.name()] = d
				}
			case round >= warmup:
				times[c.name()] = append(times[c.name()], d)
			}
		}
		fmt.Print(".")
	}
	fmt.Println()
	for _, c := range cs {
		r.names = append(r.names, c.name())
		r.medians[c.name()] = steps.Median(times[c.name()])
	}
	return r, nil
}

func printTable(results []result) {
	fmt.Println()
	fmt.Printf("%-30s %-22s %10s %10s %12s\n", "workload", "contender", "median ms", "first ms", "vs lathe")
	fmt.Println(strings.Repeat("-", 88))
	for _, r := range results {
		base := r.medians[r.names[0]]
		for _, n := range r.names {
			ratio := float64(r.medians[n]) / float64(base)
			fmt.Printf("%-30s %-22s %10s %10s %11.2fx\n", r.workload, n, ms(r.medians[n]), ms(r.first[n]), ratio)
		}
	}
	fmt.Println("vs lathe: the contender's median step time / lathe's (above 1: lathe is faster)")
}
