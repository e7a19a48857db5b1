// Command reconcile measures how long a commit to a campaigns repository
// takes to become a started workflow, with the reconciler `fleetlift up`
// runs (embedded Temporal on SQLite, a worker, source + spec loader +
// Temporal state reader + Temporal dispatcher), in two modes:
//
//   - fsnotify: a local work tree, read in place; `git commit` wakes the
//     loop through reconcile.WatchRepository.
//   - webhook: a bare repository served by `git http-backend` on 127.0.0.1
//     and read by URL; `git push` to it, then a signed GitHub push event
//     to the webhook receiver wakes the loop.
//
// Each mode adds one new campaign per commit. The latency runs from t0,
// just before `git commit` (fsnotify) or `git push` (webhook) starts, to
// the return of the pass that reports the campaign's Create carried out
// (LoopOptions.OnPass); the start time the server recorded for the
// workflow is printed beside it. The floor, measured in the same run after
// each commit, is a bare `git fetch` of the same change into another clone
// (file:// for fsnotify, http:// for webhook). The poll interval is an
// hour, so only the hint under test triggers a pass. Two untimed commits
// warm each mode up.
//
// Decorators around the reconciler's Source, State (and the Temporal client
// the state reader uses) and Dispatcher time the phases of each pass; the
// breakdown is of the passes that started the runs. After the last commit,
// with the loop idle, the bench also times a pass with nothing to do (what
// each poll tick costs) and the phases alone, split further: the tree walk
// and the spec load of Read, the spec load of the newest file alone, and
// State.List without its status queries.
//
// The campaigns are suspended (`suspend: true`): their workflows start and
// wait, answering the status queries the state reader sends, and never run
// a task, so no sandbox or forge is involved. They stay running, so the
// n-th commit is reconciled against n running campaigns, as in a
// repository that accumulates campaigns. The modes run one after the other
// on the same server; the first mode's runs are terminated before the
// second starts.
//
// It prints figures and ratios, and asserts no time.
//
//	go run ./bench/reconcile -commits 50
//	go run ./bench/reconcile -modes webhook -cpuprofile cpu.out
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/webhook"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

const goalMS = 300

func main() {
	// The reconciler's spec pool runs this executable for CUE files (the
	// bench writes only YAML, evaluated in process, but is wired as
	// cmd/fleetlift is).
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	workflow.IdentifyBinary()
	// As cmd/fleetlift does.
	debug.SetGCPercent(400)
	commits := flag.Int("commits", 50, "timed commits per mode")
	warmup := flag.Int("warmup", 2, "untimed commits per mode before the timed ones")
	modes := flag.String("modes", "fsnotify,webhook", "modes to run, comma-separated: fsnotify, webhook")
	verbose := flag.Bool("v", false, "print every commit and the reconciler's log")
	pollers := flag.Int("workflow-pollers", 0, "the worker's workflow task pollers, which answer status queries (0: the SDK default, as fleetlift's worker)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (server, worker, reconciler) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-reconcile:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*commits, *warmup, *pollers, strings.Split(*modes, ","), *verbose); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench-reconcile:", err)
		os.Exit(1)
	}
}

func run(commits, warmup, pollers int, modes []string, verbose bool) error {
	if commits < 1 {
		return errors.New("-commits must be at least 1")
	}
	for _, m := range modes {
		if m != "fsnotify" && m != "webhook" {
			return fmt.Errorf("unknown mode %q: want fsnotify or webhook", m)
		}
	}
	root, err := os.MkdirTemp("", "fleetlift-bench-reconcile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	serverLog := filepath.Join(root, "temporal.log")
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(root, "temporal.db"), LogFile: serverLog})
	if err != nil {
		return err
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()},
		DataConverter:     payload.Converter,
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))})
	if err != nil {
		return err
	}
	defer c.Close()
	// The workflows newWorker registers. Suspended campaigns schedule no
	// activity, so none is registered: a task that started by mistake
	// would fail, and the check after each mode would see it.
	w := worker.New(c, workflow.TaskQueue, worker.Options{MaxConcurrentWorkflowTaskPollers: pollers})
	w.RegisterWorkflow(workflow.Task)
	w.RegisterWorkflow(workflow.Campaign)
	w.RegisterWorkflow(workflow.CampaignPage)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	b := &bench{root: root, c: c, serverLog: serverLog, commits: commits, warmup: warmup, verbose: verbose}
	var results []*result
	for _, m := range modes {
		var res *result
		switch m {
		case "fsnotify":
			res, err = b.fsnotify()
		case "webhook":
			res, err = b.webhook()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		results = append(results, res)
	}

	fmt.Printf("bench-reconcile: commit to workflow started, %d commits per mode after %d warm-up, %d CPUs\n", commits, warmup, runtime.NumCPU())
	pollerNote := "SDK default workflow pollers"
	if pollers > 0 {
		pollerNote = fmt.Sprintf("%d workflow pollers", pollers)
	}
	fmt.Printf("  embedded Temporal (SQLite), one worker (%s); suspended campaigns, one new per commit (%d..%d already running)\n", pollerNote, warmup, warmup+commits-1)
	for _, r := range results {
		r.print(os.Stdout)
	}
	for _, r := range results {
		p50 := ms(pct(r.latency, 50))
		verdict := "met"
		if p50 > goalMS {
			verdict = "not met"
		}
		fmt.Printf("  goal p50 <= %d ms, %s: %s (p50 %.0f ms)\n", goalMS, r.mode, verdict, p50)
	}
	return nil
}

