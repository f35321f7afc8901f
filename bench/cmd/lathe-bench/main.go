// Command lathe-bench times lathe against GoMLX's pure-Go "go" backend, both in the same
// run: the DotGeneral shapes of GoMLX's backendtest benchmarks (all-MiniLM-L6-v2,
// bge-small-en-v1.5, the adult demo) and MLP training steps (internal/mlp). It prints
// median times and the ratio go/lathe (> 1: lathe is faster).
//
//	go run ./bench/cmd/lathe-bench                    # default subset
//	go run ./bench/cmd/lathe-bench -all -csv out.csv  # every backendtest shape, CSV too
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	_ "github.com/gomlx/compute/gobackend"
	"github.com/gomlx/compute/shapes"
	"github.com/lathe-dev/lathe/internal/mlp"

	_ "github.com/lathe-dev/lathe/compute/lathe"
)

// dotCase is one DotGeneral workload: lhs dims x rhs dims with contracting/batch axes.
type dotCase struct {
	group, name  string
	dtype        dtypes.DType
	lhs, rhs     []int
	lc, lb       []int
	rc, rb       []int
	inDefaultSet bool
}

func d(v ...int) []int { return v }

// dotCases lists the shapes of backendtest's BenchmarkDotGeneral (transcribed as data).
func dotCases() []dotCase {
	f32 := dtypes.Float32
	var cs []dotCase
	add := func(group string, def bool, lhs, rhs, lc, lb, rc, rb []int) {
		name := fmt.Sprintf("%s x %s", dims(lhs), dims(rhs))
		cs = append(cs, dotCase{group, name, f32, lhs, rhs, lc, lb, rc, rb, def})
	}
	// all-MiniLM-L6-v2
	m := "MiniLM"
	add(m, true, d(32, 12, 13, 13), d(32, 12, 13, 32), d(3), d(0, 1), d(2), d(0, 1))
	add(m, true, d(32, 12, 13, 32), d(32, 12, 32, 13), d(3), d(0, 1), d(2), d(0, 1))
	add(m, true, d(32, 13, 1536), d(1536, 384), d(2), nil, d(0), nil)
	add(m, true, d(32, 13, 1536), d(384, 1536), d(2), nil, d(1), nil)
	add(m, true, d(32, 13, 384), d(384, 1152), d(2), nil, d(0), nil)
	add(m, true, d(32, 13, 384), d(384, 1536), d(2), nil, d(0), nil)
	add(m, true, d(32, 13, 384), d(384, 384), d(2), nil, d(0), nil)
	add(m, true, d(416, 384), d(384, 1152), d(1), nil, d(0), nil)
	// bge-small-en-v1.5 at several batch x sequence sizes
	b := "bge-small"
	add(b, true, d(10, 192, 12, 192), d(10, 192, 12, 32), d(3), d(0, 2), d(1), d(0, 2))
	add(b, true, d(10, 192, 1536), d(384, 1536), d(2), nil, d(1), nil)
	add(b, true, d(10, 192, 384), d(1536, 384), d(2), nil, d(1), nil)
	add(b, true, d(10, 192, 384), d(384, 384), d(2), nil, d(1), nil)
	for _, bs := range [][2]int{{16, 128}, {21, 96}, {256, 8}, {32, 64}, {42, 48}, {64, 32}, {8, 256}, {85, 24}} {
		def := bs[0] == 16
		if bs[0] != 64 {
			add(b, def, d(bs[0], bs[1], 12, bs[1]), d(bs[0], bs[1], 12, 32), d(3), d(0, 2), d(1), d(0, 2))
		}
		if bs[0] == 16 {
			add(b, def, d(16, 128, 12, 32), d(16, 128, 12, 32), d(3), d(0, 2), d(3), d(0, 2))
		}
		add(b, def, d(bs[0], bs[1], 1536), d(384, 1536), d(2), nil, d(1), nil)
		add(b, def, d(bs[0], bs[1], 384), d(1536, 384), d(2), nil, d(1), nil)
		add(b, def, d(bs[0], bs[1], 384), d(384, 384), d(2), nil, d(1), nil)
	}
	// adult demo
	a := "adult"
	for _, n := range []int{128, 25, 49} {
		add(a, true, d(n, 4), d(4, 1), d(1), nil, d(0), nil)
		add(a, true, d(n, 69), d(69, 4), d(1), nil, d(0), nil)
	}
	for _, n := range []int{128, 25, 49} {
		add(a, true, d(n, 4), d(1, 4), d(1), nil, d(1), nil)
		add(a, true, d(n, 69), d(4, 69), d(1), nil, d(1), nil)
	}
	add(a, true, d(32, 20), d(20, 64), d(1), nil, d(0), nil)
	cs = append(cs, dotCase{a, "bf16 32x20 x 20x64 (f32 out)", dtypes.BFloat16, d(32, 20), d(20, 64), d(1), nil, d(0), nil, true})
	return cs
}

