// Command sharding-bench shows lathe's partitioning of GoMLX AutoSharding programs
// (docs/ARCHITECTURE.md, "Partitioning AutoSharding programs"): GoMLX training steps
// (bench/internal/steps: MLP 784-1024-1024-10, the pre-norm transformer block d768 h12), built as
// a user would with model.Exec, trained with SGD in four layouts over the devices of one backend:
//
//   - single: the plain single-device step (device 0), the reference;
//   - dp: data parallel, the batch split over a mesh axis "data" of N, the weights replicated;
//   - tp: tensor parallel, Megatron-style, over a mesh axis "model" of N: the first Dense of a pair
//     (the MLP's first layer, the attention's query/key/value projections, the FFN's first layer)
//     split along its outputs, the second (the MLP's second layer, the attention's output
//     projection, the FFN's second layer) along its inputs; the batch replicated;
//   - 2x2: both, on a mesh data×model of N/2×2;
//   - sp: spatial, the images' height split over a mesh axis "space" of N, the weights replicated
//     (the CNN only: its convolutions exchange halos with the neighbouring shards).
//
// Every layout is the same GoMLX program (Exec.AutoSharding with the inputs' and the variables'
// sharding specs, variables given specs with Variable.WithShardingSpec); the backend partitions
// it (lathe: src/graph/partition.c; GoMLX's xla backend: XLA with Shardy). Every contender starts
// from the same initial weights (those of the single-device store, copied) and takes the same
// batch each step.
//
// Per layout it prints: the median step time on lathe and on xla (when -xla names it; the two
// alternate step by step in the same rounds) and their ratio; lathe's peak memory per device over
// the timed steps, against the single-device run's; the largest differences of the losses (every
// step) and of the trained weights (gathered, after the last step) from the single-device run on
// the same backend; and what lathe's partitioner did (lathe_executable_get_stats).
//
// lathe:cpu keeps one host-memory pool for the whole process (lathe.MemoryStats.ProcessWide):
// its devices' memory is counted together. Each layout then runs alone (its weights, inputs and
// executables freed before the next), and the per-device figure is the process's peak over the
// timed steps, less what was in use before the layout began, divided by the layout's device
// count: the mean over the devices, which is each device's for these symmetric programs.
//
// xla:cpu gets N host devices from XLA_FLAGS=--xla_force_host_platform_device_count=N, which
// this program adds to the environment before the backend is created; its PJRT plugin comes from
// PJRT_PLUGIN_LIBRARY_PATH, else .deps/pjrt-cpu (bench/cmd/gomlx-vs-jax/setup.sh).
//
//	go build -o /tmp/sb ./bench/cmd/sharding-bench && /tmp/sb
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/distributed"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
	"github.com/gomlx/gomlx/core/tensors/dtensor"
	"github.com/gomlx/gomlx/ml/model"
	"github.com/pkg/errors"

	"github.com/lathe-dev/lathe/bench/internal/steps"
	"github.com/lathe-dev/lathe/bench/internal/xlapeer"
	"github.com/lathe-dev/lathe/compute/lathe"
)

