// Command cuda-bench times, in one run on a GPU machine, the graphs of issue "lathe:cuda at the
// H200's limits" on lathe:cuda and on GoMLX's own xla:cuda (the same GoMLX graphs, interleaved
// round by round), and the same computations in JAX and PyTorch (peers.py, a child process run
// first in the same call), and prints medians, bandwidths and ratios:
//
//   - the chain relu(1.5x+0.5)·x over 2^24 and 2^26 Float32, with Relu as GoMLX's activation.Relu
//     builds it (Max against a broadcast zero) and with a scalar zero;
//   - softmax over the last axis of 512×1024×1024, a row sum of 8192², a layer norm of
//     16384×1024 (mean, centred variance, scale);
//   - the floor: a one-op graph on 4 floats through GoMLX's Exec.Call and Value(), and through
//     the compute API's Execute (queued; with ToFlatData);
//   - the CNN's second convolution (3x3, 32->64 channels, batch 128 of 14x14) and the
//     transformer's attention (B8 S512 H12 D64, attention.Core: the fused op where the backend
//     has it), forward and forward with gradients, against PyTorch's conv2d (cuDNN) and
//     scaled_dot_product_attention, exact Float32 and TF32;
//   - with -first: the first training step of the MLP, CNN and transformer workloads
//     (bench/internal/steps) in a fresh process, lathe with an empty and with a warm kernel
//     cache, xla:cuda with its own.
//
// Bandwidths count each input read once and each output written once. The training steps are
// gomlx-vs-jax's (-gpu). Run from the repository root on the GPU machine:
//
//	cuda-bench -xla xla:cuda -python python3 -first
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/go-xla/compute/xla"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/ml/layers/activation"
	"github.com/gomlx/gomlx/ml/layers/attention"
	"github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/nn"
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/lathe-dev/lathe/bench/internal/steps"
	_ "github.com/lathe-dev/lathe/compute/lathe" // registers "lathe"
)

// work is one computation: its graph, its input's dimensions and the bytes it must move.
type work struct {
	name  string
	dims  []int
	bytes float64 // per call; 0: a latency, not a bandwidth
	fn    func(x *Node) *Node
	calls int // per timed sample
	floor floorMode
}

// floorMode says how a latency work is timed: through GoMLX's Exec, or through the compute
// API's Executable.Execute directly (x+1 built with the backend's own builder).
type floorMode int

const (
	viaExec        floorMode = iota // Exec.Call, and Value() of each result when bytes is 0
	executeQueued                   // Execute + Finalize, the last result read
	executeAndRead                  // Execute + ToFlatData + Finalize
)

func chain(relu func(*Node) *Node) func(*Node) *Node {
	return func(x *Node) *Node { return Mul(relu(AddScalar(MulScalar(x, 1.5), 0.5)), x) }
}

// convKernel is a fixed 3x3x32x64 HWIO kernel built in the graph (a few µs of the call).
func convKernel(g *Graph) *Node {
	return MulScalar(Sin(Iota(g, shapes.Make(dtypes.Float32, 3*3*32*64), 0)), 0.05)
}

func convFwd(x *Node) *Node {
	return Convolve(x, Reshape(convKernel(x.Graph()), 3, 3, 32, 64)).PadSame().Done()
}

// convGrads: the forward and both gradients of sum(y²)/2 (the output gradient is y itself), the
// kernel gradient returned beside the input's as one flat output.
func convGrads(x *Node) *Node {
	k := Reshape(convKernel(x.Graph()), 3, 3, 32, 64)
	y := Convolve(x, k).PadSame().Done()
	g := Gradient(MulScalar(ReduceAllSum(Square(y)), 0.5), x, k)
	return Concatenate([]*Node{Reshape(g[0], -1), Reshape(g[1], -1)}, 0)
}

// qkv splits x [3, B, S, H, D] into query, key and value in GoMLX's BSHD layout.
func qkv(x *Node) (q, k, v *Node) {
	d := x.Shape().Dimensions[1:]
	part := func(i int) *Node { return Reshape(Slice(x, AxisElem(i)), d...) }
	return part(0), part(1), part(2)
}

func attnFwd(x *Node) *Node {
	q, k, v := qkv(x)
	out, _ := attention.Core(q, k, v, attention.LayoutBSHD, attention.CoreOptions{})
	return out
}

// attnGrads: the forward and the gradients of sum(out²)/2 with respect to the packed q, k, v.
func attnGrads(x *Node) *Node {
	q, k, v := qkv(x)
	out, _ := attention.Core(q, k, v, attention.LayoutBSHD, attention.CoreOptions{})
	return Gradient(MulScalar(ReduceAllSum(Square(out)), 0.5), x)[0]
}

