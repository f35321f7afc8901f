// Command lathe-trace summarises a trace written by lathe (option trace=FILE or LATHE_TRACE=FILE,
// docs/PROFILING.md): where the steps' time went, by op or fusion region and by op family, with
// the bytes per second of elementwise steps, the totals of executions, compiles and transfers,
// and where the device's memory in use peaked and which steps raised it most. Pure Go: it reads
// the JSON file only.
//
//	lathe-trace [-n 20] trace.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
)

// event is one trace event as lathe writes it (Chrome trace-event format).
type event struct {
	Name string                 `json:"name"`
	Cat  string                 `json:"cat"`
	Ph   string                 `json:"ph"`
	Ts   float64                `json:"ts"`  // µs
	Dur  float64                `json:"dur"` // µs
	Tid  int                    `json:"tid"`
	Args map[string]interface{} `json:"args"`
}

// load reads {"traceEvents":[...]} or a bare array; a file cut short (a process that died before
// lathe wrote the closing "]}") is read up to its last complete event.
func load(data []byte) ([]event, error) {
	var doc struct {
		TraceEvents []event `json:"traceEvents"`
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err := json.Unmarshal(trimmed, &doc.TraceEvents)
		return doc.TraceEvents, err
	}
	err := json.Unmarshal(trimmed, &doc)
	if err != nil {
		// cut short: the events up to the last complete one, the array closed
		for _, end := range [][]byte{trimmed, trimmed[:max(bytes.LastIndex(trimmed, []byte("},\n")), 0)+1]} {
			fixed := append(append([]byte{}, end...), []byte("]}")...)
			if json.Unmarshal(fixed, &doc) == nil {
				return doc.TraceEvents, nil
			}
		}
		return nil, fmt.Errorf("not a trace-event file: %v", err)
	}
	return doc.TraceEvents, nil
}

// row aggregates the steps of one name (or one family).
type row struct {
	Name    string
	Family  string
	Count   int
	TotalUs float64
	Bytes   float64 // bytes read and written, summed over the steps that report them
	BytesUs float64 // the time of those steps
}

func (r *row) add(e event) {
	r.Count++
	r.TotalUs += e.Dur
	if b, ok := e.Args["bytes"].(float64); ok && b > 0 {
		r.Bytes += b
		r.BytesUs += e.Dur
	}
}

// elementwise says whether steps of a family stream their operands once (so bytes/s is a
// meaningful figure for them).
func elementwise(family string) bool {
	switch family {
	case "UNARY", "BINARY", "COMPARE", "SELECT", "CONVERT", "fused LOOP":
		return true
	}
	return false
}

type report struct {
	Steps, Families []*row
	StepUs          float64
	Runs            int
	RunUs           float64
	Compiles        int
	CompileUs       float64
	Transfers       int
	TransferBytes   float64
	TransferUs      float64
	PeakBytes       float64
	GPU             bool // the steps' times are the GPU's
	GPURuns         int  // executions (or CUDA graph replays) timed on the GPU
	GPURunUs        float64
	Memory          memoryReport
}

// memRise is one step's effect on the device's memory in use (its "in_use" after the step
// against the step before it on the same thread).
type memRise struct {
	Name, Out string
	Rise, Use float64
}

// memoryReport: the highest memory in use after a step, that step, and the steps that raised it
// most (largest first), from the host's step events (lathe:cpu and lathe:cuda write "in_use").
type memoryReport struct {
	Peak  memRise
	Rises []memRise
}

func memoryOf(events []event) memoryReport {
	var m memoryReport
	last := map[int]float64{}
	for _, e := range events {
		use, ok := e.Args["in_use"].(float64)
		if e.Ph != "X" || e.Cat != "step" || !ok {
			continue
		}
		out, _ := e.Args["out"].(string)
		r := memRise{Name: e.Name, Out: out, Use: use}
		if prev, seen := last[e.Tid]; seen {
			r.Rise = use - prev
		}
		last[e.Tid] = use
		if use > m.Peak.Use {
			m.Peak = r
		}
		if r.Rise > 0 {
			m.Rises = append(m.Rises, r)
		}
	}
	sort.SliceStable(m.Rises, func(i, j int) bool { return m.Rises[i].Rise > m.Rises[j].Rise })
	return m
}

// human prints bytes in GiB, MiB or KiB.
func human(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f bytes", b)
}

