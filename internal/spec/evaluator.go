package spec

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// InProcess returns an Evaluator that evaluates files on n goroutines of
// this process (n <= 0 means one per CPU). It stops waiting for a file
// after the timeout, but cannot stop the evaluation itself, nor bound its
// memory: use it for trusted input and tests, and a Pool for anything read
// from a repository.
func InProcess(n int) Evaluator {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return inProcess{workers: n}
}

type inProcess struct{ workers int }

func (p inProcess) Evaluate(ctx context.Context, b Bounds, in []Input) ([]Output, error) {
	return fanOut(ctx, p.workers, b, in, func() (evalFunc, func(), error) {
		var c *compiler
		var used int
		eval := func(i Input, timeout time.Duration) (Output, bool) {
			// A cue.Context only grows: start a fresh one now and then so
			// that memory stays bounded however many files are loaded.
			if used++; used > recycleAfter {
				c, used = nil, 1
			}
			if c == nil {
				var err error
				if c, err = newCompiler(); err != nil {
					return Output{Name: i.Name, Errors: []*Error{{File: i.Name, Line: 1, Column: 1, Msg: err.Error()}}}, false
				}
			}
			done := make(chan Output, 1)
			go func(c *compiler) { done <- c.evaluate(i) }(c)
			t := time.NewTimer(timeout)
			defer t.Stop()
			select {
			case o := <-done:
				return o, false
			case <-t.C:
				// The evaluation goes on in the background; its compiler
				// is abandoned with it.
				c = nil
				return Output{}, true
			case <-ctx.Done():
				c = nil
				return Output{Name: i.Name, Errors: []*Error{{File: i.Name, Line: 1, Column: 1, Msg: ctx.Err().Error()}}}, false
			}
		}
		return eval, func() {}, nil
	})
}

// recycleAfter is how many files one compiler evaluates before it is
// replaced.
const recycleAfter = 200

func timeoutOutput(name string, d time.Duration) Output {
	return Output{Name: name, Errors: []*Error{{File: name, Line: 1, Column: 1,
		Msg: fmt.Sprintf("evaluation did not finish within %s; stopped (is there a definition that never ends?)", d)}}}
}

// fanOut runs in across n workers made by newWorker, within b, keeping
// input order.
func fanOut(ctx context.Context, n int, b Bounds, in []Input, newWorker func() (eval evalFunc, close func(), err error)) ([]Output, error) {
	outs := make([]Output, len(in))
	next := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range min(n, len(in)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eval, closeFn, err := newWorker()
			if err != nil {
				errs <- err
				for range next {
				}
				return
			}
			defer closeFn()
			for i := range next {
				outs[i] = b.run(in[i], eval)
			}
		}()
	}
feed:
	for i := range in {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return outs, nil
}
