// Command chart draws docs/figures.svg, the README's chart, from docs/figures.tsv: the headline
// figures of docs/BENCHMARKS.md, each lathe's median time over a peer's from the same run. Pure Go,
// no cgo: it reads the checked-in data, not a live run.
//
//	go run ./bench/cmd/chart -in docs/figures.tsv -out docs/figures.svg
//
// The TSV's columns: group, workload, lathe, peer, lathe_ms, peer_ms, ratio (lathe / peer, as the
// benchmark printed it), date, machine, command; lines starting with '#' are comments, the first
// other line is the header. A group is one heading of the chart (its lathe configuration, machine
// and dates are printed under it); a workload is one row of bars, one bar per peer, on a log scale
// around 1 (left of the line: lathe is faster).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// figure is one line of the TSV.
type figure struct {
	group, workload, lathe, peer string
	latheMS, peerMS, ratio       string // as written (the chart prints them unchanged)
	r                            float64
	date, machine, command       string
}

var columns = []string{"group", "workload", "lathe", "peer", "lathe_ms", "peer_ms", "ratio", "date", "machine", "command"}

func parse(r io.Reader) ([]figure, error) {
	var out []figure
	sc := bufio.NewScanner(r)
	line, header := 0, false
	for sc.Scan() {
		line++
		t := sc.Text()
		if strings.TrimSpace(t) == "" || strings.HasPrefix(t, "#") {
			continue
		}
		f := strings.Split(t, "\t")
		if !header {
			if !slices.Equal(f, columns) {
				return nil, fmt.Errorf("line %d: header %q, want %q", line, f, columns)
			}
			header = true
			continue
		}
		if len(f) != len(columns) {
			return nil, fmt.Errorf("line %d: %d fields, want %d", line, len(f), len(columns))
		}
		v, err := strconv.ParseFloat(f[6], 64)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("line %d: ratio %q is not a positive number", line, f[6])
		}
		out = append(out, figure{f[0], f[1], f[2], f[3], f[4], f[5], f[6], v, f[7], f[8], f[9]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no figures")
	}
	return out, nil
}

// draw returns the SVG text for figs (deterministic: the same TSV gives the same bytes).
func draw(figs []figure) string {
	const (
		width, left, right, top = 860.0, 230.0, 170.0, 50.0
		barH, rowGap, groupHead = 15.0, 8.0, 44.0
	)
	colors := []string{"#2b6cb0", "#dd6b20", "#38a169", "#805ad5"}
	// groups, workloads and peers in order of first appearance
	var groups, peers []string
	for _, f := range figs {
		if !slices.Contains(groups, f.group) {
			groups = append(groups, f.group)
		}
		if !slices.Contains(peers, f.peer) {
			peers = append(peers, f.peer)
		}
	}
	lo, hi := 1.0, 1.0
	for _, f := range figs {
		lo, hi = math.Min(lo, f.r), math.Max(hi, f.r)
	}
	// the axis: from a power of 10 or its half-step below the smallest ratio to one above the largest
	eLo, eHi := math.Floor(math.Log10(lo)*4)/4, math.Ceil(math.Log10(hi)*4)/4
	if eHi-eLo < 0.5 {
		eHi = eLo + 0.5
	}
	plotW := width - left - right
	x := func(v float64) float64 { return left + (math.Log10(v)-eLo)/(eHi-eLo)*plotW }

	var body strings.Builder
	y := top
	for _, g := range groups {
		var rows []figure
		var workloads, dates, machines, lathes []string
		for _, f := range figs {
			if f.group != g {
				continue
			}
			rows = append(rows, f)
			for _, p := range []struct {
				list *[]string
				v    string
			}{{&workloads, f.workload}, {&dates, f.date}, {&machines, f.machine}, {&lathes, f.lathe}} {
				if !slices.Contains(*p.list, p.v) {
					*p.list = append(*p.list, p.v)
				}
			}
		}
		fmt.Fprintf(&body, `<text x="10" y="%.1f" font-size="13" font-weight="bold">%s</text>`+"\n", y+14, esc(g))
		fmt.Fprintf(&body, `<text x="10" y="%.1f" fill="#555">%s, %s, %s</text>`+"\n", y+30,
			esc(strings.Join(lathes, ", ")), esc(strings.Join(machines, ", ")), esc(strings.Join(dates, ", ")))
		y += groupHead
		for _, w := range workloads {
			n := 0
			for _, f := range rows {
				if f.workload != w {
					continue
				}
				if n == 0 {
					fmt.Fprintf(&body, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", left-8, y+barH-3, esc(w))
				}
				x0, x1 := x(1), x(f.r)
				if x1 < x0 {
					x0, x1 = x1, x0
				}
				ci := slices.Index(peers, f.peer) % len(colors)
				fmt.Fprintf(&body, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
					x0, y+2, math.Max(x1-x0, 1), barH-4, colors[ci])
				fmt.Fprintf(&body, `<text x="%.1f" y="%.1f" fill="#333">%s vs %s (%s / %s ms)</text>`+"\n",
					math.Max(x(f.r), x(1))+4, y+barH-3, esc(f.ratio), esc(f.peer), esc(f.latheMS), esc(f.peerMS))
				y += barH
				n++
			}
			y += rowGap
		}
	}
	bottom := y + 6
	height := bottom + 60

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">lathe's median step time over each peer's, same run (log scale; left of 1: lathe is faster)</text>`+"\n")
	// grid at quarter decades, labelled
	for e := eLo; e <= eHi+1e-9; e += 0.25 {
		v := math.Pow(10, e)
		gx := x(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", gx, top, gx, bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, bottom+16, strconv.FormatFloat(v, 'g', 2, 64))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", x(1), top, x(1), bottom)
	b.WriteString(body.String())
	// legend
	lx := left
	for i, p := range peers {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/>`+"\n", lx, bottom+30, colors[i%len(colors)])
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#333">vs %s</text>`+"\n", lx+16, bottom+40, esc(p))
		lx += 110
	}
	fmt.Fprintf(&b, `<text x="10" y="%.1f" fill="#555">data: docs/figures.tsv (docs/BENCHMARKS.md)</text>`+"\n", bottom+52)
	b.WriteString("</svg>\n")
	return b.String()
}

func esc(s string) string { return html.EscapeString(s) }

func main() {
	in := flag.String("in", "docs/figures.tsv", "figures (TSV)")
	out := flag.String("out", "docs/figures.svg", "SVG to write")
	flag.Parse()
	f, err := os.Open(*in)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chart: %v\n", err)
		os.Exit(1)
	}
	figs, err := parse(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chart: %s: %v\n", *in, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(draw(figs)), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "chart: %v\n", err)
		os.Exit(1)
	}
}
