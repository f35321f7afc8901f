// Package compliance runs GoMLX's backend compliance suite (backendtest.RunAll) on backend
// configurations, each in a child test process, and counts its leaf subtests: the tests of
// compute/lathe and compute/mlx share it.
package compliance

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	osexec "os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/support/backendtest"
)

// ChildEnv names the configuration the child process runs backendtest on.
const ChildEnv = "LATHE_BACKENDTEST_CONFIG"

// summary holds one line per configuration run, printed by PrintSummary.
var summary []string

// PrintSummary prints the result line of every configuration run (call it from TestMain, after
// m.Run, so the lines show without -v).
func PrintSummary() {
	for _, line := range summary {
		fmt.Println(line)
	}
}

// Child runs backendtest.RunAll on the configuration of ChildEnv; it only runs inside the child
// process started by Run.
func Child(t *testing.T) {
	config := os.Getenv(ChildEnv)
	if config == "" {
		t.Skip("runs as the child process of the backendtest runner")
	}
	b, err := compute.NewWithConfig(config)
	if err != nil {
		t.Fatalf("%s: %+v", config, err)
	}
	defer b.Finalize()
	backendtest.RunAll(t, b, nil)
}

var resultLine = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+)`)

// Run runs backendtest.RunAll for config in a child process that runs childTest of the current
// test binary (go test offers no way to enumerate subtest results in-process), records
// "backendtest <config>: N passed, N skipped, N failed" (leaf subtests; skips are ops the
// engine reports as unsupported) and fails t with the output of the failed subtests.
func Run(t *testing.T, config, childTest string) {
	cmd := osexec.Command(os.Args[0], "-test.run=^"+childTest+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), ChildEnv+"="+config)
	out, runErr := cmd.CombinedOutput()

	// A leaf is a result line not followed by a deeper result line of its own subtests.
	type result struct {
		indent       int
		status, name string
	}
	var results []result
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if m := resultLine.FindStringSubmatch(sc.Text()); m != nil {
			results = append(results, result{len(m[1]), m[2], m[3]})
		}
	}
	counts := map[string]int{}
	var failed, skipped []string
	for i, r := range results {
		// go test -v prints a parent's result, then its subtests' results indented deeper.
		if i+1 < len(results) && results[i+1].indent > r.indent {
			continue // a parent
		}
		counts[r.status]++
		switch r.status {
		case "FAIL":
			failed = append(failed, r.name)
		case "SKIP":
			skipped = append(skipped, r.name)
		}
	}
	line := fmt.Sprintf("backendtest %s: %d passed, %d skipped, %d failed", config,
		counts["PASS"], counts["SKIP"], counts["FAIL"])
	if len(skipped) > 0 {
		line += " (skipped: " + strings.Join(skipped, ", ") + ")"
	}
	summary = append(summary, line)
	t.Log(line)
	if len(results) == 0 || (runErr != nil && len(failed) == 0) {
		t.Fatalf("backendtest child did not run properly (%v):\n%s", runErr, tail(string(out), 4000))
	}
	if len(failed) > 0 {
		t.Errorf("%d backendtest subtests failed:\n  %s\n\nfailure output:\n%s", len(failed),
			strings.Join(failed, "\n  "), failureOutput(lines, failed))
	}
}

var headerLine = regexp.MustCompile(`^=== (RUN|CONT|NAME|PAUSE)\s+(\S+)`)

// failureOutput returns, for each failed test, the lines streamed under its "=== RUN" header
// (-v prints logs as they happen).
func failureOutput(lines []string, failed []string) string {
	byName := map[string][]string{}
	cur := ""
	for _, l := range lines {
		if m := headerLine.FindStringSubmatch(l); m != nil {
			cur = m[2]
			continue
		}
		if resultLine.MatchString(l) {
			cur = ""
			continue
		}
		if cur != "" {
			byName[cur] = append(byName[cur], l)
		}
	}
	var b strings.Builder
	for _, name := range failed {
		fmt.Fprintf(&b, "--- %s\n%s\n", name, strings.Join(byName[name], "\n"))
	}
	return tail(b.String(), 30000)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "...\n" + s[len(s)-n:]
	}
	return s
}
