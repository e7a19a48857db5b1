package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/state/memory"
	"github.com/fleetlift/fleetlift/internal/status"
)

// ---- fixtures ----

// camp writes a Campaign definition in YAML.
type camp struct {
	id      string
	prompt  string
	update  string // sync_policy.update; "" is the default (in_place)
	prune   bool
	suspend bool
	// pullRequest is the template's pull_request, as YAML flow.
	pullRequest string
}

func (c camp) yaml() string {
	prompt := c.prompt
	if prompt == "" {
		prompt = "Migrate from log.Printf to log/slog."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nkind: Campaign\nid: %s\ntitle: %s\n", c.id, c.id)
	b.WriteString("repositories:\n  - url: https://github.com/acme/payments.git\n  - url: https://github.com/acme/ledger.git\n")
	fmt.Fprintf(&b, "template:\n  execution:\n    agentic:\n      prompt: %q\n", prompt)
	if c.pullRequest != "" {
		fmt.Fprintf(&b, "  pull_request: %s\n", c.pullRequest)
	}
	fmt.Fprintf(&b, "suspend: %t\nsync_policy:\n  prune: %t\n", c.suspend, c.prune)
	if c.update != "" {
		fmt.Fprintf(&b, "  update: %s\n", c.update)
	}
	return b.String()
}

// config writes a fleetlift.yaml watching branch, definitions under
// campaigns/.
func config(branch string, prune bool) string {
	return fmt.Sprintf("version: 1\nkind: Config\nwatch:\n  branch: %s\n  path: campaigns\nforge:\n  type: local\nprune: %t\n", branch, prune)
}

// files maps paths in the campaigns repository to their content.
type files map[string]string

// revision reads files as the campaigns repository at sha, with the real
// loader (YAML needs no CUE worker pool).
func revision(t testing.TB, sha string, fs files) *desired.Revision {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range fs {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	rev, err := desired.Read(context.Background(), &spec.Loader{Eval: spec.InProcess(1)}, fsys, sha, "")
	if err != nil {
		t.Fatalf("read revision %s: %v", sha, err)
	}
	return rev
}

// definition returns the definition id of rev.
func definition(t testing.TB, rev *desired.Revision, id string) spec.Definition {
	t.Helper()
	for _, d := range rev.Desired.Definitions {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("revision %s has no definition %s (errors: %v)", rev.SHA, id, spec.Errors(rev.Desired.Errors))
	return spec.Definition{}
}

// recorded is the state a run of d records: generation gen, in phase.
func recorded(t testing.TB, d spec.Definition, rev string, gen int64, phase state.Phase) state.Campaign {
	t.Helper()
	var v any = d.Task
	c := state.Campaign{ID: d.ID, Kind: state.Kind(d.Kind), File: d.File, SpecDigest: d.Digest, SourceRevision: rev,
		Generation: gen, WorkflowID: "fleetlift/" + d.ID, RunID: fmt.Sprintf("run-%d", gen), Phase: phase}
	if d.Campaign != nil {
		v = d.Campaign
		c.Prune = d.Campaign.SyncPolicy.Prune
		c.Suspended = d.Campaign.Suspend
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c.Spec = b
	return c
}

// ---- fakes ----

// fakeSource is the campaigns repository: revisions by commit and a
// settable head.
type fakeSource struct {
	mu      sync.Mutex
	head    string
	revs    map[string]*desired.Revision
	reads   []string
	headErr error
}

func (s *fakeSource) push(rev *desired.Revision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revs == nil {
		s.revs = map[string]*desired.Revision{}
	}
	s.revs[rev.SHA] = rev
	s.head = rev.SHA
}

func (s *fakeSource) Head(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headErr != nil {
		return "", s.headErr
	}
	return s.head, nil
}

func (s *fakeSource) Read(_ context.Context, sha string) (*desired.Revision, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads = append(s.reads, sha)
	rev, ok := s.revs[sha]
	if !ok {
		return nil, fmt.Errorf("no commit %s", sha)
	}
	return rev, nil
}

func (s *fakeSource) readsSoFar() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reads)
}

// fakeDispatch records what it was asked to do, one line per call that
// took effect. It fails every call for an id in fail.
type fakeDispatch struct {
	mu      sync.Mutex
	calls   []string
	decided []decision
	fail    map[string]error
	// onStart, when set, runs after a Start took effect (to record the
	// run as a workflow would).
	onStart func(d spec.Definition, rev string, gen int64)
}

type decision struct {
	Change plan.ApprovalChange
	Rec    state.Campaign
}

var _ reconcile.Dispatcher = (*fakeDispatch)(nil)

func (f *fakeDispatch) do(id, call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[id]; err != nil {
		return err
	}
	f.calls = append(f.calls, call)
	return nil
}

func (f *fakeDispatch) Start(_ context.Context, d spec.Definition, rev string, gen int64) error {
	if d.ID == "" {
		return errors.New("start without a definition")
	}
	if err := f.do(d.ID, fmt.Sprintf("start %s gen=%d rev=%s", d.ID, gen, rev)); err != nil {
		return err
	}
	if f.onStart != nil {
		f.onStart(d, rev, gen)
	}
	return nil
}

func (f *fakeDispatch) UpdateInPlace(_ context.Context, d spec.Definition, rec state.Campaign, rev string) error {
	return f.do(d.ID, fmt.Sprintf("update %s gen=%d rev=%s", d.ID, rec.Generation, rev))
}

func (f *fakeDispatch) Cancel(_ context.Context, rec state.Campaign, _ string) error {
	return f.do(rec.ID, fmt.Sprintf("cancel %s gen=%d", rec.ID, rec.Generation))
}

func (f *fakeDispatch) ClosePullRequests(_ context.Context, rec state.Campaign, req status.ActRequest) error {
	return f.do(rec.ID, fmt.Sprintf("close %s comment=%q delete=%t", rec.ID, req.Comment, req.DeleteBranch))
}

func (f *fakeDispatch) Reopen(_ context.Context, rec state.Campaign, units []string) error {
	return f.do(rec.ID, fmt.Sprintf("reopen %s %v", rec.ID, units))
}

func (f *fakeDispatch) ResendPieces(_ context.Context, d spec.Definition, rec state.Campaign) error {
	return f.do(rec.ID, fmt.Sprintf("resend %s gen=%d from=%d", d.ID, rec.Generation, rec.AwaitingPieces))
}

func (f *fakeDispatch) Suspend(_ context.Context, rec state.Campaign, suspend bool) error {
	verb := "resume"
	if suspend {
		verb = "suspend"
	}
	return f.do(rec.ID, fmt.Sprintf("%s %s", verb, rec.ID))
}

func (f *fakeDispatch) Decide(_ context.Context, a plan.ApprovalChange, rec state.Campaign) error {
	if err := f.do(a.Record.Campaign(), fmt.Sprintf("decide %s %s (%s)", a.Record.Action, a.Record.Target, a.Record.File)); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decided = append(f.decided, decision{a, rec})
	return nil
}

// take returns the calls since the last take.
func (f *fakeDispatch) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

// fakeMirror records the statuses written; it fails while err is set.
type fakeMirror struct {
	mu      sync.Mutex
	written []reconcile.Status
	err     error
}

func (m *fakeMirror) Write(_ context.Context, s reconcile.Status) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.written = append(m.written, s)
	return nil
}

func (m *fakeMirror) writes() []reconcile.Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.written)
}

