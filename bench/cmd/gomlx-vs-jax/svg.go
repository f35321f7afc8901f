package main

import (
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// writeSVG draws, per workload, one horizontal bar per contender: its median step time divided by
// lathe's, on a log scale (1 = as fast as lathe; a bar to the right of the line is slower).
func writeSVG(path string, results []result) error {
	const (
		left, right, top = 160.0, 90.0, 60.0
		barH, gap, headH = 16.0, 10.0, 18.0
		width            = 900.0
	)
	colors := map[int]string{0: "#2b6cb0", 1: "#dd6b20", 2: "#38a169", 3: "#805ad5"}
	// contenders in order of first appearance, for colours and the legend
	var names []string
	seen := map[string]bool{}
	maxR, minR := 1.0, 1.0
	for _, r := range results {
		for _, n := range r.names {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
			if v := ratio(r, n); v > 0 {
				maxR, minR = math.Max(maxR, v), math.Min(minR, v)
			}
		}
	}
	lo, hi := math.Floor(math.Log10(minR)*2)/2, math.Ceil(math.Log10(maxR)*2)/2
	if hi-lo < 1 {
		hi = lo + 1
	}
	plotW := width - left - right
	x := func(v float64) float64 { return left + (math.Log10(v)-lo)/(hi-lo)*plotW }
	rows := 0
	for _, r := range results {
		rows += len(r.names)
	}
	height := top + float64(rows)*barH + float64(len(results))*(gap+headH) + 70
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="24" font-size="15" font-weight="bold">GoMLX training steps: median step time relative to lathe:cpu (log scale; &gt;1 = slower than lathe)</text>`+"\n", 10.0)
	fmt.Fprintf(&b, `<text x="%.0f" y="42" fill="#555">%s</text>`+"\n", 10.0, time.Now().Format("2006-01-02"))
	// grid: powers of 10 and their halves
	for e := lo; e <= hi+1e-9; e += 0.5 {
		v := math.Pow(10, e)
		gx := x(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/>`+"\n", gx, top-6, gx, height-50)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", gx, height-36, fmtRatio(v))
	}
	y := top
	for _, r := range results {
		fmt.Fprintf(&b, `<text x="10" y="%.1f" font-weight="bold">%s</text>`+"\n", y+12, r.workload)
		y += headH
		for _, n := range r.names {
			v := ratio(r, n)
			ci := indexOf(names, n)
			x0, x1 := x(1), x(v)
			if x1 < x0 {
				x0, x1 = x1, x0
			}
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#333">%s</text>`+"\n", left-6, y+barH-4, n)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", x0, y+2, math.Max(x1-x0, 1), barH-4, colors[ci%4])
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#333">%s (%s ms)</text>`+"\n", math.Max(x(v), x(1))+4, y+barH-4, fmtRatio(v), ms(r.medians[n]))
			y += barH
		}
		y += gap
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="black"/>`+"\n", x(1), top-6, x(1), height-50)
	fmt.Fprintf(&b, "</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func ratio(r result, n string) float64 {
	base := r.medians[r.names[0]]
	if base == 0 || r.medians[n] == 0 {
		return 0
	}
	return float64(r.medians[n]) / float64(base)
}

func fmtRatio(v float64) string {
	if v >= 10 {
		return fmt.Sprintf("%.0fx", v)
	}
	return fmt.Sprintf("%.2gx", v)
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return 0
}
