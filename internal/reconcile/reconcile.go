package reconcile

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/repoquery"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Source is the campaigns repository at the watched branch.
type Source interface {
	// Head returns the commit the watched branch is at. It is called on
	// every pass and must be cheap when nothing moved.
	Head(ctx context.Context) (string, error)
	// Read returns the desired state at a commit Head returned.
	Read(ctx context.Context, sha string) (*desired.Revision, error)
}

// Dispatcher carries out a plan's actions on the runs. Every method must
// be idempotent: the loop calls it again on its next pass when the
// recorded state does not show the effect yet.
type Dispatcher interface {
	// Start starts a run of d: a Create, or an Update of a finished run.
	// generation is the run's generation; rev the campaigns commit.
	Start(ctx context.Context, d spec.Definition, rev string, generation int64) error
	// UpdateInPlace hands a running campaign its new spec.
	UpdateInPlace(ctx context.Context, d spec.Definition, rec state.Campaign, rev string) error
	// Cancel asks a run to stop (prune, or an update that restarts).
	Cancel(ctx context.Context, rec state.Campaign, reason string) error
	// Suspend stops (or, with suspend false, resumes) starting new tasks.
	Suspend(ctx context.Context, rec state.Campaign, suspend bool) error
	// Decide carries out an applying approval record.
	Decide(ctx context.Context, a plan.ApprovalChange, rec state.Campaign) error
	// ClosePullRequests has the pull requests of the ended run rec
	// that are still open closed as req says, without waiting for it;
	// asked again before they are, it asks for the same closing.
	ClosePullRequests(ctx context.Context, rec state.Campaign, req status.ActRequest) error
	// Reopen has campaign run rec make the change of units again (their
	// done_when regressed): a running run queues them, an ended one
	// starts again with only them.
	Reopen(ctx context.Context, rec state.Campaign, units []string) error
	// ResendPieces sends the running campaign rec, run in pages of its
	// spec d, the pages of units it waits for (rec.AwaitingPieces): what
	// started it stopped before it had sent them all.
	ResendPieces(ctx context.Context, d spec.Definition, rec state.Campaign) error
}

// LaunchGate decides whether the watched head may launch anything.
type LaunchGate interface {
	// Check returns nil when rev may be carried out, else why not: a
	// refusal, or a failure to decide that the next pass retries.
	Check(ctx context.Context, rev *desired.Revision) error
}

// Mirror writes the readable status back to Git.
type Mirror interface {
	Write(ctx context.Context, s Status) error
}

// Status is what the mirror shows after a pass.
type Status struct {
	// Revision is the campaigns commit the pass applied.
	Revision string
	// StatusBranch is the status branch the repository config names
	// (status.branch); empty without a valid config.
	StatusBranch string
	// Time is when the pass ended.
	Time time.Time
	// Campaigns is the recorded state after the pass.
	Campaigns []state.Campaign
	// Plan is what the pass found to do.
	Plan plan.Plan
	// Outcomes says what came of each action.
	Outcomes []Outcome
}

// Reviews turns reviews into approval records: for each result awaiting
// approval it keeps an approval pull request on the campaigns repository
// and reads its reviews. The records it returns join the committed ones
// in the plan. Package reviews keeps them on a forge.
type Reviews interface {
	Approvals(ctx context.Context, rev *desired.Revision, recorded []state.Campaign) ([]approval.Record, error)
}

// Reconciler runs passes of the loop.
type Reconciler struct {
	Source   Source
	State    state.Reader
	Dispatch Dispatcher
	// Mirror, when set, is written after each pass that changed anything
	// or found the recorded state changed.
	Mirror Mirror
	// Reviews, when set, keeps approval pull requests for the results
	// awaiting approval and adds the decisions of their reviews to the
	// approval records.
	Reviews Reviews
	// Gate, when set, is asked about each pass's revision before
	// anything else happens: when it says no, the pass carries out
	// nothing (no run, approval, approval pull request or mirror write)
	// and Once returns its error.
	Gate LaunchGate
	// Branch is the branch watched, for messages and the launch gate.
	Branch string
	Log    *slog.Logger
	// Observer, when set, is told of every pass Once runs, and how long
	// it took (metrics).
	Observer Observer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Notifier, when set, is handed the messages the config's
	// notifications say are due after each pass (see Notifications).
	Notifier Notifier
	// Repositories resolves definitions' repositories_from, once per
	// campaigns revision: a definition keeps what its queries selected
	// at a revision until the repository moves (or its run, applied
	// from that revision, records them). Nil resolves none: each
	// definition with queries is an error of its file.
	Repositories *repoquery.Resolver

	mu   sync.Mutex
	last *desired.Revision
	// resolvedAt is the revision whose resolved definitions, by id,
	// resolved holds.
	resolvedAt string
	resolved   map[string]spec.Definition
	// lastStatus is a fingerprint of the last mirrored status.
	lastStatus string
	// notified holds the keys of the messages handed to the Notifier
	// that are still due.
	notified map[string]bool
}