func main() {
	latheCfg := flag.String("lathe", "", `lathe's configuration (default "lathe:cpu,devices=N")`)
	xlaCfg := flag.String("xla", "xla:cpu", `GoMLX's xla backend ("" leaves it out)`)
	n := flag.Int("devices", 4, "devices of the distributed layouts (even, for the 2x2-style mesh N/2 x 2)")
	rounds := flag.Int("rounds", 21, "timed steps per contender")
	warmup := flag.Int("warmup", 3, "untimed steps first (the first compiles)")
	mlpBatch := flag.Int("mlp-batch", 256, "MLP examples per step (divisible by N)")
	tfBatch := flag.Int("tf-batch", 4, "transformer sequences per step (divisible by N)")
	tfSeq := flag.Int("tf-seq", 128, "transformer sequence length")
	cnnBatch := flag.Int("cnn-batch", 8, "CNN images per step")
	cnnSize := flag.Int("cnn-size", 64, "CNN image height and width (the height divisible by 2N)")
	only := flag.String("only", "", "run only workloads whose name contains this")
	layoutsFlag := flag.String("layouts", "single,dp,tp,2x2,sp", "layouts, comma-separated (single is the reference and always runs)")
	verbose := flag.Bool("v", false, "print each variable's sharding per layout")
	flag.Parse()
	if *latheCfg == "" {
		*latheCfg = fmt.Sprintf("lathe:cpu,devices=%d", *n)
	}
	if *n < 2 || *n%2 != 0 {
		fail(errors.Errorf("-devices %d: need an even count of at least 2", *n))
	}

	// XLA reads XLA_FLAGS when its PJRT client starts: before the backend is made.
	xlaFlag := fmt.Sprintf("--xla_force_host_platform_device_count=%d", *n)
	if f := os.Getenv("XLA_FLAGS"); !strings.Contains(f, "xla_force_host_platform_device_count") {
		_ = os.Setenv("XLA_FLAGS", strings.TrimSpace(f+" "+xlaFlag))
	}
	lb, err := compute.NewWithConfig(*latheCfg)
	if err != nil {
		fail(err)
	}
	defer lb.Finalize()
	latheB, ok := lb.(*lathe.Backend)
	if !ok {
		fail(errors.Errorf("%s is not a lathe backend", *latheCfg))
	}
	if lb.NumDevices() < *n {
		fail(errors.Errorf("%s has %d devices, %d asked for", *latheCfg, lb.NumDevices(), *n))
	}
	var xb compute.Backend
	xlaNote := ""
	if *xlaCfg != "" {
		cfg, err := xlapeer.Config(*xlaCfg)
		if err == nil {
			xb, err = compute.NewWithConfig(cfg)
		}
		switch {
		case err != nil:
			xlaNote = fmt.Sprintf("xla left out: %v", err)
		case xb.NumDevices() < *n:
			xlaNote = fmt.Sprintf("xla: %d device(s), not %d: distributed layouts n/a", xb.NumDevices(), *n)
		}
		if xb != nil {
			defer xb.Finalize()
		}
	}
	fmt.Printf("lathe: %s (%s), %d devices\n", *latheCfg, lb.Description(), lb.NumDevices())
	if xb != nil {
		fmt.Printf("xla:   %s (%s), %d devices (XLA_FLAGS=%q)\n", *xlaCfg, xb.Description(), xb.NumDevices(), os.Getenv("XLA_FLAGS"))
	}
	if xlaNote != "" {
		fmt.Println(xlaNote)
	}
	fmt.Printf("%d timed steps after %d warm-up steps per contender; lathe and xla alternate step by step\n", *rounds, *warmup)

	var layouts []layout
	for _, name := range strings.Split(*layoutsFlag, ",") {
		l, err := newLayout(strings.TrimSpace(name), *n)
		if err != nil {
			fail(err)
		}
		if l.name != "single" {
			layouts = append(layouts, l)
		}
	}
	single, _ := newLayout("single", *n)
	layouts = append([]layout{single}, layouts...)

	// GoMLX's default, unpadded CNN on images 2 rows larger: its convolutions' outputs (size, then
	// size/2 - 2 rows) divide among 2 devices as the images do, not among 4 (layout sp skips it there)
	cnns := []steps.Workload{steps.CNNSame(*cnnBatch, *cnnSize), steps.CNNOf(*cnnBatch, *cnnSize+2)}
	for _, w := range append([]steps.Workload{steps.MLP(*mlpBatch), steps.Transformer(*tfBatch, *tfSeq)}, cnns...) {
		if *only != "" && !strings.Contains(strings.ToLower(w.Name), strings.ToLower(*only)) {
			continue
		}
		if err := runWorkload(latheB, xb, w, layouts, *rounds, *warmup, *verbose); err != nil {
			fail(errors.WithMessage(err, w.Name))
		}
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "sharding-bench: %+v\n", err)
	os.Exit(1)
}