// attnBF16 and attnGradsBF16: the same in BFloat16 (the packed input converted in the graph; the
// loss summed in Float32).
func attnBF16(x *Node) *Node { return attnFwd(ConvertDType(x, dtypes.BFloat16)) }

func attnGradsBF16(x *Node) *Node {
	q, k, v := qkv(ConvertDType(x, dtypes.BFloat16))
	out, _ := attention.Core(q, k, v, attention.LayoutBSHD, attention.CoreOptions{})
	return Gradient(MulScalar(ReduceAllSum(Square(ConvertDType(out, dtypes.Float32))), 0.5), x)[0]
}

func works(quick bool) []work {
	scalarRelu := func(x *Node) *Node { return Max(x, Scalar(x.Graph(), x.DType(), 0)) }
	layerNorm := func(x *Node) *Node {
		mean := ReduceAndKeep(x, ReduceMean, -1)
		c := Sub(x, mean)
		v := ReduceAndKeep(Square(c), ReduceMean, -1)
		return Mul(c, Rsqrt(AddScalar(v, 1e-5)))
	}
	softmaxOps := func(x *Node) *Node { // as GoMLX's graph package computes softmax without the fused op
		e := Exp(Sub(x, StopGradient(ReduceAndKeep(x, ReduceMax, -1))))
		return Div(e, ReduceAndKeep(e, ReduceSum, -1))
	}
	ws := []work{
		{"chain relu(1.5x+0.5)x, broadcast zero, 2^24", []int{1 << 24}, 8 << 24, chain(activation.Relu), 20, viaExec},
		{"chain, scalar zero, 2^24", []int{1 << 24}, 8 << 24, chain(scalarRelu), 20, viaExec},
		{"chain relu(1.5x+0.5)x, broadcast zero, 2^26", []int{1 << 26}, 8 << 26, chain(activation.Relu), 10, viaExec},
		{"chain, scalar zero, 2^26", []int{1 << 26}, 8 << 26, chain(scalarRelu), 10, viaExec},
		{"softmax 512x1024x1024 (last axis)", []int{512, 1024, 1024}, 8 << 29, func(x *Node) *Node { return Softmax(x, -1) }, 3, viaExec},
		{"softmax 512x1024x1024 (last axis), GoMLX ops", []int{512, 1024, 1024}, 8 << 29, softmaxOps, 3, viaExec},
		{"row sum 8192x8192", []int{8192, 8192}, 4 << 26, func(x *Node) *Node { return ReduceSum(x, -1) }, 10, viaExec},
		{"column sum 32768x768 (bias gradient)", []int{32768, 768}, 4 * 32768 * 768, func(x *Node) *Node { return ReduceSum(x, 0) }, 20, viaExec},
		{"column sum 401408x32 (conv bias gradient)", []int{401408, 32}, 4 * 401408 * 32, func(x *Node) *Node { return ReduceSum(x, 0) }, 20, viaExec},
		{"layer norm 16384x1024", []int{16384, 1024}, 8 << 24, layerNorm, 20, viaExec},
		{"layer norm 16384x1024, nn.LayerNorm", []int{16384, 1024}, 8 << 24,
			func(x *Node) *Node { return nn.LayerNorm(x, []int{-1}, 1e-5, nil, nil, nil) }, 20, viaExec},
		{"floor: x+1 on 4 floats, Call + Value", []int{4}, 0, func(x *Node) *Node { return AddScalar(x, 1) }, 200, viaExec},
		{"floor: x+1 on 4 floats, Execute (queued)", []int{4}, 0, nil, 200, executeQueued},
		{"floor: x+1 on 4 floats, Execute + ToFlatData", []int{4}, 0, nil, 200, executeAndRead},
		// the layers' own shapes, against cuDNN (torch's conv2d) and torch's SDPA (bytes: input and
		// results once, so that a sample waits by reading one element rather than the whole result)
		{"conv 3x3 32->64 b128 14x14, forward", []int{128, 14, 14, 32}, 4 * 128 * 14 * 14 * (32 + 64), convFwd, 20, viaExec},
		{"conv 3x3 32->64 b128 14x14, fwd + both grads", []int{128, 14, 14, 32}, 4 * (2*128*14*14*32 + 3*3*32*64), convGrads, 20, viaExec},
		{"attention B8 S512 H12 D64, forward", []int{3, 8, 512, 12, 64}, 4 * 4 * 8 * 512 * 12 * 64, attnFwd, 10, viaExec},
		{"attention B8 S512 H12 D64, fwd + grads", []int{3, 8, 512, 12, 64}, 4 * 6 * 8 * 512 * 12 * 64, attnGrads, 10, viaExec},
		{"attention BFloat16 B8 S512 H12 D64, forward", []int{3, 8, 512, 12, 64}, 2 * 4 * 8 * 512 * 12 * 64, attnBF16, 10, viaExec},
		{"attention BFloat16 B8 S512 H12 D64, fwd + grads", []int{3, 8, 512, 12, 64}, 2 * 6 * 8 * 512 * 12 * 64, attnGradsBF16, 10, viaExec},
	}
	if quick {
		for i := range ws {
			if ws[i].bytes > 8<<26 {
				ws[i].dims = []int{64, 1024, 1024}
				ws[i].bytes /= 8
			}
		}
	}
	return ws
}