// Outcome is what came of one action of a pass.
type Outcome struct {
	// ID is the campaign or task id; Approval the approval record's file
	// for an approval.
	ID       string
	Approval string
	Action   string
	// Err is why the action failed; nil when it was carried out.
	Err error
}

func (o Outcome) String() string {
	s := o.Action + " " + o.ID
	if o.Approval != "" {
		s += " (" + o.Approval + ")"
	}
	if o.Err != nil {
		s += ": " + o.Err.Error()
	}
	return s
}

// Observer is told of each pass: its result (nil when err is not) and
// how long it took. It must return quickly.
type Observer interface {
	ObservePass(res *Result, err error, took time.Duration)
}

// Result is one pass.
type Result struct {
	Revision string
	// Read reports whether the revision was read in this pass (false
	// when it was the same as the last pass's).
	Read     bool
	Plan     plan.Plan
	Outcomes []Outcome
	// Recorded is the recorded state the pass planned against, as read
	// at its start.
	Recorded []state.Campaign
}

// Failed returns the outcomes that failed.
func (r *Result) Failed() []Outcome {
	var out []Outcome
	for _, o := range r.Outcomes {
		if o.Err != nil {
			out = append(out, o)
		}
	}
	return out
}

func (r *Reconciler) log() *slog.Logger {
	if r.Log != nil {
		return r.Log
	}
	return slog.New(slog.DiscardHandler)
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// ErrWrongBranch is returned when the config at the watched head names
// another branch to watch: nothing is launched from a branch the
// repository does not say is the one.
var ErrWrongBranch = errors.New("the config names another branch to watch")

// ErrInvalidConfig is returned when the repository config at the watched
// head does not load: what it would allow (the branch, approvers, pruning,
// the launch gate) is unknown, so nothing is launched until it is fixed.
var ErrInvalidConfig = errors.New("the repository config is invalid")

// Once runs one pass: head → desired state → recorded state → plan →
// carry out → mirror. An error is returned only when the pass could not
// plan at all (the repository or the recorded state could not be read)
// or must not launch anything (ErrWrongBranch, a refusal of the Gate);
// actions that fail are in Result.Outcomes and the others are carried out.
func (r *Reconciler) Once(ctx context.Context) (res *Result, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.Observer != nil {
		start := time.Now()
		defer func() { r.Observer.ObservePass(res, err, time.Since(start)) }()
	}
	return r.once(ctx)
}

func (r *Reconciler) once(ctx context.Context) (*Result, error) {
	// The recorded state is read while Git is: neither needs the other,
	// and each costs round trips.
	type listed struct {
		recorded []state.Campaign
		err      error
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	list := make(chan listed, 1)
	go func() {
		rec, err := r.State.List(lctx)
		list <- listed{rec, err}
	}()
	sha, err := r.Source.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the head of %s: %w", r.branch(), err)
	}
	res := &Result{Revision: sha}
	rev := r.last
	if rev == nil || rev.SHA != sha {
		if rev, err = r.Source.Read(ctx, sha); err != nil {
			return nil, fmt.Errorf("read the campaigns repository at %s: %w", short(sha), err)
		}
		r.last, res.Read = rev, true
		r.log().Info("read campaigns repository", "revision", short(sha), "definitions", len(rev.Desired.Definitions),
			"errors", len(rev.Desired.Errors), "approvals", len(rev.Desired.Approvals))
	}
	if rev.ConfigFile != "" && rev.Config == nil {
		var problems []string
		for _, e := range rev.Desired.Errors {
			if e.File == rev.ConfigFile {
				problems = append(problems, e.Error())
			}
		}
		return nil, fmt.Errorf("%w: %s at %s: %s; nothing is launched", ErrInvalidConfig, rev.ConfigFile, short(sha), strings.Join(problems, "; "))
	}
	if r.Branch != "" && rev.Config != nil && rev.Config.Watch.Branch != "" && rev.Config.Watch.Branch != r.Branch {
		return nil, fmt.Errorf("%w: %s at %s says watch.branch %q, but this reconciler watches %q; nothing is launched",
			ErrWrongBranch, rev.ConfigFile, short(sha), rev.Config.Watch.Branch, r.Branch)
	}
	if r.Gate != nil {
		if err := r.Gate.Check(ctx, rev); err != nil {
			return nil, fmt.Errorf("%w; nothing is launched", err)
		}
	}
	got := <-list
	if got.err != nil {
		return nil, fmt.Errorf("read recorded state: %w", got.err)
	}
	recorded := got.recorded
	res.Recorded = recorded
	rev = r.resolve(ctx, rev, recorded)
	want := rev.Desired
	if r.Reviews != nil {
		reviewed, err := r.Reviews.Approvals(ctx, rev, recorded)
		if err != nil {
			r.log().Error("read approval reviews", "error", err)
		}
		if len(reviewed) > 0 {
			want.Approvals = append(slices.Clip(want.Approvals), reviewed...)
		}
	}
	p := plan.Compute(want, recorded, rev.Policy())
	res.Plan = p
	if res.Read {
		// Said once per revision, not on every pass.
		for _, e := range p.Errors {
			r.log().Warn("invalid definition", "revision", short(sha), "error", e.Error())
		}
	}
	res.Outcomes = r.apply(ctx, sha, rev, p, recorded)
	for _, o := range res.Outcomes {
		if o.Err != nil {
			r.log().Error("apply failed", "id", o.ID, "action", o.Action, "approval", o.Approval, "error", o.Err)
		} else {
			r.log().Info("applied", "id", o.ID, "action", o.Action, "approval", o.Approval, "revision", short(sha))
		}
	}
	if r.Notifier != nil {
		r.notify(ctx, rev.Config, recorded)
	}
	if r.Mirror != nil {
		statusBranch := ""
		if rev.Config != nil {
			statusBranch = rev.Config.Status.Branch
		}
		r.mirror(ctx, sha, statusBranch, p, res.Outcomes, recorded)
	}
	return res, nil
}

// resolve resolves rev's repositories_from: a definition resolved
// earlier at this revision, or pinned by its recorded run, is not asked
// about again; one that failed is, on the next pass.
func (r *Reconciler) resolve(ctx context.Context, rev *desired.Revision, recorded []state.Campaign) *desired.Revision {
	if r.resolvedAt != rev.SHA {
		r.resolvedAt, r.resolved = rev.SHA, map[string]spec.Definition{}
	}
	rs := r.Repositories
	if rs == nil {
		rs = &repoquery.Resolver{}
	}
	fromRecord := repoquery.Pinned(recorded, rev.SHA)
	out := rs.Revision(ctx, rev, func(d spec.Definition) (spec.Definition, bool) {
		if p, ok := r.resolved[d.ID]; ok {
			return p, true
		}
		return fromRecord(d)
	})
	for _, d := range out.Desired.Definitions {
		if len(d.Queries()) > 0 {
			r.resolved[d.ID] = d
		}
	}
	return out
}

func (r *Reconciler) branch() string {
	if r.Branch == "" {
		return "the watched branch"
	}
	return r.Branch
}

// apply carries out every change and applying approval of p, each on its
// own: a failure is recorded and the rest go on.
func (r *Reconciler) apply(ctx context.Context, sha string, rev *desired.Revision, p plan.Plan, recorded []state.Campaign) []Outcome {
	defs := map[string]spec.Definition{}
	for _, d := range rev.Desired.Definitions {
		if _, ok := defs[d.ID]; !ok {
			defs[d.ID] = d
		}
	}
	recs := map[string]state.Campaign{}
	for _, c := range recorded {
		recs[c.ID] = c
	}
	var out []Outcome
	for _, c := range p.Changes {
		if !c.Action.Changes() || ctx.Err() != nil {
			continue
		}
		o := Outcome{ID: c.ID, Action: string(c.Action)}
		o.Err = r.applyChange(ctx, sha, c, defs[c.ID], recs[c.ID])
		out = append(out, o)
	}
	for _, a := range p.Approvals {
		if a.Status != plan.ApprovalApply || ctx.Err() != nil {
			continue
		}
		o := Outcome{ID: a.Record.Target, Approval: a.Record.File, Action: string(a.Record.Action)}
		o.Err = r.Dispatch.Decide(ctx, a, recs[a.Record.Campaign()])
		out = append(out, o)
	}
	for _, rec := range recorded {
		// A run whose starter stopped (a reconciler killed) between
		// its start and its last page of units, of the spec still
		// desired: the pages it waits for go to it again. A run of
		// another spec is updated or pruned by the plan instead.
		d, ok := defs[rec.ID]
		if rec.AwaitingPieces <= 0 || rec.Phase.Done() || !ok || d.Digest != rec.SpecDigest || ctx.Err() != nil {
			continue
		}
		out = append(out, Outcome{ID: rec.ID, Action: "send units", Err: r.Dispatch.ResendPieces(ctx, d, rec)})
	}
	return out
}

func (r *Reconciler) applyChange(ctx context.Context, sha string, c plan.Change, d spec.Definition, rec state.Campaign) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: %v", p)
		}
	}()
	switch c.Action {
	case plan.Create:
		return r.Dispatch.Start(ctx, d, sha, 1)
	case plan.Update, plan.Suspend, plan.Resume:
		if rec.Phase.Done() {
			// A finished run takes a new spec as a new run.
			if !c.SpecChanged() {
				return nil
			}
			return r.Dispatch.Start(ctx, d, sha, rec.Generation+1)
		}
		if c.SpecChanged() {
			if c.Strategy == spec.UpdateRestart || d.Campaign == nil {
				// The run stops; a later pass starts the new one when the
				// recorded state shows it finished.
				return r.Dispatch.Cancel(ctx, rec, fmt.Sprintf("restarting with the spec at %s", short(sha)))
			}
			if err := r.Dispatch.UpdateInPlace(ctx, d, rec, sha); err != nil {
				return err
			}
		}
		if c.Action == plan.Suspend || c.Action == plan.Resume {
			return r.Dispatch.Suspend(ctx, rec, c.Action == plan.Suspend)
		}
		return nil
	case plan.Prune:
		if !rec.Phase.Done() {
			// Its pull requests close, as it declares, once it has
			// stopped opening them.
			return r.Dispatch.Cancel(ctx, rec, "pruned: removed from the campaigns repository")
		}
		if cl, ok := plan.CloseOnRemoval(rec); ok {
			return r.Dispatch.ClosePullRequests(ctx, rec, status.ActRequest{Action: status.ActClose, Comment: cl.Comment, DeleteBranch: cl.DeleteBranch})
		}
		return nil
	case plan.Reopen:
		return r.Dispatch.Reopen(ctx, rec, c.Reopen)
	}
	return nil
}