// bench is one run: the server, and the settings of each mode.
type bench struct {
	root, serverLog string
	c               client.Client
	commits, warmup int
	verbose         bool
}

// result is one mode's measurements, one entry per timed commit.
type result struct {
	mode, floorName, changeName string
	latency                     []time.Duration // t0 to the pass that started the run reporting it
	toServer                    []time.Duration // t0 to the start time the server recorded
	change                      []time.Duration // git commit (fsnotify) or git push + POST (webhook)
	floor                       []time.Duration
	passes                      []pass // the pass that started each run
	passCount                   []int  // passes from t0 to that one, inclusive
	t0                          []time.Time
	serverErrors                []string                   // the errors the server logged during the commits
	idle                        map[string][]time.Duration // after the last commit, with the loop idle: pass, head, read, list
	running                     int                        // campaigns running then
}

// fsnotify: commits to a local work tree that the reconciler reads in place
// and watches.
func (b *bench) fsnotify() (*result, error) {
	dir := filepath.Join(b.root, "fsnotify")
	work := filepath.Join(dir, "campaigns")
	if err := initRepo(work); err != nil {
		return nil, err
	}
	floorClone := filepath.Join(dir, "floor")
	if err := git(dir, "clone", "-q", "file://"+work, floorClone); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := source.Open(ctx, source.Options{URL: work})
	if err != nil {
		return nil, err
	}
	hints, err := reconcile.WatchRepository(ctx, work, "main")
	if err != nil {
		return nil, err
	}
	loop, err := b.startLoop(ctx, src, reconcile.Merge(ctx, hints))
	if err != nil {
		return nil, err
	}
	defer loop.stop()

	res := &result{mode: "fsnotify", changeName: "git commit", floorName: "git fetch file://"}
	err = b.each("fs", loop, res,
		func(id string) error {
			if err := writeCampaign(work, id); err != nil {
				return err
			}
			return git(work, "add", "campaigns")
		},
		func() (time.Duration, error) {
			start := time.Now()
			err := git(work, "commit", "-q", "-m", "add a campaign")
			return time.Since(start), err
		},
		func() (time.Duration, error) {
			start := time.Now()
			err := git(floorClone, "fetch", "-q", "origin")
			return time.Since(start), err
		})
	if err != nil {
		return nil, err
	}
	return res, b.finish(loop, res, "fs")
}

