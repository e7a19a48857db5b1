package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// Serve waits for the manifest in opts.Workspace, runs it (see Run) and
// returns once a terminal phase is written. If status.json already holds a
// terminal phase it returns at once. The outcome is in status.json and
// result.json; Serve returns an error only when it cannot speak the
// protocol or ctx ends first.
func Serve(ctx context.Context, opts Options) error {
	o := opts.withDefaults()
	if o.Lease != "" && o.OrphanAfter > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go watchLease(ctx, cancel, o.Lease, o.OrphanAfter)
	}
	pdir := filepath.Join(o.Workspace, protocol.Dir)
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return fmt.Errorf("create protocol directory: %w", err)
	}
	var st protocol.Status
	if err := readJSON(filepath.Join(pdir, protocol.StatusFile), &st, maxStatusBytes); err == nil && st.Phase.Terminal() {
		o.Log.Info("already finished", "phase", st.Phase)
		return nil
	}
	m, ok, err := waitManifest(ctx, o, pdir)
	if !ok {
		return err
	}
	if o.Workers != nil {
		o.Workers(min(max(m.Parallel, 1), max(len(m.Repositories), 1)))
	}
	_, err = Run(ctx, o, m)
	return err
}

// waitManifest polls for manifest.json. A manifest that does not decode,
// with the same content at least ManifestPoll apart, fails the run: then
// ok is false.
func waitManifest(ctx context.Context, o Options, pdir string) (_ protocol.Manifest, ok bool, _ error) {
	path := filepath.Join(pdir, protocol.ManifestFile)
	var lastBad string
	var badAt time.Time
	// The manifest usually comes a moment after the agent starts (or is
	// handed a sandbox): look again soon, then less and less often, up
	// to every ManifestPoll. At 50 ms from the start, each unit of a run
	// waited 25 ms on average for an agent already there.
	wait := min(firstManifestPoll, o.ManifestPoll)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		// fail ends the run before it began.
		fail := func(msg string) (protocol.Manifest, bool, error) {
			r := &runner{o: o, pdir: pdir}
			r.result = protocol.Result{Repositories: []protocol.RepositoryResult{}, SteeringHistory: []protocol.SteeringRecord{}, StartedAt: o.Now().UTC()}
			return protocol.Manifest{}, false, r.end(protocol.PhaseFailed, msg)
		}
		data, err := readRegular(path, maxManifestBytes)
		if errors.Is(err, errTooLarge) {
			return fail(fmt.Sprintf("invalid manifest: %v", err))
		}
		if err == nil {
			var m protocol.Manifest
			derr := json.Unmarshal(data, &m)
			if derr == nil {
				return m, true, nil
			}
			// The same content a full ManifestPoll later is what the
			// writer meant, not a write in progress.
			if string(data) == lastBad && time.Since(badAt) >= o.ManifestPoll {
				return fail(fmt.Sprintf("invalid manifest: %v", derr))
			}
			if string(data) != lastBad {
				lastBad, badAt = string(data), time.Now()
			}
		}
		select {
		case <-ctx.Done():
			var orphaned errOrphaned
			if errors.As(context.Cause(ctx), &orphaned) {
				if _, _, werr := fail("agent stopped before any manifest came: " + orphaned.Error()); werr != nil {
					return protocol.Manifest{}, false, werr
				}
			}
			return protocol.Manifest{}, false, context.Cause(ctx)
		case <-t.C:
		}
		wait = min(2*wait, o.ManifestPoll)
		t.Reset(wait)
	}
}

// firstManifestPoll is how soon the agent looks for the manifest again
// after its first look found none.
const firstManifestPoll = 2 * time.Millisecond