// layout is a way of spreading one step over the devices: its mesh (nil: one device), the mesh
// axis the batch is split over ("" for none), the one the Megatron pairs are split over and the
// one images' height is split over.
type layout struct {
	name, desc                     string
	mesh                           *distributed.DeviceMesh
	dataAxis, modelAxis, spaceAxis string
	numDevices                     int
	replicated                     *distributed.ShardingSpec
	inputSpecs                     [2]*distributed.ShardingSpec // x, y
}

func newLayout(name string, n int) (layout, error) {
	l := layout{name: name, numDevices: 1}
	var sizes []int
	var axes []string
	switch name {
	case "single":
		l.desc = "1 device"
		return l, nil
	case "dp":
		sizes, axes, l.dataAxis = []int{n}, []string{"data"}, "data"
		l.desc = fmt.Sprintf("data %d", n)
	case "tp":
		sizes, axes, l.modelAxis = []int{n}, []string{"model"}, "model"
		l.desc = fmt.Sprintf("model %d", n)
	case "2x2":
		sizes, axes = []int{n / 2, 2}, []string{"data", "model"}
		l.dataAxis, l.modelAxis = "data", "model"
		l.desc = fmt.Sprintf("data %d x model 2", n/2)
	case "sp":
		sizes, axes, l.spaceAxis = []int{n}, []string{"space"}, "space"
		l.desc = fmt.Sprintf("space %d", n)
	default:
		return l, errors.Errorf("unknown layout %q (single, dp, tp, 2x2, sp)", name)
	}
	mesh, err := distributed.NewDeviceMesh(sizes, axes)
	if err != nil {
		return l, err
	}
	l.mesh, l.numDevices = mesh, n
	l.replicated = distributed.NewReplicatedShardingSpec(mesh)
	l.inputSpecs = [2]*distributed.ShardingSpec{l.replicated, l.replicated}
	if l.dataAxis != "" { // x [batch, ...] and y [batch, ...]: the batch axis split
		if l.inputSpecs[0], err = distributed.BuildSpec(mesh).S(l.dataAxis).Done(); err != nil {
			return l, err
		}
		l.inputSpecs[1] = l.inputSpecs[0]
	}
	if l.spaceAxis != "" { // x [batch, height, width, channels]: the height split
		if l.inputSpecs[0], err = distributed.BuildSpec(mesh).R().S(l.spaceAxis).R().R().Done(); err != nil {
			return l, err
		}
	}
	return l, nil
}

// megatronAxis is the axis of a variable that tensor parallelism splits over the model axis, or
// -1 for a replicated one. Dense weights are [inputs, outputs...] (GoMLX's layers.Dense; the
// attention's query/key/value projections are [768, 768], heads × 64 on the outputs, so a split
// into 4 gives each device 3 whole heads): the first of a pair is split along its first output
// axis (weights axis 1, biases axis 0), the second along its inputs (weights axis 0; its bias,
// added after the partial sums meet, stays whole).
func megatronAxis(path string) int {
	scopes := strings.Split(path, "/")
	has := func(names ...string) bool {
		for _, s := range scopes {
			for _, n := range names {
				if s == n {
					return true
				}
			}
		}
		return false
	}
	name := scopes[len(scopes)-1]
	switch {
	case has("d0", "ff0", "query", "key", "value"): // column-split
		switch name {
		case "weights":
			return 1
		case "biases":
			return 0
		}
	case has("d1", "ff1", "output"): // row-split
		if name == "weights" {
			return 0
		}
	}
	return -1
}

// specFor is the sharding of a variable of shape under l.
func (l layout) specFor(path string, shape shapes.Shape) (*distributed.ShardingSpec, error) {
	if l.mesh == nil {
		return nil, nil
	}
	axis := -1
	if l.modelAxis != "" {
		axis = megatronAxis(path)
	}
	if axis < 0 || axis >= shape.Rank() {
		return l.replicated, nil
	}
	b := distributed.BuildSpec(l.mesh)
	for a := range shape.Rank() {
		if a == axis {
			b = b.S(l.modelAxis)
		} else {
			b = b.R()
		}
	}
	return b.Done()
}