// harness is a Reconciler over fakes.
type harness struct {
	src    *fakeSource
	store  *memory.Store
	disp   *fakeDispatch
	mirror *fakeMirror
	r      *reconcile.Reconciler
}

func newHarness() *harness {
	h := &harness{src: &fakeSource{}, store: memory.New(), disp: &fakeDispatch{}, mirror: &fakeMirror{}}
	h.r = &reconcile.Reconciler{Source: h.src, State: h.store, Dispatch: h.disp, Mirror: h.mirror, Branch: "main"}
	return h
}

// once runs a pass that must not fail.
func (h *harness) once(t testing.TB) *reconcile.Result {
	t.Helper()
	res, err := h.r.Once(context.Background())
	if err != nil {
		t.Fatalf("Once: %v", err)
	}
	return res
}

// put records c as a workflow would.
func (h *harness) put(t testing.TB, c state.Campaign) {
	t.Helper()
	if err := h.store.Put(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// recordStarts makes the dispatcher record each run it starts, in phase,
// as the workflow would. It may run on the loop's goroutine.
func (h *harness) recordStarts(t testing.TB, phase state.Phase) {
	h.disp.onStart = func(d spec.Definition, rev string, gen int64) {
		c := recorded(t, d, rev, gen, phase)
		if err := h.store.Put(context.Background(), c); err != nil {
			t.Errorf("record %s: %v", d.ID, err)
		}
	}
}

// wantCalls checks the dispatcher calls since the last check.
func (h *harness) wantCalls(t testing.TB, pass string, want ...string) {
	t.Helper()
	got := h.disp.take()
	if !slices.Equal(got, want) {
		t.Errorf("%s: dispatched\n  %s\nwant\n  %s", pass, orNone(got), orNone(want))
	}
}

func orNone(calls []string) string {
	if len(calls) == 0 {
		return "(nothing)"
	}
	return strings.Join(calls, "\n  ")
}

func change(t testing.TB, p plan.Plan, id string) plan.Change {
	t.Helper()
	for _, c := range p.Changes {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("plan has no change for %s", id)
	return plan.Change{}
}

// ---- tests ----

func TestCreateStartsOnceThenIdempotent(t *testing.T) {
	h := newHarness()
	rev := revision(t, "c1", files{"fleetlift.yaml": config("main", false), "campaigns/slog.yaml": camp{id: "slog"}.yaml()})
	h.src.push(rev)

	res := h.once(t)
	h.wantCalls(t, "first pass", "start slog gen=1 rev=c1")
	if len(res.Outcomes) != 1 || res.Outcomes[0].ID != "slog" || res.Outcomes[0].Action != "create" || res.Outcomes[0].Err != nil {
		t.Errorf("outcomes = %v, want one successful create of slog", res.Outcomes)
	}

	h.put(t, recorded(t, definition(t, rev, "slog"), "c1", 1, state.PhaseRunning))
	res = h.once(t)
	h.wantCalls(t, "second pass, slog recorded as running")
	if len(res.Outcomes) != 0 {
		t.Errorf("outcomes = %v, want none", res.Outcomes)
	}
	if a := change(t, res.Plan, "slog").Action; a != plan.Unchanged {
		t.Errorf("slog: action %s, want unchanged", a)
	}
}

func TestDispatchFailureIsPerCampaign(t *testing.T) {
	h := newHarness()
	rev := revision(t, "c1", files{
		"fleetlift.yaml":      config("main", false),
		"campaigns/bad.yaml":  camp{id: "bad"}.yaml(),
		"campaigns/good.yaml": camp{id: "good"}.yaml(),
	})
	h.src.push(rev)
	boom := errors.New("temporal unavailable")
	h.disp.fail = map[string]error{"bad": boom}

	res := h.once(t) // no error: one campaign failing does not fail the pass
	h.wantCalls(t, "first pass", "start good gen=1 rev=c1")
	failed := res.Failed()
	if len(failed) != 1 || failed[0].ID != "bad" || !errors.Is(failed[0].Err, boom) {
		t.Fatalf("failed outcomes = %v, want bad failing with %v", failed, boom)
	}

	h.put(t, recorded(t, definition(t, rev, "good"), "c1", 1, state.PhaseRunning))
	h.disp.fail = nil
	res = h.once(t)
	h.wantCalls(t, "next pass retries", "start bad gen=1 rev=c1")
	if len(res.Failed()) != 0 {
		t.Errorf("failed outcomes = %v, want none", res.Failed())
	}
}

func TestInvalidDefinitionDoesNotStopOthers(t *testing.T) {
	h := newHarness()
	before := revision(t, "c1", files{
		"fleetlift.yaml":        config("main", true),
		"campaigns/broken.yaml": camp{id: "broken", prune: true}.yaml(),
	})
	h.put(t, recorded(t, definition(t, before, "broken"), "c1", 1, state.PhaseRunning))

	h.src.push(revision(t, "c2", files{
		"fleetlift.yaml":        config("main", true),
		"campaigns/broken.yaml": "version: 1\nkind: Campaign\nid: broken\ntitle: [unclosed\n",
		"campaigns/good.yaml":   camp{id: "good"}.yaml(),
	}))
	res := h.once(t)
	// Pruning is allowed by the config and the spec, yet the campaign whose
	// file is broken is left running.
	h.wantCalls(t, "pass", "start good gen=1 rev=c2")
	if len(res.Plan.Errors) != 1 || res.Plan.Errors[0].File != "campaigns/broken.yaml" {
		t.Errorf("plan errors = %v, want one in campaigns/broken.yaml", res.Plan.Errors)
	}
	if a := change(t, res.Plan, "broken").Action; a != plan.Unknown {
		t.Errorf("broken: action %s, want unknown", a)
	}
}

func TestUpdateRunning(t *testing.T) {
	for _, strategy := range []string{"", "in_place", "restart"} {
		t.Run("strategy="+strategy, func(t *testing.T) {
			h := newHarness()
			old := revision(t, "c1", files{"fleetlift.yaml": config("main", false),
				"campaigns/slog.yaml": camp{id: "slog", update: strategy}.yaml()})
			h.put(t, recorded(t, definition(t, old, "slog"), "c1", 1, state.PhaseRunning))
			rev := revision(t, "c2", files{"fleetlift.yaml": config("main", false),
				"campaigns/slog.yaml": camp{id: "slog", update: strategy, prompt: "Use slog everywhere."}.yaml()})
			h.src.push(rev)

			res := h.once(t)
			if a := change(t, res.Plan, "slog").Action; a != plan.Update {
				t.Fatalf("slog: action %s, want update", a)
			}
			if strategy != "restart" {
				h.wantCalls(t, "update in place", "update slog gen=1 rev=c2")
				return
			}
			h.wantCalls(t, "restart: the run is cancelled first", "cancel slog gen=1")

			// The run has stopped: the next pass starts the new spec.
			cancelled := recorded(t, definition(t, old, "slog"), "c1", 1, state.PhaseCancelled)
			h.put(t, cancelled)
			h.once(t)
			h.wantCalls(t, "restart: once cancelled", "start slog gen=2 rev=c2")

			h.put(t, recorded(t, definition(t, rev, "slog"), "c2", 2, state.PhaseRunning))
			h.once(t)
			h.wantCalls(t, "restart: new run recorded")
		})
	}
}

// A running campaign that waits for pages of its units its starter never
// sent (a reconciler killed between the start and its signals) is sent
// them again on the next pass, while its spec is still the one desired;
// one whose spec changed since is updated instead, and one that stopped
// waiting is left alone.
func TestRunWaitingForItsUnitsIsSentThem(t *testing.T) {
	h := newHarness()
	rev := revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml(), "campaigns/other.yaml": camp{id: "other"}.yaml()})
	waiting := recorded(t, definition(t, rev, "slog"), "c1", 1, state.PhaseRunning)
	waiting.AwaitingPieces = 3
	h.put(t, waiting)
	h.put(t, recorded(t, definition(t, rev, "other"), "c1", 1, state.PhaseRunning))
	h.src.push(rev)
	h.once(t)
	h.wantCalls(t, "waiting for page 4", "resend slog gen=1 from=3")

	waiting.AwaitingPieces = 0
	h.put(t, waiting)
	h.once(t)
	h.wantCalls(t, "no longer waiting")

	changed := revision(t, "c2", files{"campaigns/slog.yaml": camp{id: "slog", prompt: "Use slog everywhere."}.yaml(), "campaigns/other.yaml": camp{id: "other"}.yaml()})
	waiting.AwaitingPieces = 3
	h.put(t, waiting)
	h.src.push(changed)
	h.once(t)
	h.wantCalls(t, "its spec changed", "update slog gen=1 rev=c2")
}

// TestFinishedRun: a finished run takes a new spec as a new run of every
// repository, whatever its update policy (there is no run left to update
// in place or to cancel); with no new spec, nothing happens: a campaign
// that ended with failures is retried by a person, not by the loop.
func TestFinishedRun(t *testing.T) {
	cases := []struct {
		name   string
		phase  state.Phase
		gen    int64
		update string
		prompt string
		want   []string
	}{
		{name: "completed, spec changed", phase: state.PhaseCompleted, gen: 1, prompt: "Use slog everywhere.", want: []string{"start slog gen=2 rev=c2"}},
		{name: "failed, spec changed", phase: state.PhaseFailed, gen: 3, prompt: "Use slog everywhere.", want: []string{"start slog gen=4 rev=c2"}},
		{name: "completed with failures, spec changed, in place", phase: state.PhaseCompletedWithFailures, gen: 2, update: "in_place",
			prompt: "Use slog everywhere.", want: []string{"start slog gen=3 rev=c2"}},
		{name: "completed with failures, spec changed, restart", phase: state.PhaseCompletedWithFailures, gen: 2, update: "restart",
			prompt: "Use slog everywhere.", want: []string{"start slog gen=3 rev=c2"}},
		{name: "completed, no change", phase: state.PhaseCompleted, gen: 1},
		{name: "completed with failures, no change", phase: state.PhaseCompletedWithFailures, gen: 2},
		{name: "cancelled, no change", phase: state.PhaseCancelled, gen: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness()
			old := revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog", update: c.update}.yaml()})
			h.put(t, recorded(t, definition(t, old, "slog"), "c1", c.gen, c.phase))
			h.src.push(revision(t, "c2", files{"campaigns/slog.yaml": camp{id: "slog", update: c.update, prompt: c.prompt}.yaml()}))
			h.once(t)
			h.wantCalls(t, "pass", c.want...)
		})
	}
}