// Run runs the manifest m in opts.Workspace: the whole pipeline, including
// waiting for steering when m.RequireApproval is set, and returns the
// final result. Failures of the run are in the result (and status.json);
// the error is set only when the protocol files cannot be written or ctx
// ended.
func Run(ctx context.Context, opts Options, m protocol.Manifest) (protocol.Result, error) {
	o := opts.withDefaults()
	r := &runner{o: o, m: m, g: o.Git}
	ws, err := filepath.Abs(o.Workspace)
	if err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return protocol.Result{}, fmt.Errorf("resolve workspace %s: %w", o.Workspace, err)
	}
	r.ws = ws
	r.pdir = filepath.Join(ws, protocol.Dir)
	if err := os.MkdirAll(r.pdir, 0o755); err != nil {
		return protocol.Result{}, fmt.Errorf("create protocol directory: %w", err)
	}
	r.result = protocol.Result{
		Status:          protocol.PhaseInitializing,
		Repositories:    []protocol.RepositoryResult{},
		SteeringHistory: []protocol.SteeringRecord{},
		StartedAt:       o.Now().UTC(),
	}
	r.secrets = secretValues(o.Env, r.g)
	r.env, r.cliEnv = commandEnvs(o.Env, r.g)
	if o.Isolation != nil && o.Isolation.Egress != "" {
		r.env, r.cliEnv = withEnv(r.env, proxyEnv()...), withEnv(r.cliEnv, proxyEnv()...)
	}
	err = r.run(ctx)
	return r.result, err
}

// runner is one run of a manifest.
type runner struct {
	o    Options
	m    protocol.Manifest
	g    *git.Git
	ws   string // workspace, resolved
	pdir string // protocol directory

	env     []string // environment for commands
	cliEnv  []string // environment for the agent CLI
	secrets []string // values redacted from everything written
	cli     []string // agent CLI argv
	schema  bool     // output.schema is set: a report must have frontmatter

	units  []*unit // repositories, or targets
	recipe *unit   // the transformation repository
	// gitGW relays clones to the worker's gateway while the repositories
	// are cloned; nil without one.
	gitGW  *gitGateway
	scopes []*scope

	iteration int
	outputs   map[string]string // latest output per scope
	// statusMu guards status, which repositories worked on side by side
	// (see each) step and count; resultMu guards result while they
	// record their outcomes in it.
	statusMu sync.Mutex
	status   protocol.Status
	resultMu sync.Mutex
	result   protocol.Result
	// statusFile and resultFile write status.json and result.json; nil
	// until the first write.
	statusFile, resultFile *protocolFile
}

// unit is one repository the pipeline changes or reports on.
type unit struct {
	repo  protocol.Repository
	dir   string
	elems []string // dir below the workspace
	base  string   // commit cloned
	// tree is the tree whose changes were last collected: what a pull
	// request proposes, exactly what the result showed.
	tree       string
	baseBranch string
	res        *protocol.RepositoryResult
	// broken is set when clone or setup failed: nothing more happens here.
	broken bool
	// failure is why this stretch of work failed here, "" when it did not.
	failure string
	kind    string
	// skipVerify is set when the transform itself failed.
	skipVerify bool
	// checkedTree is the snapshot the verifiers last ran on, with checks.
	checkedTree string
	checks      []protocol.VerifierResult
	// seen is what the repository was before any work ran in it (intact).
	seen *seen
}

// scope is where the transform runs: one repository, or the workspace
// with all targets.
type scope struct {
	name  string
	dir   string
	units []*unit
	// owner holds the report of a report-mode run.
	owner *unit
}

var (
	errTimeout   = errors.New("timed out")
	errCancelled = errors.New("cancelled")
)

func (r *runner) run(ctx context.Context) error {
	r.setPhase(protocol.PhaseInitializing, "validating", "checking the manifest")
	if err := r.prepare(); err != nil {
		return r.end(protocol.PhaseFailed, err.Error())
	}
	err := r.active(ctx, func(ctx context.Context) error {
		gw, err := r.openGitGateway()
		if err != nil {
			return err
		}
		r.gitGW = gw
		err = r.checkout(ctx)
		// Nothing is cloned after: the relay goes.
		r.gitGW = nil
		gw.close()
		if err != nil {
			return err
		}
		return r.work(ctx, "")
	})
	if done, err := r.afterActive(ctx, err); done {
		return err
	}
	// A transform that changed no repository has nothing to approve: it
	// ends, its repositories skipped, instead of waiting for a decision
	// on no change. A prompt that should have changed something runs
	// again with `fleetlift retry`.
	if r.m.RequireApproval && (r.m.Mode != protocol.ModeTransform || r.anyChanged()) {
		return r.awaitSteering(ctx)
	}
	return r.complete(ctx)
}