// snapshot is the initial (or trained) value of every variable of a store, in its order, held
// in Go memory.
type snapshot struct {
	paths     []string
	values    []*tensors.Tensor
	trainable []bool
}

func takeSnapshot(store *model.Store) (*snapshot, error) {
	s := &snapshot{}
	for v := range store.IterVariables() {
		val, err := v.Value() // gathers a sharded variable
		if err != nil {
			return nil, errors.WithMessagef(err, "variable %s", v.Path())
		}
		c, err := val.LocalClone()
		if err != nil {
			return nil, err
		}
		s.paths, s.values, s.trainable = append(s.paths, v.Path()), append(s.values, c), append(s.trainable, v.Trainable)
	}
	return s, nil
}

func (s *snapshot) free() {
	for _, t := range s.values {
		_ = t.FinalizeAll()
	}
}

// reference is what the single-device step on lathe provides to the workload's other runs: the
// initial weights, the variables the step updates (in the order model.Exec returns them) and the
// inputs.
type reference struct {
	init    *snapshot
	changed []string
	x, y    *tensors.Tensor
}

// stepFn is the workload's training step as a model.Exec graph function; it records, in
// *changed, the variables the step updates (model.Exec returns their new values first, in the
// store's order).
func stepFn(w steps.Workload, changed *[]string) func(scope *model.Scope, x, y *Node) *Node {
	return func(scope *model.Scope, x, y *Node) *Node {
		l := w.Loss(scope, x, y)
		w.NewOptimizer().UpdateGraph(scope, x.Graph(), l)
		*changed = (*changed)[:0]
		for v := range scope.Store().IterVariables() {
			if v.ChangedInGraph(x.Graph()) {
				*changed = append(*changed, v.Path())
			}
		}
		return l
	}
}

// newReference builds the workload's step on one device of b, initialises its variables (seed
// 42) and takes their values before any step.
func newReference(b compute.Backend, w steps.Workload) (*reference, error) {
	store := model.NewStore()
	store.SetParam(model.ParamInitialSeed, int64(42))
	r := &reference{}
	e, err := model.NewExec(b, store, stepFn(w, &r.changed))
	if err != nil {
		return nil, err
	}
	defer e.Finalize()
	defer store.Finalize()
	r.x, r.y = w.Inputs(rand.New(rand.NewPCG(7, 1)))
	if _, err := e.Compile(r.x.Shape(), r.y.Shape()); err != nil {
		return nil, err
	}
	if err := store.InitializeVariables(b, nil); err != nil {
		return nil, err
	}
	if r.init, err = takeSnapshot(store); err != nil {
		return nil, err
	}
	return r, nil
}

// contender is one workload's step in one layout on one backend.
type contender struct {
	backend compute.Backend
	store   *model.Store
	exec    *model.Exec
	args    []any
	times   []time.Duration
	losses  []float32
	graph   *Graph
}