func TestSuspendResume(t *testing.T) {
	cases := []struct {
		name          string
		before, after bool
		want          string
		action        plan.Action
	}{
		{"suspend", false, true, "suspend slog", plan.Suspend},
		{"resume", true, false, "resume slog", plan.Resume},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness()
			old := revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog", suspend: c.before}.yaml()})
			h.put(t, recorded(t, definition(t, old, "slog"), "c1", 1, state.PhaseRunning))
			h.src.push(revision(t, "c2", files{"campaigns/slog.yaml": camp{id: "slog", suspend: c.after}.yaml()}))

			res := h.once(t)
			if a := change(t, res.Plan, "slog").Action; a != c.action {
				t.Fatalf("slog: action %s, want %s", a, c.action)
			}
			calls := h.disp.take()
			if !slices.Contains(calls, c.want) {
				t.Errorf("dispatched %v, want %q among them", calls, c.want)
			}
			for _, call := range calls {
				if strings.HasPrefix(call, "cancel ") || strings.HasPrefix(call, "start ") {
					t.Errorf("dispatched %q: a %s must not stop or restart the run", call, c.name)
				}
			}
		})
	}
}

func TestRemovedFromGit(t *testing.T) {
	cases := []struct {
		name        string
		configPrune bool
		specPrune   bool
		phase       state.Phase
		action      plan.Action
		close, open bool
		want        []string
	}{
		{name: "prune allowed", configPrune: true, specPrune: true, phase: state.PhaseRunning, action: plan.Prune, want: []string{"cancel slog gen=1"}},
		{name: "prune allowed, run finished", configPrune: true, specPrune: true, phase: state.PhaseCompleted, action: plan.Prune},
		{name: "config does not allow", configPrune: false, specPrune: true, phase: state.PhaseRunning, action: plan.Orphaned},
		{name: "spec does not allow", configPrune: true, specPrune: false, phase: state.PhaseRunning, action: plan.Orphaned},
		// pull_request.close: the open pull requests close once the run
		// has stopped.
		{name: "closes its pull requests, once stopped", configPrune: true, specPrune: true, phase: state.PhaseRunning,
			action: plan.Prune, close: true, open: true, want: []string{"cancel slog gen=1"}},
		{name: "closes its pull requests", configPrune: true, specPrune: true, phase: state.PhaseCompleted,
			action: plan.Prune, close: true, open: true, want: []string{`close slog comment="Superseded." delete=true`}},
		{name: "none open", configPrune: true, specPrune: true, phase: state.PhaseCompleted, action: plan.Prune, close: true},
		{name: "declares no closing", configPrune: true, specPrune: true, phase: state.PhaseCompleted, action: plan.Prune, open: true},
		{name: "orphaned: nothing closes", configPrune: false, specPrune: true, phase: state.PhaseCompleted, action: plan.Orphaned,
			close: true, open: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness()
			pr := ""
			if c.close {
				pr = `{branch_prefix: auto/slog, title: slog, close: {comment: "Superseded."}}`
			}
			old := revision(t, "c1", files{"fleetlift.yaml": config("main", c.configPrune),
				"campaigns/slog.yaml": camp{id: "slog", prune: c.specPrune, pullRequest: pr}.yaml()})
			rec := recorded(t, definition(t, old, "slog"), "c1", 1, c.phase)
			prState := state.PullRequestMerged
			if c.open {
				prState = state.PullRequestOpen
			}
			rec.Repos = []state.Repo{{Name: "payments", Status: state.RepoCompleted, PullRequestURL: "https://github.com/acme/payments/pull/1", PullRequestState: prState}}
			h.put(t, rec)
			rev := revision(t, "c2", files{"fleetlift.yaml": config("main", c.configPrune),
				"campaigns/other.yaml": camp{id: "other"}.yaml()})
			h.put(t, recorded(t, definition(t, rev, "other"), "c2", 1, state.PhaseRunning))
			h.src.push(rev)

			res := h.once(t)
			if a := change(t, res.Plan, "slog").Action; a != c.action {
				t.Errorf("slog: action %s, want %s", a, c.action)
			}
			h.wantCalls(t, "pass", c.want...)
		})
	}
}