// prepare validates the manifest and resolves what the run needs.
func (r *runner) prepare() error {
	if err := validate(&r.m); err != nil {
		return fmt.Errorf("invalid manifest: %w", err)
	}
	if r.m.Execution.Type == protocol.ExecutionAgentic {
		cli, err := r.o.agentCLI(r.m.Execution.Agent)
		if err != nil {
			return err
		}
		r.cli = cli
	}
	r.schema = r.m.Output.HasSchema()
	return r.layout()
}

// layout decides where each repository goes and where transforms run.
func (r *runner) layout() error {
	newUnit := func(repo protocol.Repository, dirs ...string) (*unit, error) {
		dir, err := git.SafeJoin(r.ws, dirs...)
		if err != nil {
			return nil, fmt.Errorf("repository %s: %w", repo.Name, err)
		}
		return &unit{repo: repo, dir: dir, elems: dirs}, nil
	}
	if r.m.Transformation != nil {
		// The recipe's files are the workspace's own (seed 001's layout):
		// the agent CLI, which runs in the workspace, finds its
		// .claude/skills, CLAUDE.md and bin/ where it starts.
		r.recipe = &unit{repo: *r.m.Transformation, dir: r.ws}
		for _, t := range r.m.Targets {
			u, err := newUnit(t, targetsDir, t.Name)
			if err != nil {
				return err
			}
			r.units = append(r.units, u)
		}
	} else {
		for _, repo := range r.m.Repositories {
			u, err := newUnit(repo, repo.Name)
			if err != nil {
				return err
			}
			r.units = append(r.units, u)
		}
	}

	// Results: one per unit; in report mode with a transformation
	// repository, its reports go to the transformation repository's.
	n := len(r.units)
	report := r.m.Mode == protocol.ModeReport
	if r.recipe != nil && report {
		n++
	}
	r.result.Repositories = make([]protocol.RepositoryResult, n)
	for i, u := range r.units {
		r.result.Repositories[i] = protocol.RepositoryResult{Name: u.repo.Name, Status: "pending"}
		u.res = &r.result.Repositories[i]
	}
	if r.recipe != nil && report {
		r.result.Repositories[n-1] = protocol.RepositoryResult{Name: r.recipe.repo.Name, Status: "pending"}
		r.recipe.res = &r.result.Repositories[n-1]
	}

	switch {
	case r.recipe != nil && r.m.Execution.Type == protocol.ExecutionAgentic:
		sc := &scope{name: r.recipe.repo.Name, dir: r.ws, units: r.units}
		if report {
			sc.owner = r.recipe
		}
		r.scopes = []*scope{sc}
	case r.recipe != nil && report:
		// A deterministic report over targets runs once, in the workspace.
		r.scopes = []*scope{{name: r.recipe.repo.Name, dir: r.ws, units: r.units, owner: r.recipe}}
	default:
		for _, u := range r.units {
			sc := &scope{name: u.repo.Name, dir: u.dir, units: []*unit{u}}
			if report {
				sc.owner = u
			}
			r.scopes = append(r.scopes, sc)
		}
	}
	return nil
}

// each calls fn for every unit, Manifest.Parallel of them at once (one
// after another when it is 0 or 1), and returns when all calls have
// returned. Once ctx has ended, no further call starts. fn touches its
// own unit; status goes through setStep and progressed, results under
// resultMu.
func (r *runner) each(ctx context.Context, units []*unit, fn func(*unit)) {
	n := min(max(r.m.Parallel, 1), len(units))
	if n <= 1 {
		for _, u := range units {
			if ctx.Err() != nil {
				return
			}
			fn(u)
		}
		return
	}
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, u := range units {
		slots <- struct{}{}
		if ctx.Err() != nil {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			fn(u)
		}()
	}
	wg.Wait()
}