type contender struct {
	name string
	exec *Exec
	sync *Exec // reads one element of a result: waits for the work before it
	x    *tensors.Tensor
	raw  compute.Executable // the floor's x+1 through the compute API
	in   compute.Buffer
}

func newContender(cfg string, w work, x *tensors.Tensor) (*contender, error) {
	backend, err := compute.NewWithConfig(cfg)
	if err != nil {
		return nil, err
	}
	if w.floor != viaExec {
		return rawContender(backend, cfg, x)
	}
	e, err := NewExec(backend, w.fn)
	if err != nil {
		return nil, err
	}
	s, err := NewExec(backend, func(y *Node) *Node {
		return Slice(Reshape(y, y.Shape().Size()), AxisRange(0, 1))
	})
	if err != nil {
		return nil, err
	}
	return &contender{name: cfg, exec: e, sync: s, x: x}, nil
}

// rawContender compiles x+1 with the backend's builder, for the floor through Execute.
func rawContender(backend compute.Backend, cfg string, x *tensors.Tensor) (*contender, error) {
	bld := backend.Builder("floor")
	f := bld.Main()
	p, err := f.Parameter("x", x.Shape(), nil)
	if err != nil {
		return nil, err
	}
	one, err := f.Constant([]float32{1}, 1)
	if err == nil {
		one, err = f.BroadcastInDim(one, x.Shape(), []int{0})
	}
	var y compute.Value
	if err == nil {
		y, err = f.Add(p, one)
	}
	if err == nil {
		err = f.Return([]compute.Value{y}, nil)
	}
	var e compute.Executable
	if err == nil {
		e, err = bld.Compile()
	}
	if err != nil {
		return nil, err
	}
	in, err := backend.BufferFromFlatData(0, tensors.MustCopyFlatData[float32](x), x.Shape())
	if err != nil {
		return nil, err
	}
	return &contender{name: cfg, x: x, raw: e, in: in}, nil
}

// sampleRaw times the floor through Execute: queued (the last result read, so that the work
// is done), or each result read back.
func (c *contender) sampleRaw(w work) (time.Duration, error) {
	flat := make([]float32, 4)
	t0 := time.Now()
	var last compute.Buffer
	for i := 0; i < w.calls; i++ {
		out, err := c.raw.Execute([]compute.Buffer{c.in}, nil, 0)
		if err != nil {
			return 0, err
		}
		if w.floor == executeAndRead {
			if err := out[0].ToFlatData(flat); err != nil {
				return 0, err
			}
		}
		if last != nil {
			_ = last.Finalize()
		}
		last = out[0]
	}
	if err := last.ToFlatData(flat); err != nil {
		return 0, err
	}
	_ = last.Finalize()
	if flat[0] != c.x.Value().([]float32)[0]+1 {
		return 0, fmt.Errorf("floor: got %v", flat)
	}
	return time.Since(t0) / time.Duration(w.calls), nil
}

// sample times w.calls calls (their results freed as they come) and waits for the last one;
// for a latency (bytes 0) each result is read back.
func (c *contender) sample(w work) (time.Duration, error) {
	if c.raw != nil {
		return c.sampleRaw(w)
	}
	t0 := time.Now()
	var last *tensors.Tensor
	for i := 0; i < w.calls; i++ {
		out, err := c.exec.Call(c.x)
		if err != nil {
			return 0, err
		}
		if last != nil {
			last.FinalizeAll()
		}
		last = out[0]
		if w.bytes == 0 {
			_ = last.Value()
		}
	}
	if w.bytes > 0 {
		one, err := c.sync.Call(last)
		if err != nil {
			return 0, err
		}
		_ = one[0].Value()
		one[0].FinalizeAll()
	}
	last.FinalizeAll()
	return time.Since(t0) / time.Duration(w.calls), nil
}