func TestApprovals(t *testing.T) {
	const current = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const stale = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	cases := []struct {
		name   string
		digest string
		want   []string
	}{
		{"applies", current, []string{"decide approve slog/payments (approvals/payments.yaml)"}},
		{"stale digest", stale, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness()
			rev := revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml()})
			rec := recorded(t, definition(t, rev, "slog"), "c1", 1, state.PhaseAwaitingApproval)
			rec.PendingApprovals = []state.PendingApproval{{Target: "slog/payments", ResultDigest: current, WorkflowID: "fleetlift/slog/payments"}}
			h.put(t, rec)
			record := approval.Record{File: "approvals/payments.yaml", Target: "slog/payments", ResultDigest: c.digest,
				By: "alice", Action: approval.Approve}
			rev.Desired.Approvals = []approval.Record{record}
			h.src.push(rev)

			res := h.once(t)
			h.wantCalls(t, "pass", c.want...)
			if len(c.want) == 0 {
				if len(res.Plan.Approvals) != 1 || res.Plan.Approvals[0].Status != plan.ApprovalIgnored {
					t.Errorf("plan approvals = %+v, want the record ignored", res.Plan.Approvals)
				}
				return
			}
			if len(h.disp.decided) != 1 {
				t.Fatalf("decided %d times, want once", len(h.disp.decided))
			}
			d := h.disp.decided[0]
			if d.Change.Record != record {
				t.Errorf("decided record %+v, want %+v", d.Change.Record, record)
			}
			if d.Rec.ID != "slog" || d.Rec.RunID != rec.RunID {
				t.Errorf("decided on recorded run %s/%s, want slog/%s", d.Rec.ID, d.Rec.RunID, rec.RunID)
			}
			o := res.Outcomes
			if len(o) != 1 || o[0].Approval != "approvals/payments.yaml" || o[0].ID != "slog/payments" || o[0].Err != nil {
				t.Errorf("outcomes = %v, want the approval carried out", o)
			}
		})
	}
}