// active runs one stretch of work under the manifest's timeout, stopping
// it when steering asks to cancel or reject.
func (r *runner) active(parent context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	if r.m.TimeoutSeconds > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, time.Duration(r.m.TimeoutSeconds)*time.Second, errTimeout)
		defer stop()
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watchCancel(ctx, cancel)
	}()
	err := fn(ctx)
	cancel(nil)
	<-watched
	if cause := context.Cause(ctx); errors.Is(cause, errTimeout) || errors.Is(cause, errCancelled) {
		return cause
	}
	return err
}

// afterActive ends the run after a stretch of work that was cancelled,
// timed out or failed for good. done reports that the run has ended.
func (r *runner) afterActive(ctx context.Context, err error) (done bool, _ error) {
	switch {
	case err == nil:
		return false, nil
	case ctx.Err() != nil:
		r.markUnfinished("agent stopped")
		if werr := r.end(protocol.PhaseFailed, "agent stopped before finishing: "+context.Cause(ctx).Error()); werr != nil {
			return true, werr
		}
		return true, context.Cause(ctx)
	case errors.Is(err, errJailKilled):
		// No verdict: the sandbox is going away, and the worker runs the
		// work again elsewhere.
		r.o.Log.Error("stopping without a verdict", "err", err)
		return true, err
	case errors.Is(err, errCancelled):
		r.markUnfinished("cancelled")
		return true, r.end(protocol.PhaseCancelled, "cancelled by steering")
	case errors.Is(err, errTimeout):
		msg := fmt.Sprintf("timed out after %ds", r.m.TimeoutSeconds)
		r.markUnfinished(msg)
		return true, r.end(protocol.PhaseFailed, msg)
	default:
		return true, r.end(protocol.PhaseFailed, r.redact(err.Error()))
	}
}

// markUnfinished fails repositories the stretch did not finish.
func (r *runner) markUnfinished(why string) {
	for i := range r.result.Repositories {
		if res := &r.result.Repositories[i]; res.Status == "pending" || res.Status == "running" {
			res.Status = "failed"
			res.Error = why
		}
	}
}

// complete leaves the changes for the worker to propose (transform
// mode) and ends the run.
func (r *runner) complete(ctx context.Context) error {
	if r.m.Mode == protocol.ModeTransform && r.m.PullRequest != nil && r.anyChanged() {
		r.setPhase(protocol.PhaseCreatingPRs, "collecting", "leaving the changes for the worker to propose")
		err := r.active(ctx, r.leaveChanges)
		if done, err := r.afterActive(ctx, err); done {
			return err
		}
	}
	phase, msg := r.outcome()
	return r.end(phase, msg)
}

// outcome is the terminal phase (see protocol.Outcome).
func (r *runner) outcome() (protocol.Phase, string) {
	phase, msg, firstErr := protocol.Outcome(protocol.Judged(r.m.ReportOverTargets(), r.result.Repositories))
	if phase == protocol.PhaseFailed {
		r.result.Error = firstErr
	}
	return phase, msg
}

func (r *runner) anyChanged() bool {
	for _, u := range r.units {
		if !u.broken && u.res.Status == "success" && len(u.res.Diffs) > 0 {
			return true
		}
	}
	return false
}

// end writes the terminal result, then the terminal status.
func (r *runner) end(phase protocol.Phase, msg string) error {
	msg = r.redact(msg)
	now := r.o.Now().UTC()
	r.result.Status = phase
	r.result.CompletedAt = &now
	if phase == protocol.PhaseFailed && r.result.Error == "" {
		r.result.Error = msg
	}
	if err := r.writeResult(); err != nil {
		return err
	}
	err := r.writeStatus(phase, "done", msg, true, nil)
	// Logged once the status says so: a sandbox that watches the agent's
	// output (Docker's) reads the status on this line.
	r.o.Log.Info("finished", "phase", phase, "message", msg)
	return err
}

// setPhase moves to phase and writes status.json (see writeStatusLocked
// for when).
func (r *runner) setPhase(phase protocol.Phase, step, msg string) {
	r.statusMu.Lock()
	r.status.Progress = protocol.Progress{TotalRepos: len(r.units)}
	r.statusMu.Unlock()
	// Said once status.json says it: a sandbox that watches the agent's
	// output (Docker's) reads the status on this line.
	logged := func() { r.o.Log.Info("phase", "phase", phase, "step", step, "message", r.redact(msg)) }
	if err := r.writeStatus(phase, step, msg, false, logged); err != nil {
		r.o.Log.Error("write status", "err", err)
	}
}