func newContender(b compute.Backend, w steps.Workload, l layout, ref *reference, verbose bool) (*contender, error) {
	c := &contender{backend: b, store: model.NewStore()}
	var changed []string
	e, err := model.NewExec(b, c.store, stepFn(w, &changed))
	if err != nil {
		return nil, err
	}
	c.exec = e
	if l.mesh != nil {
		e.AutoSharding(l.mesh)
	}
	specs := map[string]*distributed.ShardingSpec{}
	for i, path := range ref.init.paths {
		val, err := ref.init.values[i].LocalClone()
		if err != nil {
			return nil, err
		}
		v, err := c.store.CreateVariable(path, val)
		if err != nil {
			return nil, err
		}
		v.SetTrainable(ref.init.trainable[i])
		if l.mesh != nil {
			spec, err := l.specFor(path, val.Shape())
			if err != nil {
				return nil, errors.WithMessagef(err, "variable %s", path)
			}
			if err := v.SetShardingSpec(spec); err != nil {
				return nil, err
			}
			specs[path] = spec
			if verbose && !spec.IsReplicated() {
				fmt.Printf("    %s %s: %s %s\n", l.name, path, val.Shape(), spec)
			}
		}
	}
	if l.mesh == nil { // its own copies: a tensor given to one backend keeps that backend's buffer
		x, err := ref.x.LocalClone()
		if err != nil {
			return nil, err
		}
		y, err := ref.y.LocalClone()
		if err != nil {
			return nil, err
		}
		c.args = []any{x, y}
		return c, nil
	}
	// The step's outputs: the updated variables (in their own shardings), then the loss.
	var outSpecs []*distributed.ShardingSpec
	for _, path := range ref.changed {
		outSpecs = append(outSpecs, specs[path])
	}
	outSpecs = append(outSpecs, l.replicated)
	e.WithInputShardingSpecs(l.inputSpecs[0], l.inputSpecs[1]).WithOutputShardingSpecs(outSpecs...)
	if err := e.SetDefaultShardingSpec(l.replicated); err != nil {
		return nil, err
	}
	// Each device's shards of x and y, device by device.
	dx, err := dtensor.ShardTensor(l.inputSpecs[0], ref.x)
	if err != nil {
		return nil, err
	}
	dy, err := dtensor.ShardTensor(l.inputSpecs[1], ref.y)
	if err != nil {
		return nil, err
	}
	for d := range l.numDevices {
		c.args = append(c.args, dx.Shards()[d], dy.Shards()[d])
	}
	return c, nil
}

// step runs one training step and reads device 0's loss back to the host.
func (c *contender) step() (time.Duration, error) {
	start := time.Now()
	out, g, err := c.exec.CallWithGraph(c.args...)
	if err != nil {
		return 0, err
	}
	l, ok := out[0].Value().(float32)
	if !ok {
		return 0, errors.Errorf("loss of type %T", out[0].Value())
	}
	d := time.Since(start)
	for _, t := range out {
		_ = t.FinalizeAll()
	}
	c.graph = g
	c.losses = append(c.losses, l)
	return d, nil
}

func (c *contender) free() {
	c.exec.Finalize()
	c.store.Finalize()
	for _, a := range c.args {
		if t, ok := a.(*tensors.Tensor); ok {
			_ = t.FinalizeAll()
		}
	}
}

// diff is the largest absolute difference between two series and the largest relative one
// (|a-b| / max(|b|, 1e-6)).
type diff struct{ abs, rel float64 }

func (d *diff) add(a, b float64) {
	e := math.Abs(a - b)
	d.abs = max(d.abs, e)
	d.rel = max(d.rel, e/max(math.Abs(b), 1e-6))
}

func (d diff) String() string { return fmt.Sprintf("%.1e/%.1e", d.abs, d.rel) }

func lossDiff(a, ref []float32) diff {
	var d diff
	for i := range min(len(a), len(ref)) {
		d.add(float64(a[i]), float64(ref[i]))
	}
	return d
}

func weightsDiff(a, ref *snapshot) (diff, error) {
	var d diff
	for i := range a.values {
		if a.paths[i] != ref.paths[i] {
			return d, errors.Errorf("variable %d: %s against %s", i, a.paths[i], ref.paths[i])
		}
		fa, err := floats(a.values[i])
		if err != nil {
			return d, err
		}
		fb, err := floats(ref.values[i])
		if err != nil {
			return d, err
		}
		if len(fa) != len(fb) {
			return d, errors.Errorf("variable %s: %d values against %d", a.paths[i], len(fa), len(fb))
		}
		for j := range fa {
			d.add(fa[j], fb[j])
		}
	}
	return d, nil
}