func dims(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, "x")
}

// timing measures fn: one warm-up call, then repeats until minReps and budget are reached
// (at most maxReps); it returns the median.
func timing(fn func() error, budget time.Duration) (time.Duration, error) {
	const minReps, maxReps = 5, 1000
	if err := fn(); err != nil {
		return 0, err
	}
	var ts []time.Duration
	start := time.Now()
	for len(ts) < minReps || (time.Since(start) < budget && len(ts) < maxReps) {
		t0 := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		ts = append(ts, time.Since(t0))
	}
	slices.Sort(ts)
	return ts[len(ts)/2], nil
}

// timeDot compiles and times one DotGeneral on a backend.
func timeDot(backend compute.Backend, c dotCase, budget time.Duration) (time.Duration, error) {
	bld := backend.Builder("dot")
	f := bld.Main()
	ls, rs := shapes.Make(c.dtype, c.lhs...), shapes.Make(c.dtype, c.rhs...)
	lp, err := f.Parameter("lhs", ls, nil)
	if err != nil {
		return 0, err
	}
	rp, err := f.Parameter("rhs", rs, nil)
	if err != nil {
		return 0, err
	}
	cfg := compute.DotGeneralConfig{}
	if c.dtype == dtypes.BFloat16 {
		cfg.OutputDType = dtypes.Float32
	}
	out, err := f.DotGeneral(lp, c.lc, c.lb, rp, c.rc, c.rb, cfg)
	if err != nil {
		return 0, err
	}
	if err := f.Return([]compute.Value{out}, nil); err != nil {
		return 0, err
	}
	exec, err := bld.Compile()
	if err != nil {
		return 0, err
	}
	defer exec.Finalize()
	rng := rand.New(rand.NewPCG(1, 2))
	var inputs []compute.Buffer
	for _, s := range []shapes.Shape{ls, rs} {
		var flat any
		if c.dtype == dtypes.BFloat16 {
			v := make([]bfloat16.BFloat16, s.Size())
			for i := range v {
				v[i] = bfloat16.FromFloat32(rng.Float32()*2 - 1)
			}
			flat = v
		} else {
			v := make([]float32, s.Size())
			for i := range v {
				v[i] = rng.Float32()*2 - 1
			}
			flat = v
		}
		buf, err := backend.BufferFromFlatData(0, flat, s)
		if err != nil {
			return 0, err
		}
		defer func() { _ = buf.Finalize() }()
		inputs = append(inputs, buf)
	}
	return timing(func() error {
		outs, err := exec.Execute(inputs, nil, 0)
		if err != nil {
			return err
		}
		return outs[0].Finalize()
	}, budget)
}

// timeMLP times one training step of the shared MLP.
func timeMLP(backend compute.Backend, cfg mlp.Config, budget time.Duration) (time.Duration, error) {
	m, err := mlp.New(backend, cfg, 7)
	if err != nil {
		return 0, err
	}
	defer m.Finalize()
	x, y := mlp.Spiral(cfg.Batch, cfg.Classes, 7)
	return timing(func() error {
		_, err := m.Step(x, y)
		return err
	}, budget)
}

type row struct {
	group, name string
	lathe, gobe time.Duration
	latheE, goE error
}