func summarize(events []event) report {
	var rep report
	byName := map[string]*row{}
	byFamily := map[string]*row{}
	// lathe:cuda writes each step twice: the host's launch ("step") and the GPU's run of it
	// ("gpu step"); where the GPU's are there, they are the steps' time.
	stepCat := "step"
	for _, e := range events {
		if e.Cat == "gpu step" {
			stepCat, rep.GPU = "gpu step", true
			break
		}
	}
	for _, e := range events {
		switch {
		case e.Ph == "C" && e.Name == "memory peak":
			if v, ok := e.Args["peak_bytes"].(float64); ok && v > rep.PeakBytes {
				rep.PeakBytes = v
			}
		case e.Ph != "X":
		case e.Cat == stepCat:
			family, _ := e.Args["kind"].(string)
			if byName[e.Name] == nil {
				byName[e.Name] = &row{Name: e.Name, Family: family}
			}
			if byFamily[family] == nil {
				byFamily[family] = &row{Name: family, Family: family}
			}
			byName[e.Name].add(e)
			byFamily[family].add(e)
			if family != "CONTROL" { // a While, If or Call: its body's steps are counted already
				rep.StepUs += e.Dur
			}
		case e.Cat == "run":
			rep.Runs++
			rep.RunUs += e.Dur
		case e.Cat == "gpu":
			rep.GPURuns++
			rep.GPURunUs += e.Dur
		case e.Cat == "compile" && e.Name == "compile":
			rep.Compiles++
			rep.CompileUs += e.Dur
		case e.Cat == "transfer":
			rep.Transfers++
			rep.TransferUs += e.Dur
			if b, ok := e.Args["bytes"].(float64); ok {
				rep.TransferBytes += b
			}
		}
	}
	for _, r := range byName {
		rep.Steps = append(rep.Steps, r)
	}
	for _, r := range byFamily {
		rep.Families = append(rep.Families, r)
	}
	byTime := func(rows []*row) {
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].TotalUs != rows[j].TotalUs {
				return rows[i].TotalUs > rows[j].TotalUs
			}
			return rows[i].Name < rows[j].Name
		})
	}
	byTime(rep.Steps)
	byTime(rep.Families)
	rep.Memory = memoryOf(events)
	return rep
}

func share(part, whole float64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * part / whole
}

// shareOf is a row's share of the steps' time; a control op's ("-") contains its body's steps.
func shareOf(r *row, whole float64) string {
	if r.Family == "CONTROL" {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", share(r.TotalUs, whole))
}

func rate(r *row) string {
	if !elementwise(r.Family) || r.BytesUs <= 0 {
		return "-"
	}
	perSec := r.Bytes / r.BytesUs * 1e6
	switch {
	case perSec >= 1e9:
		return fmt.Sprintf("%.2f GB/s", perSec/1e9)
	case perSec >= 1e6:
		return fmt.Sprintf("%.2f MB/s", perSec/1e6)
	}
	return fmt.Sprintf("%.0f B/s", perSec)
}

func printReport(w io.Writer, rep report, top int) {
	fmt.Fprintf(w, "%d execution(s), %.1f µs in all; %d compile(s), %.1f µs; %d transfer(s), %.0f bytes, %.1f µs\n",
		rep.Runs, rep.RunUs, rep.Compiles, rep.CompileUs, rep.Transfers, rep.TransferBytes, rep.TransferUs)
	if rep.PeakBytes > 0 {
		fmt.Fprintf(w, "peak device memory: %.0f bytes\n", rep.PeakBytes)
	}
	if rep.GPURuns > 0 {
		fmt.Fprintf(w, "on the GPU: %d execution(s), %.1f µs in all\n", rep.GPURuns, rep.GPURunUs)
	}
	if rep.GPU {
		fmt.Fprintf(w, "steps (GPU time): %.1f µs in all\n\n", rep.StepUs)
	} else {
		fmt.Fprintf(w, "steps: %.1f µs in all\n\n", rep.StepUs)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "total µs\tshare\tcount\tmean µs\telementwise rate\t step\t")
	for i, r := range rep.Steps {
		if i == top {
			fmt.Fprintf(tw, "\t\t\t\t\t (%d more)\t\n", len(rep.Steps)-top)
			break
		}
		fmt.Fprintf(tw, "%.1f\t%s\t%d\t%.2f\t%s\t %s [%s]\t\n", r.TotalUs, shareOf(r, rep.StepUs), r.Count,
			r.TotalUs/float64(r.Count), rate(r), r.Name, r.Family)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t")
	fmt.Fprintln(tw, "total µs\tshare\tcount\tmean µs\telementwise rate\t family\t")
	for _, r := range rep.Families {
		fmt.Fprintf(tw, "%.1f\t%s\t%d\t%.2f\t%s\t %s\t\n", r.TotalUs, shareOf(r, rep.StepUs), r.Count,
			r.TotalUs/float64(r.Count), rate(r), r.Name)
	}
	tw.Flush()
	printMemory(w, rep.Memory, top)
}

func printMemory(w io.Writer, m memoryReport, top int) {
	if m.Peak.Use <= 0 {
		return
	}
	fmt.Fprintf(w, "\nmemory in use at its highest after a step: %s, after %s (%s)\n", human(m.Peak.Use), m.Peak.Name, m.Peak.Out)
	if len(m.Rises) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "raised by\tto\t step (its results)\t")
	for i, r := range m.Rises {
		if i == top {
			fmt.Fprintf(tw, "\t\t (%d more)\t\n", len(m.Rises)-top)
			break
		}
		fmt.Fprintf(tw, "%s\t%s\t %s (%s)\t\n", human(r.Rise), human(r.Use), r.Name, r.Out)
	}
	tw.Flush()
}

func main() {
	top := flag.Int("n", 20, "steps to list")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: lathe-trace [-n N] trace.json\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	data, err := os.ReadFile(flag.Arg(0))
	if err == nil {
		var events []event
		if events, err = load(data); err == nil {
			printReport(os.Stdout, summarize(events), *top)
			return
		}
	}
	fmt.Fprintf(os.Stderr, "lathe-trace: %s: %v\n", flag.Arg(0), strings.TrimSpace(err.Error()))
	os.Exit(1)
}