// mirror writes the status when it changed since the last write. A
// failure is logged: the mirror is a view, never a reason to stop.
func (r *Reconciler) mirror(ctx context.Context, sha, statusBranch string, p plan.Plan, outcomes []Outcome, before []state.Campaign) {
	after := before
	if len(outcomes) > 0 {
		if now, err := r.State.List(ctx); err == nil {
			after = now
		}
	}
	s := Status{Revision: sha, StatusBranch: statusBranch, Time: r.now().UTC(), Campaigns: after, Plan: p, Outcomes: outcomes}
	fp := fingerprint(s)
	if fp == r.lastStatus {
		return
	}
	if err := r.Mirror.Write(ctx, s); err != nil {
		r.log().Error("write status mirror", "error", err)
		return
	}
	r.lastStatus = fp
}

// fingerprint says what of a status is worth a new mirror commit: not the
// time.
func fingerprint(s Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", s.Revision, s.StatusBranch)
	for _, c := range s.Campaigns {
		fmt.Fprintf(&b, "%s %s %s %d %s %v %q\n", c.ID, c.Phase, c.SpecDigest, c.Generation, c.RunID, c.Suspended, c.Message)
		for _, rp := range c.Repos {
			fmt.Fprintf(&b, " %s %s %s %s\n", rp.Name, rp.Status, rp.PullRequestURL, rp.PullRequestState)
		}
		for _, pa := range c.PendingApprovals {
			fmt.Fprintf(&b, " ? %s %s\n", pa.Target, pa.ResultDigest)
		}
		for _, rp := range c.Reports {
			sum := sha256.Sum256([]byte(string(rp.Frontmatter) + "\x00" + rp.Body + "\x00" + rp.Raw + "\x00" + rp.Error + "\x00" +
				rp.Warning + "\x00" + strings.Join(rp.ValidationErrors, "\n")))
			fmt.Fprintf(&b, " = %s %s %s %s %x\n", rp.Unit, rp.Repository, rp.Target, rp.Status, sum[:8])
		}
	}
	for _, e := range s.Plan.Errors {
		fmt.Fprintf(&b, "! %s\n", e.Error())
	}
	for _, a := range s.Plan.Approvals {
		fmt.Fprintf(&b, "a %s %s %s\n", a.Record.File, a.Status, a.Reason)
	}
	for _, o := range s.Outcomes {
		if o.Err != nil {
			fmt.Fprintf(&b, "x %s\n", o)
		}
	}
	return b.String()
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