// webhook: pushes to a bare repository served over HTTP, each followed by
// a signed push event to the receiver.
func (b *bench) webhook() (*result, error) {
	dir := filepath.Join(b.root, "webhook")
	gitRoot := filepath.Join(dir, "srv")
	bare := filepath.Join(gitRoot, "acme", "campaigns.git")
	seed := filepath.Join(dir, "seed")
	if err := initRepo(seed); err != nil {
		return nil, err
	}
	if err := git(dir, "clone", "-q", "--bare", seed, bare); err != nil {
		return nil, err
	}
	work := filepath.Join(dir, "work")
	if err := git(dir, "clone", "-q", bare, work); err != nil {
		return nil, err
	}
	gitURL, stopGit, err := serveGit(gitRoot)
	if err != nil {
		return nil, err
	}
	defer stopGit()
	url := gitURL + "/acme/campaigns.git"
	floorClone := filepath.Join(dir, "floor")
	if err := git(dir, "clone", "-q", url, floorClone); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, err := source.Open(ctx, source.Options{URL: url, CacheDir: filepath.Join(dir, "cache")})
	if err != nil {
		return nil, err
	}
	secret := []byte("bench-reconcile-secret")
	hints := make(chan struct{}, 1)
	h, err := webhook.New(webhook.Options{
		Secret: secret,
		Repos:  []string{url},
		Hint: func(webhook.Event) {
			select {
			case hints <- struct{}{}:
			default:
			}
		},
	})
	if err != nil {
		return nil, err
	}
	hookURL, stopHook, err := serve(h)
	if err != nil {
		return nil, err
	}
	defer stopHook()
	loop, err := b.startLoop(ctx, src, reconcile.Merge(ctx, hints))
	if err != nil {
		return nil, err
	}
	defer loop.stop()

	hc := &http.Client{Timeout: 10 * time.Second}
	delivery := 0
	var sha string
	res := &result{mode: "webhook", changeName: "git push + POST", floorName: "git fetch http://"}
	err = b.each("wh", loop, res,
		func(id string) error {
			if err := writeCampaign(work, id); err != nil {
				return err
			}
			if err := git(work, "add", "campaigns"); err != nil {
				return err
			}
			if err := git(work, "commit", "-q", "-m", "add a campaign"); err != nil {
				return err
			}
			sha, err = gitOut(work, "rev-parse", "HEAD")
			return err
		},
		func() (time.Duration, error) {
			start := time.Now()
			if err := git(work, "push", "-q", "origin", "HEAD:refs/heads/main"); err != nil {
				return 0, err
			}
			delivery++
			err = postPush(hc, hookURL, secret, url, sha, fmt.Sprintf("bench-%d-%d", os.Getpid(), delivery))
			return time.Since(start), err
		},
		func() (time.Duration, error) {
			start := time.Now()
			err := git(floorClone, "fetch", "-q", "origin")
			return time.Since(start), err
		})
	if err != nil {
		return nil, err
	}
	return res, b.finish(loop, res, "wh")
}

// each makes the warm-up and timed commits of a mode: prepare writes and
// stages campaign id (untimed), change makes it reach the reconciler (t0 is
// just before it starts), floor fetches the same change elsewhere.
func (b *bench) each(prefix string, l *loop, res *result, prepare func(id string) error, change, floor func() (time.Duration, error)) error {
	logStart := fileSize(b.serverLog)
	defer func() { res.serverErrors = serverErrors(b.serverLog, logStart) }()
	for i := range b.warmup + b.commits {
		timed := i >= b.warmup
		id := fmt.Sprintf("%s-warm-%d", prefix, i+1)
		if timed {
			id = fmt.Sprintf("%s-%d", prefix, i-b.warmup+1)
		}
		if err := prepare(id); err != nil {
			return err
		}
		l.quiet()
		t0 := time.Now()
		took, err := change()
		if err != nil {
			return err
		}
		p, n, err := l.waitCreated(id, 60*time.Second)
		if err != nil {
			return err
		}
		fl, err := floor()
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		if b.verbose {
			fmt.Fprintf(os.Stderr, "%s %s: %.0f ms (%s %.0f ms, %d passes, floor %.0f ms)\n",
				res.mode, id, ms(p.end.Sub(t0)), res.changeName, ms(took), n, ms(fl))
		}
		if !timed {
			continue
		}
		res.latency = append(res.latency, p.end.Sub(t0))
		res.change = append(res.change, took)
		res.floor = append(res.floor, fl)
		res.passes = append(res.passes, p)
		res.passCount = append(res.passCount, n)
		res.t0 = append(res.t0, t0)
	}
	return nil
}

