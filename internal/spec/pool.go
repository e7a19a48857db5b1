package spec

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"
)

// WorkerEnv is set in the environment of a Pool's worker processes. A
// program that can serve as its own worker checks it first thing in main:
//
//	if spec.IsWorker() {
//		os.Exit(spec.RunWorker())
//	}
const WorkerEnv = "FLEETLIFT_SPEC_WORKER"

const workerMemoryEnv = "FLEETLIFT_SPEC_WORKER_MEMORY"

// DefaultWorkerMemory is a worker's memory limit when a Pool sets none.
const DefaultWorkerMemory = 1 << 30

// Pool evaluates files in separate worker processes, so that a definition
// whose evaluation never ends or grows without bound is stopped (the
// worker is killed at the timeout, or dies at its memory limit) without
// harm to the caller. Workers are started on first use and kept until
// Close.
type Pool struct {
	// Command is the argv of a program that calls RunWorker when WorkerEnv
	// is set; usually the running executable.
	Command []string
	// Workers is the number of worker processes (default: one per CPU).
	Workers int
	// MemoryLimit is the memory each worker may use, in bytes (default
	// DefaultWorkerMemory).
	MemoryLimit int64

	mu   sync.Mutex
	idle []*worker
}

// NewSelfPool returns a Pool whose workers are the running executable.
func NewSelfPool() (*Pool, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for spec workers: %w", err)
	}
	return &Pool{Command: []string{exe}}, nil
}

// Evaluate implements Evaluator.
func (p *Pool) Evaluate(ctx context.Context, b Bounds, in []Input) ([]Output, error) {
	n := p.Workers
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return fanOut(ctx, n, b, in, func() (evalFunc, func(), error) {
		w, err := p.get()
		if err != nil {
			return nil, nil, err
		}
		eval := func(i Input, timeout time.Duration) (Output, bool) {
			if w == nil {
				if w, err = p.start(); err != nil {
					return Output{Name: i.Name, Errors: []*Error{{File: i.Name, Line: 1, Column: 1, Msg: err.Error()}}}, false
				}
			}
			o, ok, stopped := w.evaluate(ctx, timeout, i, p.memoryLimit())
			if !ok {
				w = nil
			}
			return o, stopped
		}
		release := func() {
			if w != nil {
				p.put(w)
			}
		}
		return eval, release, nil
	})
}

// Close stops the idle workers.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.idle {
		w.stop()
	}
	p.idle = nil
	return nil
}

func (p *Pool) memoryLimit() int64 {
	if p.MemoryLimit > 0 {
		return p.MemoryLimit
	}
	return DefaultWorkerMemory
}

func (p *Pool) get() (*worker, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return w, nil
	}
	p.mu.Unlock()
	return p.start()
}

func (p *Pool) put(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.idle = append(p.idle, w)
}

type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	enc    *json.Encoder
	dec    *json.Decoder
	stderr *headBuffer
	done   chan struct{}
}

func (p *Pool) start() (*worker, error) {
	if len(p.Command) == 0 {
		return nil, errors.New("spec pool: no worker command")
	}
	cmd := exec.Command(p.Command[0], p.Command[1:]...)
	cmd.Env = append(os.Environ(), WorkerEnv+"=1", workerMemoryEnv+"="+strconv.FormatInt(p.memoryLimit(), 10))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("start spec worker: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start spec worker: %w", err)
	}
	w := &worker{cmd: cmd, stdin: stdin, enc: json.NewEncoder(stdin), stderr: &headBuffer{max: 4096}, done: make(chan struct{})}
	cmd.Stderr = w.stderr
	w.dec = json.NewDecoder(bufio.NewReader(stdout))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start spec worker %s: %w", p.Command[0], err)
	}
	go func() {
		_ = cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// evaluate sends one file and waits for its result; ok is false when the
// worker had to be stopped and must not be used again, stopped is true
// when that was for the timeout.
func (w *worker) evaluate(ctx context.Context, timeout time.Duration, in Input, memLimit int64) (out Output, ok, stopped bool) {
	type reply struct {
		out Output
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		if err := w.enc.Encode(in); err != nil {
			ch <- reply{err: err}
			return
		}
		var o Output
		err := w.dec.Decode(&o)
		ch <- reply{out: o, err: err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err == nil {
			return r.out, true, false
		}
		w.stop()
		msg := "evaluation stopped: the worker process failed"
		if tail := w.stderr.String(); strings.Contains(tail, "out of memory") || strings.Contains(tail, "cannot allocate memory") {
			msg = fmt.Sprintf("evaluation used more than the memory limit of %d MiB; stopped", memLimit>>20)
		} else if tail != "" {
			msg += ": " + firstLine(tail)
		}
		return Output{Name: in.Name, Errors: []*Error{{File: in.Name, Line: 1, Column: 1, Msg: msg}}}, false, false
	case <-t.C:
		w.stop()
		return Output{}, false, true
	case <-ctx.Done():
		w.stop()
		return Output{Name: in.Name, Errors: []*Error{{File: in.Name, Line: 1, Column: 1, Msg: ctx.Err().Error()}}}, false, false
	}
}

func (w *worker) stop() {
	_ = w.stdin.Close()
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
	<-w.done
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// headBuffer keeps the first max bytes written to it: where a Go runtime
// crash says why it happened.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *headBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (b *headBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// IsWorker reports whether this process was started as a Pool worker.
func IsWorker() bool { return os.Getenv(WorkerEnv) == "1" }

// RunWorker serves evaluation requests on stdin and stdout until stdin
// closes, and returns the process exit code.
func RunWorker() int {
	limit, err := strconv.ParseInt(os.Getenv(workerMemoryEnv), 10, 64)
	if err != nil || limit <= 0 {
		limit = DefaultWorkerMemory
	}
	// The watchdog enforces the limit; the address-space limit is only a
	// backstop for growth faster than it looks (the Go runtime reserves
	// over a GiB of address space that it never uses).
	if err := limitAddressSpace(uint64(limit)*2 + 2<<30); err != nil {
		fmt.Fprintln(os.Stderr, "spec worker:", err)
		return 2
	}
	go watchMemory(uint64(limit), 10*time.Millisecond)
	// Evaluation allocates a lot of short-lived garbage; trade memory for
	// fewer collections, within the limit.
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(limit / 2)
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "spec worker:", err)
		return 1
	}
	return 0
}

// watchMemory ends the process when the memory the Go runtime holds from
// the operating system passes limit.
func watchMemory(limit uint64, every time.Duration) {
	samples := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	for range time.Tick(every) {
		metrics.Read(samples)
		used := samples[0].Value.Uint64() - samples[1].Value.Uint64()
		if used > limit {
			fmt.Fprintf(os.Stderr, "spec worker: out of memory: using %d MiB, limit %d MiB\n", used>>20, limit>>20)
			os.Exit(3)
		}
	}
}

func serve(r io.Reader, w io.Writer) error {
	c, err := newCompiler()
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReader(r))
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for used := 0; ; used++ {
		if used == recycleAfter {
			if c, err = newCompiler(); err != nil {
				return err
			}
			used = 0
		}
		var in Input
		if err := dec.Decode(&in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read request: %w", err)
		}
		if err := enc.Encode(c.evaluate(in)); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("write result: %w", err)
		}
	}
}
