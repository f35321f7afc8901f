package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lathe-dev/lathe/compute/lathe"
	"github.com/lathe-dev/lathe/internal/launch"
)

// Jobs of several processes on loopback (docs/ARCHITECTURE.md "A job of several processes"): the
// test binary runs itself as each process (TestJobChild), each process checks its data-parallel
// loss curve against the single-process one, and the fault cases must end in clear errors within
// the job's timeout.

const childVar = "LATHE_DATAPARALLEL_CHILD" // "devices,steps[,die-process,die-step]"

// TestJobChild is one process of a job when childVar is set; otherwise it does nothing.
func TestJobChild(t *testing.T) {
	spec := os.Getenv(childVar)
	if spec == "" {
		return
	}
	f := strings.Split(spec, ",")
	devices, _ := strconv.Atoi(f[0])
	steps, _ := strconv.Atoi(f[1])
	if len(f) == 4 {
		dieProc, _ := strconv.Atoi(f[2])
		dieStep, _ := strconv.Atoi(f[3])
		me, _ := strconv.Atoi(os.Getenv("LATHE_PROCESS_ID"))
		stepHook = func(s int) {
			if me == dieProc && s == dieStep {
				fmt.Println("dying on purpose")
				os.Exit(3)
			}
		}
	}
	c := config{features: 32, hidden: 64, classes: 4, batch: 128, steps: steps, lr: 0.5}
	if err := run("lathe:cpu", devices, c, 1e-4); err != nil {
		fmt.Printf("child error: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("child ok")
}

func glooPlugin(t *testing.T) string {
	if p := os.Getenv("LATHE_GLOO_LIBRARY"); p != "" {
		return p
	}
	p, _ := filepath.Abs("../../build/liblathe_gloo.so")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("skipped: no Gloo plugin (apt-get install libgloo-dev; make build/liblathe_gloo.so; or set LATHE_GLOO_LIBRARY)")
	}
	return p
}

type jobRun struct {
	res     launch.Result
	out     string
	elapsed time.Duration
}

func runJob(t *testing.T, procs int, spec string, timeout time.Duration, keepGoing bool, envOf func(int) []string) jobRun {
	t.Helper()
	var out, log bytes.Buffer
	start := time.Now()
	res, err := launch.Run(launch.Options{
		Processes: procs, Timeout: timeout, KeepGoing: keepGoing, EnvOf: envOf, Limit: 90 * time.Second,
		Env:    []string{childVar + "=" + spec, "LATHE_GLOO_LIBRARY=" + glooPlugin(t)},
		Stdout: &out, Log: &log,
	}, []string{os.Args[0], "-test.run=^TestJobChild$"})
	if err != nil {
		t.Fatal(err)
	}
	return jobRun{res, out.String() + log.String(), time.Since(start)}
}

// threadsOf reads N from a lathe:cpu description's "(N threads".
func threadsOf(t *testing.T, desc string) int {
	t.Helper()
	i := strings.Index(desc, " threads")
	j := strings.LastIndex(desc[:max(i, 0)], "(")
	n, err := strconv.Atoi(desc[j+1 : max(i, j+1)])
	if i < 0 || j < 0 || err != nil {
		t.Fatalf("no thread count in %q", desc)
	}
	return n
}

func TestJob(t *testing.T) {
	alone, err := lathe.NewWithConfig("lathe:cpu")
	if err != nil {
		t.Fatal(err)
	}
	all := threadsOf(t, alone.Description())
	alone.Finalize()
	for _, tc := range []struct{ procs, devices int }{{2, 1}, {4, 1}, {2, 2}} {
		t.Run(fmt.Sprintf("%dx%d", tc.procs, tc.devices), func(t *testing.T) {
			r := runJob(t, tc.procs, fmt.Sprintf("%d,20", tc.devices), 20*time.Second, false, nil)
			if r.res.First >= 0 || strings.Count(r.out, "child ok") != tc.procs {
				t.Fatalf("job of %d processes with %d devices each failed (first: %d):\n%s", tc.procs, tc.devices, r.res.First, r.out)
			}
			if !strings.Contains(r.out, fmt.Sprintf("%d replicas in all", tc.procs*tc.devices)) {
				t.Errorf("no process reported %d replicas:\n%s", tc.procs*tc.devices, r.out)
			}
			// lathe-launch's processes share this host's cores: each pool takes its share
			if want := max(1, all/tc.procs); !strings.Contains(r.out, fmt.Sprintf("(%d threads", want)) ||
				strings.Contains(r.out, fmt.Sprintf("(%d threads", all)) && want != all {
				t.Errorf("processes of a job of %d on %d threads did not take %d threads each:\n%s", tc.procs, all, want, r.out)
			}
		})
	}
}

// wantFail checks that process p failed with a message containing want, within limit.
func wantFail(t *testing.T, r jobRun, p int, want string, limit time.Duration) {
	t.Helper()
	if r.res.Errs[p] == nil {
		t.Errorf("process %d succeeded, want an error containing %q:\n%s", p, want, r.out)
	} else if !strings.Contains(r.out, fmt.Sprintf("[%d] ", p)) || !strings.Contains(r.out, want) {
		t.Errorf("process %d: no %q in the output:\n%s", p, want, r.out)
	}
	if r.elapsed > limit {
		t.Errorf("the job took %s, want at most %s", r.elapsed, limit)
	}
}

func TestJobFaults(t *testing.T) {
	const T = 3 * time.Second // the job's timeout in these cases
	limit := 4*T + 10*time.Second
	t.Run("dead peer", func(t *testing.T) {
		r := runJob(t, 2, "1,40,1,5", T, true, nil)
		wantFail(t, r, 0, "AllReduce across 2 processes failed", limit)
	})
	t.Run("bad token", func(t *testing.T) {
		r := runJob(t, 2, "1,5", T, true, func(p int) []string {
			if p == 1 {
				return []string{"LATHE_JOB_TOKEN=guessed"}
			}
			return nil
		})
		wantFail(t, r, 1, "wrong job token", limit)
		wantFail(t, r, 0, `barrier "lathe/joined" timed out`, limit)
	})
	t.Run("wrong count", func(t *testing.T) {
		r := runJob(t, 2, "1,5", T, true, func(p int) []string {
			if p == 1 {
				return []string{"LATHE_NUM_PROCESSES=3"}
			}
			return nil
		})
		wantFail(t, r, 1, "says the job has 3 processes, the coordinator (process 0) says 2", limit)
	})
	t.Run("duplicate index", func(t *testing.T) {
		r := runJob(t, 3, "1,5", T, true, func(p int) []string {
			if p == 2 {
				return []string{"LATHE_PROCESS_ID=1"}
			}
			return nil
		})
		if !strings.Contains(r.out, "has already joined (two processes with the same index)") {
			t.Errorf("no process reported the duplicate index:\n%s", r.out)
		}
		if r.res.First < 0 || r.elapsed > limit {
			t.Errorf("the job should fail within %s (first failure %d, took %s)", limit, r.res.First, r.elapsed)
		}
	})
	t.Run("unreachable coordinator", func(t *testing.T) {
		addr, err := launch.FreeAddress()
		if err != nil {
			t.Fatal(err)
		}
		r := runJob(t, 1, "1,5", T, true, func(int) []string {
			return []string{"LATHE_COORDINATOR=" + addr, "LATHE_NUM_PROCESSES=2", "LATHE_PROCESS_ID=1"}
		})
		wantFail(t, r, 0, "is unreachable after 3000 ms", limit)
	})
}