// finish times the phases of a pass with the loop idle, stops the loop,
// reads the start times the server recorded, checks that every run is a
// running, suspended campaign that started no task, and terminates them so
// that the next mode starts with none running.
func (b *bench) finish(l *loop, res *result, prefix string) error {
	ctx := context.Background()
	// With the loop idle: what every poll tick costs now (a pass with
	// nothing to do), and the phases of a pass one at a time.
	l.quiet()
	res.idle = map[string][]time.Duration{}
	timeIt := func(name string, f func() error) error {
		for range 10 {
			start := time.Now()
			if err := f(); err != nil {
				return fmt.Errorf("idle %s: %w", name, err)
			}
			res.idle[name] = append(res.idle[name], time.Since(start))
		}
		return nil
	}
	var head string
	err := errors.Join(
		timeIt("pass", func() error { _, err := l.r.Once(ctx); return err }),
		timeIt("head", func() (err error) { head, err = l.r.Source.Head(ctx); return err }),
		timeIt("read", func() error { _, err := l.r.Source.Read(ctx, head); return err }),
		timeIt("list", func() error { _, err := l.r.State.List(ctx); return err }))
	if err != nil {
		return err
	}
	// Read split in two: the tree, and the spec load of what it holds; and
	// what loading only the file the last commit added costs. State.List
	// without the status queries (a reader that fails every query, which
	// it treats as a run no worker answers): what listing from the memo
	// alone costs.
	files := fstest.MapFS{}
	last := fmt.Sprintf("campaigns/%s-%d.yaml", prefix, b.commits)
	noQueries := &statetemporal.Reader{Client: failQueries{b.c}, Namespace: devserver.Namespace}
	err = errors.Join(
		timeIt("read.tree", func() error {
			tree, err := l.src.FS(ctx, head, "")
			if err != nil {
				return err
			}
			return fs.WalkDir(tree, ".", func(name string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				data, err := fs.ReadFile(tree, name)
				files[name] = &fstest.MapFile{Data: data}
				return err
			})
		}),
		timeIt("read.spec", func() error {
			_, err := desired.Read(ctx, &spec.Loader{Eval: l.pool}, files, head, "")
			return err
		}),
		timeIt("read.one", func() error {
			res, err := (&spec.Loader{Eval: l.pool}).LoadFiles(ctx, files, last)
			if err == nil && len(res.Definitions) != 1 {
				err = fmt.Errorf("%s: %v", last, res.Err())
			}
			return err
		}),
		timeIt("list.noquery", func() error { _, err := noQueries.List(ctx); return err }))
	if err != nil {
		return err
	}
	res.running = b.warmup + b.commits
	l.stop()
	for i := range res.t0 {
		d, err := b.c.DescribeWorkflowExecution(ctx, fmt.Sprintf("campaign/%s-%d", prefix, i+1), "")
		if err != nil {
			return err
		}
		res.toServer = append(res.toServer, d.WorkflowExecutionInfo.StartTime.AsTime().Sub(res.t0[i]))
	}
	recorded, err := (&statetemporal.Reader{Client: b.c, Namespace: devserver.Namespace}).List(ctx)
	if err != nil {
		return err
	}
	mine := 0
	for _, rec := range recorded {
		if !strings.HasPrefix(rec.ID, prefix+"-") {
			continue
		}
		mine++
		if rec.Phase != state.PhaseRunning || !rec.Suspended {
			return fmt.Errorf("campaign %s is %s (suspended %v), want a running, suspended campaign", rec.ID, rec.Phase, rec.Suspended)
		}
		for _, r := range rec.Repos {
			if r.Status != state.RepoPending {
				return fmt.Errorf("campaign %s: repository %s is %s: a task started", rec.ID, r.Name, r.Status)
			}
		}
		if err := b.c.TerminateWorkflow(ctx, rec.WorkflowID, rec.RunID, "bench-reconcile: next mode"); err != nil {
			return err
		}
	}
	if want := b.warmup + b.commits; mine != want {
		return fmt.Errorf("%d campaigns recorded, want %d", mine, want)
	}
	return nil
}