// floats is t's values as float64 (float and integer dtypes).
func floats(t *tensors.Tensor) ([]float64, error) {
	var r []float64
	var bad bool
	err := t.ConstFlatData(func(flat any) {
		switch x := flat.(type) {
		case []float32:
			r = make([]float64, len(x))
			for i, f := range x {
				r[i] = float64(f)
			}
		case []float64:
			r = append(r, x...)
		case []int64:
			for _, v := range x {
				r = append(r, float64(v))
			}
		case []int32:
			for _, v := range x {
				r = append(r, float64(v))
			}
		case []uint64:
			for _, v := range x {
				r = append(r, float64(v))
			}
		default:
			bad = true
		}
	})
	if err == nil && bad {
		err = errors.Errorf("values of dtype %s", t.DType())
	}
	return r, err
}

// result is one layout's row.
type result struct {
	lathe, xla       time.Duration
	xlaNote          string
	peakPerDevice    int64
	latheLoss        diff
	latheWeights     diff
	xlaLoss          diff
	xlaWeights       diff
	stats            lathe.ExecutableStats
	statsErr         error
	latheSnap, xSnap *snapshot
	latheLosses      []float32
	xlaLosses        []float32
}

func runWorkload(lb *lathe.Backend, xb compute.Backend, w steps.Workload, layouts []layout, rounds, warmup int, verbose bool) error {
	fmt.Printf("\n%s\n", w.Name)
	ref, err := newReference(lb, w)
	if err != nil {
		return errors.WithMessage(err, "reference")
	}
	defer ref.init.free()
	var bytes int64
	for _, t := range ref.init.values {
		bytes += int64(t.Shape().Memory())
	}
	fmt.Printf("  %d variables, %.1f MB; %d updated per step\n", len(ref.init.paths), float64(bytes)/1e6, len(ref.changed))
	fmt.Printf("  %-6s %-16s %9s %9s %7s %10s %7s %15s %15s %15s  %s\n", "layout", "mesh", "lathe ms", "xla ms", "l/x",
		"peak/dev", "/single", "lathe Δloss", "lathe Δweights", "xla Δloss", "lathe partition")
	var base *result
	for _, l := range layouts {
		if l.spaceAxis != "" && ref.x.Rank() != 4 {
			continue // a spatial split needs images
		}
		if l.spaceAxis != "" && ref.x.Shape().Dim(1)%l.numDevices != 0 {
			fmt.Printf("  %-6s (the image height, %d, does not divide among %d devices)\n", l.name, ref.x.Shape().Dim(1), l.numDevices)
			continue
		}
		r, err := runLayout(lb, xb, w, l, ref, base, rounds, warmup, verbose)
		if err != nil {
			return errors.WithMessage(err, l.name)
		}
		if l.name == "single" {
			base = r
		} else {
			r.latheSnap.free()
			if r.xSnap != nil {
				r.xSnap.free()
			}
		}
		printRow(l, r, base)
	}
	if base != nil {
		base.latheSnap.free()
		if base.xSnap != nil {
			base.xSnap.free()
		}
	}
	return nil
}

// settle returns lathe's memory counters once the buffers Go no longer references are freed. GC
// cleanups free them on their own goroutine, a large executable's arenas some time after a
// collection: collect until the memory in use stops falling (at most 2 s), so that the earlier
// layouts' garbage is not taken for what this one's baseline holds (and freed during its steps).
func settle(lb *lathe.Backend) (lathe.MemoryStats, error) {
	var last lathe.MemoryStats
	for i := range 40 {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
		ms, err := lb.MemoryStats(0)
		if err != nil {
			return ms, err
		}
		if i > 1 && ms.Current == last.Current {
			return ms, nil
		}
		last = ms
	}
	return last, nil
}

