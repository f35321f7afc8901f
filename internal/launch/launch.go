// Package launch starts a job of several processes on one host (lathe-launch): it picks a
// coordinator port on loopback, makes a token, sets each process's LATHE_* variables, forwards
// their output line by line with a "[rank]" prefix, and stops the others once one fails.
package launch

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Options of one job.
type Options struct {
	Processes   int
	Coordinator string        // HOST:PORT; "" picks a free port on 127.0.0.1
	Token       string        // "" makes a random one
	Timeout     time.Duration // the job's timeout (LATHE_JOB_TIMEOUT); 0 leaves lathe's default
	Env         []string      // extra variables for every process ("K=V")
	// EnvOf adds variables for process p only (tests use it to make faults); may be nil.
	EnvOf  func(p int) []string
	Stdout io.Writer // prefixed output of every process; nil = os.Stdout
	Log    io.Writer // the launcher's own lines; nil = os.Stderr
	Grace  time.Duration
	// KeepGoing leaves the others running when one fails (tests watch how they fail).
	KeepGoing bool
	// Limit kills every process still running after it (0: none).
	Limit time.Duration
}

// Result of a job: each process's exit error (nil for success), and the first that failed.
type Result struct {
	Errs  []error
	First int // -1 when every process succeeded
}

// FreeAddress returns 127.0.0.1:PORT for a port that was free a moment ago.
func FreeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// NewToken returns 128 random bits in hex.
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

type prefixWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func forward(r io.Reader, rank int, pw prefixWriter, done *sync.WaitGroup) {
	defer done.Done()
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		pw.mu.Lock()
		fmt.Fprintf(pw.w, "[%d] %s\n", rank, s.Text())
		pw.mu.Unlock()
	}
}

// Run starts argv as o.Processes processes and waits for them. When one exits with an error the
// others get SIGTERM, then SIGKILL after o.Grace (default 5 s).
func Run(o Options, argv []string) (Result, error) {
	res := Result{First: -1}
	if o.Processes < 1 || len(argv) == 0 {
		return res, fmt.Errorf("launch: need at least one process and a program")
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	if o.Grace == 0 {
		o.Grace = 5 * time.Second
	}
	var err error
	if o.Coordinator == "" {
		if o.Coordinator, err = FreeAddress(); err != nil {
			return res, err
		}
	}
	if o.Token == "" {
		if o.Token, err = NewToken(); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(o.Log, "lathe-launch: %d processes, coordinator %s, token %s\n", o.Processes, o.Coordinator, o.Token)
	pw := prefixWriter{&sync.Mutex{}, o.Stdout}
	outs := make([]sync.WaitGroup, o.Processes) // per process: its output read to the end
	cmds := make([]*exec.Cmd, o.Processes)
	res.Errs = make([]error, o.Processes)
	for p := range cmds {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), o.Env...)
		cmd.Env = append(cmd.Env, "LATHE_COORDINATOR="+o.Coordinator, "LATHE_NUM_PROCESSES="+strconv.Itoa(o.Processes),
			"LATHE_PROCESS_ID="+strconv.Itoa(p), "LATHE_JOB_TOKEN="+o.Token,
			"LATHE_LOCAL_PROCESSES="+strconv.Itoa(o.Processes)) // all on this host: they share its cores
		if o.Timeout > 0 {
			cmd.Env = append(cmd.Env, fmt.Sprintf("LATHE_JOB_TIMEOUT=%g", o.Timeout.Seconds()))
		}
		if o.EnvOf != nil {
			cmd.Env = append(cmd.Env, o.EnvOf(p)...)
		}
		stdout, err1 := cmd.StdoutPipe()
		stderr, err2 := cmd.StderrPipe()
		if err1 != nil || err2 != nil {
			return res, fmt.Errorf("launch: pipes: %v %v", err1, err2)
		}
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:p] {
				_ = c.Process.Kill()
				_ = c.Wait()
			}
			return res, fmt.Errorf("launch: starting process %d: %w", p, err)
		}
		outs[p].Add(2)
		go forward(stdout, p, pw, &outs[p])
		go forward(stderr, p, pw, &outs[p])
		cmds[p] = cmd
	}
	type exit struct {
		p   int
		err error
	}
	exits := make(chan exit, o.Processes)
	for p, cmd := range cmds {
		go func() {
			outs[p].Wait() // Wait closes the pipes: read them out first
			exits <- exit{p, cmd.Wait()}
		}()
	}
	var killTimer *time.Timer
	if o.Limit > 0 {
		limit := time.AfterFunc(o.Limit, func() {
			fmt.Fprintf(o.Log, "lathe-launch: the job ran past %s: killing it\n", o.Limit)
			for _, c := range cmds {
				_ = c.Process.Kill()
			}
		})
		defer limit.Stop()
	}
	for range cmds {
		e := <-exits
		res.Errs[e.p] = e.err
		if e.err != nil && res.First < 0 {
			res.First = e.p
			if o.KeepGoing {
				continue
			}
			fmt.Fprintf(o.Log, "lathe-launch: process %d failed (%v): stopping the others\n", e.p, e.err)
			for q, c := range cmds {
				if q != e.p {
					_ = c.Process.Signal(syscall.SIGTERM)
				}
			}
			killTimer = time.AfterFunc(o.Grace, func() {
				for _, c := range cmds {
					_ = c.Process.Kill()
				}
			})
		}
	}
	if killTimer != nil {
		killTimer.Stop()
	}
	return res, nil
}