// startLoop runs the reconciler `fleetlift up` runs over src, woken only by
// hints (the poll interval is an hour), and waits for its first pass.
func (b *bench) startLoop(ctx context.Context, src *source.Repo, hints reconcile.Hints) (*loop, error) {
	pool, err := spec.NewSelfPool()
	if err != nil {
		return nil, err
	}
	out := io.Discard
	if b.verbose {
		out = os.Stderr
	}
	ctx, cancel := context.WithCancel(ctx)
	l := &loop{src: src, passes: make(chan pass, 4096), pool: pool, cancel: cancel, done: make(chan struct{})}
	rc := &timedClient{Client: b.c, l: l}
	l.r = &reconcile.Reconciler{
		Source:   &timedSource{Source: &reconcile.GitSource{Repo: src, Ref: "main", Loader: &spec.Loader{Eval: pool, Cache: spec.NewCache(0)}}, l: l},
		State:    &timedState{Reader: &statetemporal.Reader{Client: rc, Namespace: devserver.Namespace}, l: l},
		Dispatch: &timedDispatch{Dispatcher: &dispatch.Temporal{Client: b.c}, l: l},
		Branch:   "main",
		// The log cmd/fleetlift writes, formatted and discarded.
		Log: slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	go func() {
		defer close(l.done)
		_ = l.r.Run(ctx, reconcile.LoopOptions{Interval: time.Hour, Hints: hints, OnPass: l.onPass})
	}()
	select {
	case p := <-l.passes:
		if p.err != nil {
			l.stop()
			return nil, fmt.Errorf("first pass: %w", p.err)
		}
	case <-time.After(time.Minute):
		l.stop()
		return nil, errors.New("no first pass within a minute")
	}
	return l, nil
}

// loop is a running reconciler and what its passes took.
type loop struct {
	r      *reconcile.Reconciler
	src    *source.Repo
	pool   *spec.Pool
	passes chan pass
	done   chan struct{}
	cancel context.CancelFunc

	mu      sync.Mutex
	cur     pass
	inPass  bool
	lastEnd time.Time
}

// pass is one pass of the loop: when it ran, and its phases.
type pass struct {
	begin, end time.Time
	// phase durations: head, read, list, list.rpc, list.queries, start.
	phases   map[string]time.Duration
	queries  int
	created  []string
	failures []string
	err      error
}

func (l *loop) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = pass{begin: time.Now(), phases: map[string]time.Duration{}}
	l.inPass = true
}

func (l *loop) add(phase string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur.phases != nil {
		l.cur.phases[phase] += d
	}
}

func (l *loop) query() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur.queries++
}

// onPass is LoopOptions.OnPass: its time is when a run counts as started.
func (l *loop) onPass(res *reconcile.Result, err error) {
	now := time.Now()
	l.mu.Lock()
	p := l.cur
	l.cur, l.inPass, l.lastEnd = pass{}, false, now
	l.mu.Unlock()
	p.end, p.err = now, err
	if res != nil {
		for _, o := range res.Outcomes {
			switch {
			case o.Err != nil:
				p.failures = append(p.failures, o.String())
			case o.Action == "create":
				p.created = append(p.created, o.ID)
			}
		}
	}
	select {
	case l.passes <- p:
	default:
	}
}

// quiet waits until no pass has run for a while and forgets the passes
// seen so far, so that a commit starts with the loop idle.
func (l *loop) quiet() {
	for {
		l.mu.Lock()
		idle := !l.inPass && time.Since(l.lastEnd) > 100*time.Millisecond
		l.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		select {
		case <-l.passes:
		default:
			return
		}
	}
}

// waitCreated returns the pass that started id, and how many passes ended
// until then.
func (l *loop) waitCreated(id string, timeout time.Duration) (pass, int, error) {
	deadline := time.After(timeout)
	n := 0
	for {
		select {
		case p := <-l.passes:
			n++
			if p.err != nil {
				return pass{}, n, fmt.Errorf("pass failed: %w", p.err)
			}
			if len(p.failures) > 0 {
				return pass{}, n, fmt.Errorf("pass failed: %s", strings.Join(p.failures, "; "))
			}
			if slices.Contains(p.created, id) {
				return p, n, nil
			}
		case <-deadline:
			return pass{}, n, fmt.Errorf("%s not started within %s", id, timeout)
		}
	}
}

// stop ends the loop, waits for it, and stops the spec pool. It may be
// called more than once.
func (l *loop) stop() {
	l.cancel()
	<-l.done
	l.pool.Close()
}

// timedSource times Head (the start of a pass) and Read.
type timedSource struct {
	reconcile.Source
	l *loop
}

func (s *timedSource) Head(ctx context.Context) (string, error) {
	s.l.begin()
	start := time.Now()
	defer func() { s.l.add("head", time.Since(start)) }()
	return s.Source.Head(ctx)
}

func (s *timedSource) Read(ctx context.Context, sha string) (*desired.Revision, error) {
	start := time.Now()
	defer func() { s.l.add("read", time.Since(start)) }()
	return s.Source.Read(ctx, sha)
}

// timedState times List.
type timedState struct {
	state.Reader
	l *loop
}

func (s *timedState) List(ctx context.Context) ([]state.Campaign, error) {
	start := time.Now()
	defer func() { s.l.add("list", time.Since(start)) }()
	return s.Reader.List(ctx)
}