func runLayout(lb *lathe.Backend, xb compute.Backend, w steps.Workload, l layout, ref *reference, base *result,
	rounds, warmup int, verbose bool) (*result, error) {
	r := &result{}
	before, err := settle(lb)
	if err != nil {
		return nil, err
	}
	lc, err := newContender(lb, w, l, ref, verbose)
	if err != nil {
		return nil, errors.WithMessage(err, "lathe")
	}
	var xc *contender
	switch {
	case xb == nil:
		r.xlaNote = "n/a: no xla"
	case xb.NumDevices() < l.numDevices:
		r.xlaNote = fmt.Sprintf("n/a: xla has %d device(s)", xb.NumDevices())
	default:
		if xc, err = newContender(xb, w, l, ref, false); err != nil {
			r.xlaNote = "n/a: " + firstLine(err.Error())
			xc = nil
		}
	}
	var lt, xt []time.Duration
	var peak int64
	for round := range warmup + rounds {
		if round == warmup {
			if err := lb.MemoryResetPeak(0); err != nil {
				return nil, err
			}
		}
		d, err := lc.step()
		if err != nil {
			return nil, errors.WithMessage(err, "lathe step")
		}
		if round >= warmup {
			lt = append(lt, d)
		}
		if xc != nil {
			d, err := xc.step()
			if err != nil {
				r.xlaNote = "n/a: " + firstLine(err.Error())
				xc.free()
				xc = nil
			} else if round >= warmup {
				xt = append(xt, d)
			}
		}
	}
	ms, err := lb.MemoryStats(0)
	if err != nil {
		return nil, err
	}
	peak = ms.Peak - before.Current
	if !ms.ProcessWide { // one device's own counters: the peak of device 0
		peak = ms.Peak
	} else {
		peak /= int64(l.numDevices)
	}
	r.peakPerDevice = peak
	r.lathe = steps.Median(lt)
	if le, ok := lc.graph.Executable().(*lathe.Executable); ok && l.mesh != nil {
		r.stats, r.statsErr = le.Stats()
	}
	r.latheLosses = lc.losses
	if r.latheSnap, err = takeSnapshot(lc.store); err != nil {
		return nil, err
	}
	lc.free()
	if xc != nil {
		r.xla = steps.Median(xt)
		r.xlaLosses = xc.losses
		if r.xSnap, err = takeSnapshot(xc.store); err != nil {
			return nil, err
		}
		xc.free()
	}
	if base != nil {
		r.latheLoss = lossDiff(r.latheLosses, base.latheLosses)
		if r.latheWeights, err = weightsDiff(r.latheSnap, base.latheSnap); err != nil {
			return nil, err
		}
		if r.xSnap != nil && base.xSnap != nil {
			r.xlaLoss = lossDiff(r.xlaLosses, base.xlaLosses)
			if r.xlaWeights, err = weightsDiff(r.xSnap, base.xSnap); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

func msOf(d time.Duration) float64 { return float64(d) / 1e6 }

func printRow(l layout, r *result, base *result) {
	xla, ratio := "n/a", "n/a"
	if r.xla > 0 {
		xla = fmt.Sprintf("%.2f", msOf(r.xla))
		ratio = fmt.Sprintf("%.2f", float64(r.lathe)/float64(r.xla))
	}
	rel := "1"
	dl, dw, dx := "-", "-", "-"
	if base != nil && base != r {
		rel = fmt.Sprintf("%.2f", float64(r.peakPerDevice)/float64(base.peakPerDevice))
		dl, dw = r.latheLoss.String(), r.latheWeights.String()
		if r.xSnap != nil {
			dx = r.xlaLoss.String()
		}
	}
	part := "-"
	if l.mesh != nil {
		switch {
		case r.statsErr != nil:
			part = "stats: " + r.statsErr.Error()
		case r.stats.Partitioned:
			part = fmt.Sprintf("partitioned, %d collectives, %d fallbacks", r.stats.PartitionCollectives, r.stats.PartitionFallbacks)
			if r.stats.PartitionFallbacks > 0 {
				part += " (" + r.stats.PartitionFallbackOps + ")"
			}
		default:
			part = "declined: " + r.stats.PartitionDeclined
		}
	}
	fmt.Printf("  %-6s %-16s %9.2f %9s %7s %8.1fMB %7s %15s %15s %15s  %s\n", l.name, l.desc, msOf(r.lathe), xla, ratio,
		float64(r.peakPerDevice)/1e6, rel, dl, dw, dx, part)
	if r.xlaNote != "" {
		fmt.Printf("         xla %s\n", r.xlaNote)
	}
}