func main() {
	latheCfg := flag.String("lathe", "lathe:cpu", "lathe backend configuration")
	goCfg := flag.String("go", "go", "GoMLX Go backend configuration")
	all := flag.Bool("all", false, "every backendtest DotGeneral shape (default: a subset)")
	budget := flag.Duration("budget", 300*time.Millisecond, "time spent per case per backend (after a warm-up; at least 5 runs)")
	csvFile := flag.String("csv", "", "also write the table as CSV to this file")
	flag.Parse()

	lb, err := compute.NewWithConfig(*latheCfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lathe-bench:", err)
		os.Exit(1)
	}
	gb, err := compute.NewWithConfig(*goCfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lathe-bench:", err)
		os.Exit(1)
	}
	fmt.Printf("lathe: %s (%s)\ngo:    %s (%s)\n\n", lb, lb.Description(), gb, gb.Description())

	var rows []row
	measure := func(group, name string, fn func(compute.Backend) (time.Duration, error)) {
		r := row{group: group, name: name}
		r.lathe, r.latheE = fn(lb)
		r.gobe, r.goE = fn(gb)
		rows = append(rows, r)
		printRow(r)
	}
	printHeader()
	for _, c := range dotCases() {
		if !*all && !c.inDefaultSet {
			continue
		}
		measure("DotGeneral "+c.group, c.name, func(b compute.Backend) (time.Duration, error) { return timeDot(b, c, *budget) })
	}
	for _, cfg := range []mlp.Config{
		{Inputs: 2, Hidden: 64, Classes: 3, Batch: 128, LearningRate: 0.1},
		{Inputs: 2, Hidden: 512, Classes: 3, Batch: 256, LearningRate: 0.1},
	} {
		name := fmt.Sprintf("2-%d-%d-3 batch %d", cfg.Hidden, cfg.Hidden, cfg.Batch)
		measure("MLP train step", name, func(b compute.Backend) (time.Duration, error) { return timeMLP(b, cfg, *budget) })
	}
	if *csvFile != "" {
		if err := writeCSV(*csvFile, rows); err != nil {
			fmt.Fprintln(os.Stderr, "lathe-bench:", err)
			os.Exit(1)
		}
	}
}

const rowFormat = "%-22s %-34s %12s %12s %8s\n"

func printHeader() {
	fmt.Printf(rowFormat, "workload", "shape", "lathe", "go", "go/lathe")
	fmt.Println(strings.Repeat("-", 92))
}

func fmtDur(t time.Duration, err error) string {
	if err != nil {
		if compute.IsNotImplemented(err) {
			return "n/a"
		}
		return "error"
	}
	return fmtTime(t)
}

func fmtTime(t time.Duration) string {
	switch {
	case t < time.Millisecond:
		return fmt.Sprintf("%.1fµs", float64(t)/1e3)
	case t < time.Second:
		return fmt.Sprintf("%.2fms", float64(t)/1e6)
	}
	return fmt.Sprintf("%.2fs", t.Seconds())
}

func ratio(r row) string {
	if r.latheE != nil || r.goE != nil || r.lathe == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(r.gobe)/float64(r.lathe))
}

func printRow(r row) {
	fmt.Printf(rowFormat, r.group, r.name, fmtDur(r.lathe, r.latheE), fmtDur(r.gobe, r.goE), ratio(r))
	for _, e := range []error{r.latheE, r.goE} {
		if e != nil && !compute.IsNotImplemented(e) {
			fmt.Printf("    error: %v\n", e)
		}
	}
}

func writeCSV(path string, rows []row) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"workload", "shape", "lathe_median_ns", "go_median_ns", "go_over_lathe"})
	for _, r := range rows {
		ns := func(t time.Duration, err error) string {
			if err != nil {
				return ""
			}
			return fmt.Sprint(t.Nanoseconds())
		}
		_ = w.Write([]string{r.group, r.name, ns(r.lathe, r.latheE), ns(r.gobe, r.goE), strings.TrimSuffix(ratio(r), "x")})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
