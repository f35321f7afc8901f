// Command lathe-launch runs a program as a job of several processes on this host, for lathe's
// multi-process backends (docs/ARCHITECTURE.md "A job of several processes"):
//
//	lathe-launch -n 2 ./lathe-dataparallel -devices 1
//
// It prints the coordinator's address and the job's token, gives each process LATHE_COORDINATOR,
// LATHE_NUM_PROCESSES, LATHE_PROCESS_ID, LATHE_JOB_TOKEN and LATHE_LOCAL_PROCESSES, prefixes each output line with the
// process's index, and stops every process once one fails (exiting with that one's status).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"

	"github.com/lathe-dev/lathe/internal/launch"
)

func main() {
	n := flag.Int("n", 2, "number of processes")
	coord := flag.String("coordinator", "", "coordinator HOST:PORT (default: a free port on 127.0.0.1)")
	token := flag.String("token", "", "the job's token (default: a new random one)")
	timeout := flag.Duration("timeout", 0, "the job's timeout for every wait (default: lathe's, 60s)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: lathe-launch [-n P] [-coordinator HOST:PORT] [-token T] [-timeout D] program [args...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	res, err := launch.Run(launch.Options{Processes: *n, Coordinator: *coord, Token: *token, Timeout: *timeout}, flag.Args())
	if err != nil {
		fmt.Fprintf(os.Stderr, "lathe-launch: %v\n", err)
		os.Exit(1)
	}
	if res.First >= 0 {
		var ee *exec.ExitError
		if errors.As(res.Errs[res.First], &ee) && ee.ExitCode() > 0 {
			os.Exit(ee.ExitCode())
		}
		os.Exit(1)
	}
}