// setStep updates the step within the current phase.
func (r *runner) setStep(step, msg string) {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	if err := r.writeStatusLocked(r.status.Phase, step, msg, false, nil); err != nil {
		r.o.Log.Error("write status", "err", err)
	}
}

// progressed counts a repository done in the current phase.
func (r *runner) progressed(n int) {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	r.status.Progress.CompletedRepos += n
	if err := r.writeStatusLocked(r.status.Phase, r.status.Step, r.status.Message, false, nil); err != nil {
		r.o.Log.Error("write status", "err", err)
	}
}

// writeStatus records the phase and step in status.json: at once when
// urgent, otherwise soon (see protocolFile and writeStatusLocked).
func (r *runner) writeStatus(phase protocol.Phase, step, msg string, urgent bool, note func()) error {
	r.statusMu.Lock()
	defer r.statusMu.Unlock()
	return r.writeStatusLocked(phase, step, msg, urgent, note)
}

// writeStatusLocked is writeStatus with statusMu held. A phase the
// worker waits for (a final one, or awaiting_input) and a new iteration
// are written at once, whatever urgent says. Any other phase is written
// soon, as a step is: the worker only shows it, and a task that passes
// through several phases within stepEvery writes status.json once for
// them, not once each.
func (r *runner) writeStatusLocked(phase protocol.Phase, step, msg string, urgent bool, note func()) error {
	urgent = urgent || r.iteration != r.status.Iteration ||
		phase != r.status.Phase && (phase.Terminal() || phase == protocol.PhaseAwaitingInput)
	r.status.Phase = phase
	r.status.Step = step
	r.status.Message = r.redact(msg)
	r.status.Iteration = r.iteration
	r.status.UpdatedAt = r.o.Now().UTC()
	if r.status.Progress.TotalRepos == 0 {
		r.status.Progress.TotalRepos = len(r.units)
	}
	return r.file(&r.statusFile, protocol.StatusFile).write(r.status, urgent, note)
}

// writeResult writes result.json now: before a new phase or the end.
func (r *runner) writeResult() error {
	r.resultMu.Lock()
	defer r.resultMu.Unlock()
	return r.file(&r.resultFile, protocol.ResultFile).write(r.result, true, nil)
}

// file is the protocol file name, made on first use.
func (r *runner) file(f **protocolFile, name string) *protocolFile {
	if *f == nil {
		*f = &protocolFile{path: filepath.Join(r.pdir, name), log: r.o.Log}
	}
	return *f
}

// redact removes URL user-info and secret values from text the agent
// writes out.
func (r *runner) redact(s string) string {
	return r.redactSecrets(git.Redact(s))
}

// redactSecrets removes secret values only (diffs and reports keep URLs
// as the repository has them).
func (r *runner) redactSecrets(s string) string {
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, "REDACTED")
	}
	return s
}

// jail is where a command runs, nil without Options.Isolation: the
// workspace and HOME writable, the protocol directory hidden but for
// readable.
func (r *runner) jail(readable ...string) *jail.Jail {
	iso := r.o.Isolation
	if iso == nil {
		return nil
	}
	spec := jail.Spec{
		Writable: []string{r.ws},
		Hidden:   append([]string{r.pdir}, iso.Hidden...),
		Readable: append(append([]string{}, readable...), iso.Shown...),
		Scratch:  jail.DefaultScratch,
	}
	spec.Limits = iso.Limits
	if iso.Egress != "" {
		spec.Forwards = []jail.Forward{{Port: EgressPort, Socket: iso.Egress}}
	}
	if home := lookupEnv(r.o.Env, "HOME"); filepath.IsAbs(home) && filepath.Clean(home) != "/" {
		if fi, err := os.Stat(home); err == nil && fi.IsDir() {
			spec.Writable = append(spec.Writable, filepath.Clean(home))
		}
	}
	return &jail.Jail{Self: iso.Self, Spec: spec}
}
