// Command suitecount reads `go test -json` output on stdin and prints, per package and in all,
// how many top-level tests passed, failed and were skipped, and every failure. With -allow FILE
// (lines "package TestName", # comments), failures listed there are reported as shared with
// GoMLX's go backend and only the others make it exit non-zero. scripts/gomlx-suite.sh uses it.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

func main() {
	allowFile := flag.String("allow", "", "comma-separated files of allowed failures: lines \"package TestName\"")
	label := flag.String("label", "suite", "name printed before the counts")
	prefix := flag.String("trim", "github.com/gomlx/gomlx/", "package path prefix left out when printing")
	flag.Parse()

	allowed := map[string]string{} // failure -> the file that allows it
	for _, file := range strings.Split(*allowFile, ",") {
		if file == "" {
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			if f := strings.Fields(line); len(f) == 2 {
				allowed[f[0]+" "+f[1]] = filepath.Base(file)
			}
		}
	}

	type counts struct{ pass, fail, skip int }
	perPkg := map[string]*counts{}
	var failures, pkgFailures []string
	testsSeen := map[string]bool{} // packages that reported at least one test
	running := map[string]bool{}   // "package Test" started and not finished
	crashed := map[string]bool{}
	output := map[string][]string{} // package-level output, shown when a package fails without a failing test
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Package == "" {
			continue
		}
		pkg := strings.TrimPrefix(e.Package, *prefix)
		c := perPkg[pkg]
		if c == nil {
			c = &counts{}
			perPkg[pkg] = c
		}
		if e.Test == "" {
			if e.Action == "output" {
				output[pkg] = append(output[pkg], e.Output)
			}
			if e.Action == "fail" && !testsSeen[pkg] {
				pkgFailures = append(pkgFailures, pkg)
			}
			continue
		}
		if strings.Contains(e.Test, "/") { // subtests are counted through their top-level test
			continue
		}
		key := pkg + " " + e.Test
		if e.Action == "run" {
			running[key] = true
			continue
		}
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			delete(running, key)
		}
		switch e.Action {
		case "pass":
			c.pass++
		case "fail":
			c.fail++
			failures = append(failures, pkg+" "+e.Test)
		case "skip":
			c.skip++
		default:
			continue
		}
		testsSeen[pkg] = true
	}

	// A test still running when its package ended stopped the test binary (a panic, a crash).
	for key := range running {
		pkg := strings.Fields(key)[0]
		perPkg[pkg].fail++
		failures = append(failures, key)
		crashed[key] = true
	}

	pkgs := make([]string, 0, len(perPkg))
	for p := range perPkg {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	var total counts
	for _, p := range pkgs {
		c := perPkg[p]
		if c.pass+c.fail+c.skip == 0 {
			continue
		}
		fmt.Printf("  %-40s %4d passed, %3d failed, %3d skipped\n", p, c.pass, c.fail, c.skip)
		total.pass += c.pass
		total.fail += c.fail
		total.skip += c.skip
	}
	unexpected := 0
	sort.Strings(failures)
	for _, f := range failures {
		note := ""
		if crashed[f] {
			note = " (stopped the test binary: the package's later tests did not run)"
		}
		if file, ok := allowed[f]; ok {
			fmt.Printf("  FAIL %s%s (allowed: %s)\n", f, note, file)
		} else {
			fmt.Printf("  FAIL %s%s\n", f, note)
			unexpected++
		}
	}
	for _, p := range pkgFailures {
		fmt.Printf("  FAIL %s: the package failed outside its tests:\n", p)
		out := output[p]
		if len(out) > 20 {
			out = out[len(out)-20:]
		}
		for _, l := range out {
			fmt.Printf("    %s", l)
		}
		unexpected++
	}
	fmt.Printf("%s: %d passed, %d failed, %d skipped\n", *label, total.pass, total.fail, total.skip)
	if *allowFile != "" {
		fmt.Printf("%s: %d allowed failures, %d others\n", *label, total.fail-(unexpected-len(pkgFailures)), unexpected)
		if unexpected > 0 {
			os.Exit(1)
		}
	}
}