// timedClient times the state reader's list RPC and counts its queries.
type timedClient struct {
	client.Client
	l *loop
}

func (c *timedClient) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	start := time.Now()
	defer func() { c.l.add("list.rpc", time.Since(start)) }()
	return c.Client.ListWorkflow(ctx, req)
}

func (c *timedClient) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error) {
	c.l.query()
	return c.Client.QueryWorkflow(ctx, workflowID, runID, queryType, args...)
}

// failQueries fails every query.
type failQueries struct{ client.Client }

func (failQueries) QueryWorkflow(context.Context, string, string, string, ...any) (converter.EncodedValue, error) {
	return nil, errors.New("no queries")
}

// timedDispatch times Start.
type timedDispatch struct {
	reconcile.Dispatcher
	l *loop
}

func (d *timedDispatch) Start(ctx context.Context, def spec.Definition, rev string, generation int64) error {
	start := time.Now()
	defer func() { d.l.add("start", time.Since(start)) }()
	return d.Dispatcher.Start(ctx, def, rev, generation)
}

// print writes a mode's figures and where its time went.
func (r *result) print(w io.Writer) {
	lat, fl := r.latency, r.floor
	fmt.Fprintf(w, "  %s:\n", r.mode)
	fmt.Fprintf(w, "    commit -> workflow started (reconciler's pass returned): p50 %6.0f ms  p95 %6.0f ms  min %6.0f  max %6.0f\n",
		ms(pct(lat, 50)), ms(pct(lat, 95)), ms(slices.Min(lat)), ms(slices.Max(lat)))
	fmt.Fprintf(w, "    commit -> start time the server recorded:                p50 %6.0f ms  p95 %6.0f ms\n",
		ms(pct(r.toServer, 50)), ms(pct(r.toServer, 95)))
	fmt.Fprintf(w, "    %-24s (inside the latency):                p50 %6.0f ms  p95 %6.0f ms\n",
		r.changeName, ms(pct(r.change, 50)), ms(pct(r.change, 95)))
	fmt.Fprintf(w, "    floor, %-18s of the same change:           p50 %6.0f ms  p95 %6.0f ms\n",
		r.floorName, ms(pct(fl, 50)), ms(pct(fl, 95)))
	fmt.Fprintf(w, "    ratio p50 / floor p50: %.1fx\n", float64(pct(lat, 50))/float64(pct(fl, 50)))
	if n := len(lat); n >= 20 {
		k := n / 5
		fmt.Fprintf(w, "    p50 of the first %d commits %.0f ms, of the last %d %.0f ms (running campaigns grow by one a commit)\n",
			k, ms(pct(lat[:k], 50)), k, ms(pct(lat[n-k:], 50)))
	}

	// Where the time of the pass that started each run went.
	col := func(f func(i int) time.Duration) []time.Duration {
		out := make([]time.Duration, len(lat))
		for i := range lat {
			out[i] = f(i)
		}
		return out
	}
	ph := func(name string) []time.Duration {
		return col(func(i int) time.Duration { return r.passes[i].phases[name] })
	}
	trigger := col(func(i int) time.Duration { return r.passes[i].begin.Sub(r.t0[i]) })
	pass := col(func(i int) time.Duration { return r.passes[i].end.Sub(r.passes[i].begin) })
	head, read, list, rpc, start := ph("head"), ph("read"), ph("list"), ph("list.rpc"), ph("start")
	rest := col(func(i int) time.Duration { return pass[i] - head[i] - read[i] - list[i] - start[i] })
	queries := col(func(i int) time.Duration { return list[i] - rpc[i] })
	nq := col(func(i int) time.Duration { return time.Duration(r.passes[i].queries) })
	np := col(func(i int) time.Duration { return time.Duration(r.passCount[i]) })
	fmt.Fprintf(w, "    breakdown (p50 / p95 over the passes that started the runs):\n")
	row := func(name string, d []time.Duration) {
		fmt.Fprintf(w, "      %-52s %6.1f / %6.1f ms\n", name, ms(pct(d, 50)), ms(pct(d, 95)))
	}
	row("t0 -> pass begins ("+r.changeName+", hint, 20 ms debounce)", trigger)
	row("pass", pass)
	row("  Head (resolve main)", head)
	row("  Read (tree + spec load)", read)
	row("  State.List", list)
	row("    ListWorkflow RPC", rpc)
	row(fmt.Sprintf("    status queries (p50 %d a pass, 8 at once)", int(pct(nq, 50))), queries)
	row("  dispatch Start (ExecuteWorkflow)", start)
	row("  rest (plan, logging)", rest)
	fmt.Fprintf(w, "      passes from t0 to the one that started the run: p50 %d, max %d\n", int(pct(np, 50)), int(slices.Max(np)))
	fmt.Fprintf(w, "    after the last commit (%d files, %d running), one call at a time, p50: pass with nothing to do (each poll tick) %.0f ms;\n",
		r.running, r.running, ms(pct(r.idle["pass"], 50)))
	id := func(name string) float64 { return ms(pct(r.idle[name], 50)) }
	fmt.Fprintf(w, "      Head %.1f ms; Read %.1f ms (tree walk %.1f ms, spec load of the files %.1f ms, of the newest file alone %.1f ms);\n",
		id("head"), id("read"), id("read.tree"), id("read.spec"), id("read.one"))
	fmt.Fprintf(w, "      State.List %.1f ms (without status queries %.1f ms)\n", id("list"), id("list.noquery"))
	if n := len(r.serverErrors); n > 0 {
		fmt.Fprintf(w, "    the server logged %d errors during the commits, the first: %s\n", n, r.serverErrors[0])
	}
}

