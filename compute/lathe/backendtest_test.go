package lathe_test

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

// childEnv names the configuration the child process runs backendtest on.
const childEnv = "LATHE_BACKENDTEST_CONFIG"

// backendtestConfigs are the lathe configurations GoMLX's compliance suite runs on: the
// default, fusion off, and the test device (two devices, every job completed late on purpose,
// so results are read while work is still queued).
var backendtestConfigs = []string{"lathe:cpu", "lathe:cpu,fuse=0", "lathe:cpu,devices=2,async=late"}

// backendtestSummary is printed by TestMain (also without -v), one line per configuration.
var backendtestSummary []string

func TestMain(m *testing.M) {
	code := m.Run()
	for _, line := range backendtestSummary {
		fmt.Println(line)
	}
	os.Exit(code)
}

// TestBackendTestChild runs GoMLX's conformance suite; it only runs inside the child process
// started by TestBackendTest, which counts its subtests.
func TestBackendTestChild(t *testing.T) {
	config := os.Getenv(childEnv)
	if config == "" {
		t.Skip("runs as the child process of TestBackendTest")
	}
	b, err := compute.NewWithConfig(config)
	if err != nil {
		t.Fatalf("%s: %+v", config, err)
	}
	defer b.Finalize()
	backendtest.RunAll(t, b, nil)
}

var resultLine = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+)`)

// TestBackendTest runs backendtest.RunAll for each configuration in a child process (go test
// offers no way to enumerate subtest results in-process) and reports how many leaf subtests
// passed, were skipped (ops the engine reports as unsupported) and failed.
func TestBackendTest(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child process")
	}
	for _, config := range backendtestConfigs {
		t.Run(config, func(t *testing.T) { runBackendTest(t, config) })
	}
}

func runBackendTest(t *testing.T, config string) {
	cmd := osexec.Command(os.Args[0], "-test.run=^TestBackendTestChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+config)
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
	var failed []string
	for i, r := range results {
		// go test -v prints a parent's result, then its subtests' results indented deeper.
		if i+1 < len(results) && results[i+1].indent > r.indent {
			continue // a parent
		}
		counts[r.status]++
		if r.status == "FAIL" {
			failed = append(failed, r.name)
		}
	}
	summary := fmt.Sprintf("backendtest %s: %d passed, %d skipped, %d failed", config,
		counts["PASS"], counts["SKIP"], counts["FAIL"])
	backendtestSummary = append(backendtestSummary, summary)
	t.Log(summary)
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
