package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/podexec"
)

// Limits of exec results (seed 002), so a request stays well within
// etcd's object size limit (1.5 MiB by default).
const (
	// MaxStdout and MaxStderr cap one result's outputs, as JSON encodes
	// them.
	MaxStdout = 1 << 20
	MaxStderr = 64 << 10
	// MaxResults are kept at most.
	MaxResults = 100
	// ResultBudget bounds the outputs of all kept results together;
	// results the worker consumed are evicted first, oldest first, and
	// a new result is cut to fit what the unconsumed ones leave.
	ResultBudget = MaxStdout + MaxStderr
	// DefaultExecTimeout bounds a request that names no timeout.
	DefaultExecTimeout = 10 * time.Minute
	// execGrace is how long past its timeout the controller waits for
	// the shim, which enforces the timeout in the pod, to report.
	execGrace = 30 * time.Second
)

// execs runs exec requests in the background and hands their results to
// the reconcile that asks; a finished run wakes its request's reconcile.
type execs struct {
	executor podexec.Executor
	wake     chan event.GenericEvent
	metrics  *metrics
	timeout  time.Duration

	mu   sync.Mutex
	runs map[types.UID]map[string]*execRun
}

type execRun struct {
	cancel context.CancelFunc
	done   bool
	result v1alpha1.ExecResult
}

func newExecs(x podexec.Executor, m *metrics, timeout time.Duration) *execs {
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	return &execs{executor: x, wake: make(chan event.GenericEvent, 1024), metrics: m, timeout: timeout, runs: map[types.UID]map[string]*execRun{}}
}

// start runs req in sbr's pod.
func (e *execs) start(sbr *v1alpha1.SandboxRequest, req v1alpha1.ExecRequest) {
	timeout := e.timeout
	if req.TimeoutSeconds > 0 {
		timeout = time.Duration(req.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+execGrace)
	run := &execRun{cancel: cancel}
	e.mu.Lock()
	if e.runs[sbr.UID] == nil {
		e.runs[sbr.UID] = map[string]*execRun{}
	}
	e.runs[sbr.UID][req.ID] = run
	e.mu.Unlock()

	pod := types.NamespacedName{Namespace: sbr.Namespace, Name: sbr.Status.PodName}
	argv := jobspec.ExecArgv(workspace(sbr), sbr.Spec.Env, req.WorkingDir, timeout, req.Command)
	key := &v1alpha1.SandboxRequest{ObjectMeta: metav1.ObjectMeta{Namespace: sbr.Namespace, Name: sbr.Name}}
	go func() {
		defer cancel()
		began := time.Now()
		stdout, stderr := &podexec.Capped{Limit: MaxStdout}, &podexec.Capped{Limit: MaxStderr}
		code, err := e.executor.Exec(ctx, pod, jobspec.ContainerExec, argv, stdout, stderr)
		startedAt := metav1.NewTime(began)
		res := v1alpha1.ExecResult{ID: req.ID, ExitCode: int32(code), StartedAt: &startedAt}
		switch {
		case errors.Is(ctx.Err(), context.Canceled):
			res.Error = "cancelled: the request was withdrawn or the sandbox ended"
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			res.Error = fmt.Sprintf("no result within %s of its timeout %s", execGrace, timeout)
		case err != nil:
			res.Error = err.Error()
		}
		res.Stdout = fitJSON(stdout.Bytes(), stdout.Cut(), MaxStdout)
		res.Stderr = fitJSON(stderr.Bytes(), stderr.Cut(), MaxStderr)
		outcome := "exited"
		if res.Error != "" {
			outcome = "error"
		}
		e.metrics.execDuration.WithLabelValues(outcome).Observe(time.Since(began).Seconds())
		e.mu.Lock()
		run.done, run.result = true, res
		e.mu.Unlock()
		e.wake <- event.GenericEvent{Object: key}
	}()
}

// running reports whether the controller runs id for uid.
func (e *execs) running(uid types.UID, id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.runs[uid][id]
	return ok
}

// finished returns the results of uid's finished runs.
func (e *execs) finished(uid types.UID) map[string]v1alpha1.ExecResult {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]v1alpha1.ExecResult{}
	for id, r := range e.runs[uid] {
		if r.done {
			out[id] = r.result
		}
	}
	return out
}

// forget drops a run whose final result the status holds.
func (e *execs) forget(uid types.UID, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.runs[uid], id)
	if len(e.runs[uid]) == 0 {
		delete(e.runs, uid)
	}
}

// cancel cancels uid's run of id (all of uid's runs when id is empty).
func (e *execs) cancel(uid types.UID, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for rid, r := range e.runs[uid] {
		if id == "" || rid == id {
			r.cancel()
		}
	}
}

// drop forgets everything of uid (a request that is gone).
func (e *execs) drop(uid types.UID) {
	e.cancel(uid, "")
	e.mu.Lock()
	delete(e.runs, uid)
	e.mu.Unlock()
}

// fitJSON returns b as a string whose JSON encoding takes at most max
// bytes: whole when it fits and was not cut before, else cut at a
// character boundary and ending in podexec.Truncated.
func fitJSON(b []byte, cut bool, max int) string {
	if !cut && jsonLen(string(b)) <= max {
		return string(b)
	}
	budget := max - len(podexec.Truncated)
	n, used := 0, 0
	for n < len(b) {
		r, size := utf8.DecodeRune(b[n:])
		w := jsonWidth(r, size)
		if used+w > budget {
			break
		}
		n += size
		used += w
	}
	return string(b[:n]) + podexec.Truncated
}

// jsonWidth is how many bytes encoding/json writes for one decoded rune.
func jsonWidth(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return 6 // \ufffd
	case r == '"' || r == '\\':
		return 2
	case r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20, r == '<', r == '>', r == '&', r == '\u2028', r == '\u2029':
		return 6
	}
	return size
}

// jsonLen is the length of s's JSON encoding, without the quotes.
func jsonLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		n += jsonWidth(c, size)
		i += size
	}
	return n
}

// outputSize is the JSON size of a result's outputs.
func outputSize(r v1alpha1.ExecResult) int { return jsonLen(r.Stdout) + jsonLen(r.Stderr) }

// workspace is sbr's working directory.
func workspace(sbr *v1alpha1.SandboxRequest) string {
	return Sandbox(sbr, v1alpha1.Resources{}).Workspace()
}