func fileSize(name string) int64 {
	fi, err := os.Stat(name)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// serverErrors returns the messages of the error lines the server logged
// to name after offset.
func serverErrors(name string, offset int64) []string {
	b, err := os.ReadFile(name)
	if err != nil || int64(len(b)) < offset {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		// Console format: time, level, message, fields, tab-separated.
		f := strings.Split(line, "\t")
		if len(f) < 4 || f[1] != "error" {
			continue
		}
		var fields struct {
			Error string `json:"error"`
		}
		if json.Unmarshal([]byte(f[3]), &fields) == nil && fields.Error != "" {
			out = append(out, fields.Error)
		} else {
			out = append(out, f[2])
		}
	}
	return out
}

// pct is the p-th percentile of ds, nearest rank.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// initRepo makes a campaigns repository at dir on branch main with the
// config and an empty definitions directory.
func initRepo(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "campaigns"), 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"fleetlift.yaml":     "version: 1\nkind: Config\nwatch:\n  branch: main\n  path: campaigns\nforge:\n  type: local\n",
		"campaigns/.gitkeep": "",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"commit", "-q", "-m", "init"}} {
		if err := git(dir, args...); err != nil {
			return err
		}
	}
	return nil
}

// writeCampaign writes campaigns/<id>.yaml: a small suspended campaign.
func writeCampaign(dir, id string) error {
	body := fmt.Sprintf(`version: 1
kind: Campaign
id: %s
title: Bench campaign %s
suspend: true
template:
  execution:
    deterministic:
      image: alpine:3
      command: [sh, -c, "true"]
repositories:
  - url: https://github.com/acme/service-a.git
  - url: https://github.com/acme/service-b.git
`, id, id)
	return os.WriteFile(filepath.Join(dir, "campaigns", id+".yaml"), []byte(body), 0o644)
}

// gitEnv runs git with no user or system configuration and a fixed
// identity.
var gitEnv = append(os.Environ(),
	"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
	"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com",
	"GIT_TERMINAL_PROMPT=0",
)

func git(dir string, args ...string) error {
	_, err := gitOut(dir, args...)
	return err
}

func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = gitEnv
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// serveGit serves the bare repositories under root over smart HTTP on
// 127.0.0.1 with git http-backend, and returns its base URL.
func serveGit(root string) (string, func(), error) {
	execPath, err := gitOut(root, "--exec-path")
	if err != nil {
		return "", nil, err
	}
	return serve(&cgi.Handler{
		Path:   filepath.Join(execPath, "git-http-backend"),
		Env:    []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null"},
		Stderr: io.Discard,
	})
}

// serve serves h on a free port of 127.0.0.1.
func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// postPush sends a signed GitHub push event for sha on main of repo.
func postPush(hc *http.Client, hookURL string, secret []byte, repo, sha, delivery string) error {
	body, err := json.Marshal(map[string]any{
		"ref":        "refs/heads/main",
		"after":      sha,
		"repository": map[string]string{"full_name": "acme/campaigns", "clone_url": repo},
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, hookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign(secret, body))
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("post webhook: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("post webhook: %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
