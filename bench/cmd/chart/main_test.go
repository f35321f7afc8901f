package main

import (
	"os"
	"strings"
	"testing"
)

// The checked-in chart is the one docs/figures.tsv draws: after editing the TSV, run
// go run ./bench/cmd/chart -in docs/figures.tsv -out docs/figures.svg
func TestFiguresSVGCurrent(t *testing.T) {
	f, err := os.Open("../../../docs/figures.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	figs, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../../../docs/figures.svg")
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != draw(figs) {
		t.Errorf("docs/figures.svg is stale: go run ./bench/cmd/chart -in docs/figures.tsv -out docs/figures.svg")
	}
}

func TestParseErrors(t *testing.T) {
	header := strings.Join(columns, "\t") + "\n"
	for name, text := range map[string]string{
		"empty":      "# only a comment\n",
		"no header":  "g\tw\tl\tp\t1\t2\t0.5\td\tm\tc\n",
		"few fields": header + "g\tw\tl\tp\t1\t2\t0.5\n",
		"bad ratio":  header + "g\tw\tl\tp\t1\t2\tx\td\tm\tc\n",
		"zero ratio": header + "g\tw\tl\tp\t1\t2\t0\td\tm\tc\n",
	} {
		if _, err := parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