func TestLaunchGate(t *testing.T) {
	cases := []struct {
		name    string
		watch   string // the reconciler's branch
		wantErr bool
		want    []string
	}{
		{name: "config names another branch", watch: "main", wantErr: true},
		{name: "config names this branch", watch: "release", want: []string{"start slog gen=1 rev=c1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness()
			h.r.Branch = c.watch
			h.src.push(revision(t, "c1", files{"fleetlift.yaml": config("release", false), "campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
			_, err := h.r.Once(context.Background())
			if got := errors.Is(err, reconcile.ErrWrongBranch); got != c.wantErr {
				t.Fatalf("Once() error = %v; want ErrWrongBranch: %t", err, c.wantErr)
			}
			h.wantCalls(t, "pass", c.want...)
			if c.wantErr && len(h.mirror.writes()) != 0 {
				t.Errorf("mirror written %d times, want none", len(h.mirror.writes()))
			}
		})
	}
}

func TestRevisionReadOncePerHead(t *testing.T) {
	h := newHarness()
	h.src.push(revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
	if res := h.once(t); !res.Read || res.Revision != "c1" {
		t.Errorf("first pass: Read %t, Revision %s; want true, c1", res.Read, res.Revision)
	}
	if res := h.once(t); res.Read {
		t.Error("second pass at the same head: Read true, want false")
	}
	if got := h.src.readsSoFar(); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("after two passes at c1: reads %v, want [c1]", got)
	}

	h.src.push(revision(t, "c2", files{"campaigns/slog.yaml": camp{id: "slog", prompt: "Use slog everywhere."}.yaml()}))
	if res := h.once(t); !res.Read || res.Revision != "c2" {
		t.Errorf("after the head moved: Read %t, Revision %s; want true, c2", res.Read, res.Revision)
	}
	if got := h.src.readsSoFar(); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("after the head moved: reads %v, want [c1 c2]", got)
	}
}

func TestPassErrors(t *testing.T) {
	t.Run("head", func(t *testing.T) {
		h := newHarness()
		boom := errors.New("remote unreachable")
		h.src.headErr = boom
		if _, err := h.r.Once(context.Background()); !errors.Is(err, boom) {
			t.Errorf("Once() error = %v, want %v", err, boom)
		}
	})
	t.Run("read is retried", func(t *testing.T) {
		h := newHarness()
		h.src.head = "c1" // not readable yet
		if _, err := h.r.Once(context.Background()); err == nil {
			t.Fatal("Once() with an unreadable head: no error")
		}
		h.wantCalls(t, "failed pass")
		h.src.push(revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
		h.once(t)
		h.wantCalls(t, "next pass", "start slog gen=1 rev=c1")
	})
}

func TestMirror(t *testing.T) {
	h := newHarness()
	rev := revision(t, "c1", files{"campaigns/slog.yaml": camp{id: "slog"}.yaml()})
	h.src.push(rev)
	h.recordStarts(t, state.PhasePending)

	h.once(t)
	w := h.mirror.writes()
	if len(w) != 1 {
		t.Fatalf("after the first pass: %d mirror writes, want 1", len(w))
	}
	if w[0].Revision != "c1" || len(w[0].Campaigns) != 1 || w[0].Campaigns[0].Phase != state.PhasePending {
		t.Errorf("mirror shows revision %s, campaigns %+v; want c1 and slog pending (the state after the pass)", w[0].Revision, w[0].Campaigns)
	}

	h.once(t)
	if n := len(h.mirror.writes()); n != 1 {
		t.Errorf("after a pass that changed nothing: %d mirror writes, want 1", n)
	}

	h.put(t, recorded(t, definition(t, rev, "slog"), "c1", 1, state.PhaseRunning))
	h.once(t)
	w = h.mirror.writes()
	if len(w) != 2 || w[1].Campaigns[0].Phase != state.PhaseRunning {
		t.Fatalf("after the recorded state changed: %d mirror writes, want 2 showing slog running", len(w))
	}

	// A failing mirror does not fail the pass, and is written at the next.
	h.mirror.err = errors.New("push rejected")
	h.put(t, recorded(t, definition(t, rev, "slog"), "c1", 1, state.PhaseCompleted))
	h.once(t)
	h.mirror.err = nil
	h.once(t)
	w = h.mirror.writes()
	if len(w) != 3 || w[2].Campaigns[0].Phase != state.PhaseCompleted {
		t.Errorf("after a failed write: %d mirror writes, want 3 showing slog completed", len(w))
	}

	// A report that comes in, or changes, while the phase stays is shown.
	running := recorded(t, definition(t, rev, "slog"), "c1", 1, state.PhaseRunning)
	running.Reports = []state.Report{{Repository: "api", Status: state.ReportPending}}
	h.put(t, running)
	h.once(t)
	running.Reports[0] = state.Report{Repository: "api", Status: state.ReportValid, Body: "# Audit"}
	h.put(t, running)
	h.once(t)
	running.Reports[0].Body = "# Audit, second thoughts"
	h.put(t, running)
	h.once(t)
	w = h.mirror.writes()
	if len(w) != 6 || w[5].Campaigns[0].Reports[0].Body != "# Audit, second thoughts" {
		t.Errorf("after reports changed: %d mirror writes, want 6 showing the last report", len(w))
	}
}

// TestInvalidConfigLaunchesNothing: a config that does not load leaves
// unknown what it allows, so the pass launches nothing and says why; once
// fixed, the campaign starts.
func TestInvalidConfigLaunchesNothing(t *testing.T) {
	h := newHarness()
	h.r.Branch = "main"
	h.src.push(revision(t, "c1", files{"fleetlift.yaml": "version: 1\nkind: Config\nwatch: {branch: main}\nprune: maybe\n", "campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
	_, err := h.r.Once(context.Background())
	if !errors.Is(err, reconcile.ErrInvalidConfig) || !strings.Contains(err.Error(), "fleetlift.yaml:4") {
		t.Fatalf("Once() error = %v; want ErrInvalidConfig naming fleetlift.yaml:4", err)
	}
	h.wantCalls(t, "invalid config")
	h.src.push(revision(t, "c2", files{"fleetlift.yaml": config("main", false), "campaigns/slog.yaml": camp{id: "slog"}.yaml()}))
	if _, err := h.r.Once(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.wantCalls(t, "fixed config", "start slog gen=1 rev=c2")
}