func median(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := append([]time.Duration{}, v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// peers runs peers.py (JAX and PyTorch) and returns its medians by "workload|contender".
func peers(python string, quick bool, only string) map[string]time.Duration {
	res := map[string]time.Duration{}
	if python == "" {
		return res
	}
	args := []string{"bench/cmd/cuda-bench/peers.py"}
	if quick {
		args = append(args, "quick")
	}
	if only != "" {
		args = append(args, "only="+only)
	}
	cmd := exec.Command(python, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Printf("peers: left out: %v\n", err)
		return res
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) == 3 && f[0] != "note" {
			if sec, err := strconv.ParseFloat(f[2], 64); err == nil {
				res[f[0]+"|"+f[1]] = time.Duration(sec * float64(time.Second))
			}
		} else {
			fmt.Println("peers:", sc.Text())
		}
	}
	if err := cmd.Wait(); err != nil {
		fmt.Printf("peers: %v\n", err)
	}
	return res
}

// first runs one training step of a workload in this process and prints its time (the -child mode).
func first(cfg, name string) error {
	var w steps.Workload
	switch name {
	case "mlp":
		w = steps.MLP(256)
	case "cnn":
		w = steps.CNN(128)
	default:
		w = steps.Transformer(8, 512)
	}
	t0 := time.Now()
	backend, err := compute.NewWithConfig(cfg)
	if err != nil {
		return err
	}
	tBackend := time.Since(t0) // context, libraries: what a first step pays before any graph
	store := model.NewStore()
	opt := optimizer.StochasticGradientDescent().WithLearningRate(0.001).Done()
	e, err := model.NewExec(backend, store, func(scope *model.Scope, x, y *Node) *Node {
		l := w.Loss(scope, x, y)
		opt.UpdateGraph(scope, x.Graph(), l)
		return l
	})
	if err != nil {
		return err
	}
	x, y := w.Inputs(rand.New(rand.NewPCG(1, 2)))
	if _, err := steps.Run(e, x, y); err != nil {
		return err
	}
	fmt.Printf("%.3f %.3f\n", tBackend.Seconds(), time.Since(t0).Seconds())
	return nil
}

func firstCalls(latheCfg, xlaCfg string) {
	self, _ := os.Executable()
	dir, err := os.MkdirTemp("", "lathe-cuda-cache")
	if err != nil {
		fmt.Println("first calls:", err)
		return
	}
	defer os.RemoveAll(dir)
	run := func(cfg, w string, env ...string) string {
		cmd := exec.Command(self, "-child", cfg+"|"+w)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil {
			return "error: " + lines[len(lines)-1]
		}
		// "backend total": the total, then the backend's creation in parentheses
		f := strings.Fields(lines[len(lines)-1])
		if len(f) != 2 {
			return "error: " + lines[len(lines)-1]
		}
		return f[1] + " s (" + f[0] + ")"
	}
	fmt.Printf("\n%-34s %16s %16s %16s %10s %10s\n", "first step (build+compile+run)", "lathe empty", "lathe warm", "xla:cuda", "empty/xla", "warm/xla")
	for _, w := range []string{"mlp", "cnn", "transformer"} {
		empty := run(latheCfg, w, "LATHE_CUDA_CACHE_DIR="+dir+"/"+w)
		warm := run(latheCfg, w, "LATHE_CUDA_CACHE_DIR="+dir+"/"+w)
		x := "-"
		if xlaCfg != "" {
			x = run(xlaCfg, w)
		}
		ratio := func(a string) string {
			fa, e1 := strconv.ParseFloat(strings.Fields(a + " -")[0], 64)
			fx, e2 := strconv.ParseFloat(strings.Fields(x + " -")[0], 64)
			if e1 != nil || e2 != nil || fx == 0 {
				return "-"
			}
			return fmt.Sprintf("%.3f", fa/fx)
		}
		fmt.Printf("%-34s %16s %16s %16s %10s %10s\n", w, empty, warm, x, ratio(empty), ratio(warm))
	}
	fmt.Println("(in parentheses: seconds of it spent creating the backend: CUDA context, libraries)")
}

func main() {
	latheCfg := flag.String("lathe", "lathe:cuda", `lathe configurations, separated by ";" (the first is the base of the ratios)`)
	xlaCfg := flag.String("xla", "xla:cuda", `GoMLX's xla backend ("" leaves it out; PJRT_PLUGIN_LIBRARY_PATH names the plugin's folder)`)
	python := flag.String("python", "", "Python with JAX and PyTorch for peers.py (\"\" leaves them out)")
	rounds := flag.Int("rounds", 9, "timed rounds")
	quick := flag.Bool("quick", false, "smaller softmax (for a machine without much memory)")
	doFirst := flag.Bool("first", false, "also time first calls in fresh processes")
	only := flag.String("only", "", "comma-separated substrings of workload names")
	child := flag.String("child", "", "internal: CONFIG|WORKLOAD, time one first step")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the timed works to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Println("cpuprofile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *xlaCfg != "" {
		xla.EnableAutoInstall(false)
		_ = os.Setenv(xla.NoAutoInstallEnv, "1")
	}
	if *child != "" {
		p := strings.SplitN(*child, "|", 2)
		if err := first(p[0], p[1]); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		return
	}
	peer := peers(*python, *quick, *only)
	cfgs := strings.Split(*latheCfg, ";")
	if *xlaCfg != "" {
		cfgs = append(cfgs, *xlaCfg)
	}
	fmt.Printf("\n%-44s %-22s %12s %10s %10s\n", "work", "contender", "median", "GB/s", "vs lathe")
	fmt.Println(strings.Repeat("-", 102))
	for _, w := range works(*quick) {
		if *only != "" && !matchAny(w.name, *only) {
			continue
		}
		n := 1
		for _, d := range w.dims {
			n *= d
		}
		data := make([]float32, n)
		rng := rand.New(rand.NewPCG(7, uint64(n)))
		for i := range data {
			data[i] = float32(rng.NormFloat64())
		}
		var cs []*contender
		for _, cfg := range cfgs { // a tensor of its own for each backend (GoMLX keeps one device copy)
			c, err := newContender(cfg, w, tensors.FromFlatDataAndDimensions(data, w.dims...))
			if err != nil {
				fmt.Printf("%-44s %-22s error: %v\n", w.name, cfg, err)
				continue
			}
			cs = append(cs, c)
		}
		times := map[string][]time.Duration{}
		failed := map[string]bool{}
		for round := -2; round < *rounds; round++ { // two warm-up rounds (compiles, caches)
			for k := range cs {
				c := cs[(k+max(round, 0))%len(cs)]
				if failed[c.name] {
					continue
				}
				d, err := c.sample(w)
				if err != nil {
					fmt.Printf("%-44s %-22s error: %v\n", w.name, c.name, err)
					failed[c.name] = true
					continue
				}
				if round >= 0 {
					times[c.name] = append(times[c.name], d)
				}
			}
		}
		var base time.Duration
		if len(cs) > 0 {
			base = median(times[cs[0].name])
		}
		row := func(name string, m time.Duration) {
			bw := "-"
			if w.bytes > 0 && m > 0 {
				bw = fmt.Sprintf("%.0f", w.bytes/m.Seconds()/1e9)
			}
			ratio := "-"
			if base > 0 {
				ratio = fmt.Sprintf("%.2fx", float64(m)/float64(base))
			}
			fmt.Printf("%-44s %-22s %12s %10s %10s\n", w.name, name, m.Round(100*time.Nanosecond), bw, ratio)
		}
		for _, c := range cs {
			row(c.name, median(times[c.name]))
		}
		key := strings.SplitN(w.name, ",", 2)[0]
		if strings.HasPrefix(w.name, "chain") {
			key = "chain " + w.name[len(w.name)-4:]
		}
		for _, p := range []string{"jax", "jax queued", "torch eager", "torch compiled", "torch exact", "torch tf32", "torch bf16"} {
			if m, ok := peer[w.name+"|"+p]; ok { // the peers' own name for it, else its family's
				row(p, m)
			} else if m, ok := peer[key+"|"+p]; ok {
				row(p, m)
			}
		}
		for _, c := range cs {
			c.x.FinalizeAll()
			if c.raw != nil {
				_ = c.in.Finalize()
				c.raw.Finalize()
			}
		}
	}
	fmt.Println("vs lathe: the contender's median time / lathe's first configuration's (above 1: lathe is faster)")
	fmt.Println("jax: jit, each call waited for (block_until_ready); jax queued: calls queued, the last waited for;")
	fmt.Println("torch: CUDA events around the calls; its products as labelled (exact, tf32; PyTorch's own defaults: exact matmuls, TF32 cuDNN convolutions);")
	fmt.Println("JAX and xla:cuda multiply float32 in TF32 by default; lathe:cuda in exact Float32 unless tf32=1")
	if *doFirst {
		firstCalls(cfgs[0], *xlaCfg)
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
