package workflow_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/mock"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// fleet stands in for the agents of a campaign's units: units whose key
// is in fail fail (until healed), the others complete with a PR.
type fleet struct {
	mu      sync.Mutex
	fail    map[string]bool
	started []string
	cleaned int
	// unit maps sandbox ids to unit keys, from the task id label.
	unit map[string]string
	// groups names the repositories of units that are groups; a
	// repository in failRepo fails there, the others open a PR.
	groups   map[string][]string
	failRepo map[string]bool
	// lose names units whose every sandbox is lost (the agent's wait
	// fails as RunSandboxed's does once it gave up); lost names direct
	// units that lost one sandbox and finished in the next.
	lose, lost map[string]bool
	// slow units' agents take this long (real time), or less when the
	// event until names for them has happened first; events records
	// "start:key" and "end:key" as units provision and clean up, and
	// "done:key" once the workflow holds the outcome of a unit's
	// RunSandboxed (byActivity maps its activity to the unit) or child.
	slow       map[string]time.Duration
	until      map[string]string
	events     []string
	byActivity map[string]string
	// runs records the length of each run of units.
	runs []int
	// took is how long each unit of a run says it worked (a second when
	// zero); within and attempts record each run's Within and its units'
	// attempts; afterUnit, when set, is told after each unit of a run of
	// the units it has done so far.
	took      time.Duration
	within    []time.Duration
	attempts  map[string][]int
	afterUnit func(done []status.UnitOutcome)
	// pages holds the results of the campaign's pages as they end, by
	// page workflow id.
	pages map[string]workflow.PageResult
	// cost is what each run of a unit's model calls cost, in US dollars;
	// unpriced, the model of each that the price table did not price.
	cost     float64
	unpriced string
}

// usage is what one run of a unit used of its model.
func (f *fleet) usage() *protocol.ModelUsage {
	return &protocol.ModelUsage{Requests: 1, InputTokens: 100, OutputTokens: 10, CostUSD: f.cost, Unpriced: f.unpriced}
}

func (f *fleet) unitOf(sandboxID string) string { return f.unit[sandboxID] }

// hold keeps a slow unit's agent busy for its time, or until its event.
func (f *fleet) hold(sandboxID string) {
	f.mu.Lock()
	key := f.unitOf(sandboxID)
	deadline := time.Now().Add(f.slow[key])
	event := f.until[key]
	f.mu.Unlock()
	for time.Now().Before(deadline) {
		f.mu.Lock()
		done := event != "" && slices.Contains(f.events, event)
		f.mu.Unlock()
		if done {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fleet) register(env *testsuite.TestWorkflowEnvironment) {
	var a *activity.Activities
	provision := func(_ context.Context, in activity.ProvisionInput) (activity.SandboxRef, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.unit == nil {
			f.unit = map[string]string{}
		}
		key := strings.TrimPrefix(in.Labels["fleetlift.io/task-id"], "c/")
		f.unit[in.SandboxID] = key
		f.started = append(f.started, key)
		f.events = append(f.events, "start:"+key)
		return activity.SandboxRef{ID: in.SandboxID}, nil
	}
	env.OnActivity(a.ProvisionSandbox, mock.Anything, mock.Anything).Return(provision)
	wait := func(_ context.Context, in activity.WaitInput) (protocol.Status, error) {
		f.hold(in.Sandbox.ID)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.lose[f.unitOf(in.Sandbox.ID)] {
			return protocol.Status{}, temporal.NewNonRetryableApplicationError("6 sandboxes lost before the agent finished", activity.ErrSandboxesLost, nil)
		}
		if f.fail[f.unitOf(in.Sandbox.ID)] {
			return protocol.Status{Phase: protocol.PhaseFailed}, nil
		}
		return protocol.Status{Phase: protocol.PhaseComplete}, nil
	}
	read := func(_ context.Context, in activity.ReadResultInput) (protocol.Result, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		key := f.unitOf(in.Sandbox.ID)
		if f.fail[key] {
			// A failed run used its model too.
			return protocol.Result{Status: protocol.PhaseFailed, Error: "verifier build failed",
				Repositories: []protocol.RepositoryResult{{Name: key, Status: "failed"}},
				ModelUsage:   f.usage()}, nil
		}
		if names, ok := f.groups[key]; ok {
			r := protocol.Result{Status: protocol.PhaseComplete}
			for _, name := range names {
				if f.failRepo[name] {
					r.Repositories = append(r.Repositories, protocol.RepositoryResult{Name: name, Status: "failed", Error: "verifier build failed"})
					continue
				}
				r.Repositories = append(r.Repositories, protocol.RepositoryResult{Name: name, Status: "success",
					PullRequest: &protocol.PullRequestInfo{URL: "file:///" + name + "#auto/c", Branch: "auto/c"}})
			}
			return r, nil
		}
		return protocol.Result{Status: protocol.PhaseComplete, Repositories: []protocol.RepositoryResult{{Name: key, Status: "success",
			PullRequest: &protocol.PullRequestInfo{URL: "file:///" + key + "#auto/c", Branch: "auto/c"}}},
			ModelUsage: f.usage()}, nil
	}
	cleanup := func(_ context.Context, in activity.CleanupInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.cleaned++
		f.events = append(f.events, "end:"+f.unitOf(in.Sandbox.ID))
		return nil
	}
	env.OnActivity(a.AwaitAgentResult, mock.Anything, mock.Anything).Return(awaitResult(
		func(context.Context, activity.SubmitManifestInput) error { return nil }, wait, read, cleanup))
	env.OnActivity(a.SubmitSteering, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(a.CleanupSandbox, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activity.CleanupInput) (activity.CleanupOutcome, error) {
		return activity.CleanupOutcome{}, cleanup(ctx, in)
	})
	lost := func(in activity.RunInput) []string {
		if f.lost[strings.TrimPrefix(in.Provision.Labels["fleetlift.io/task-id"], "c/")] {
			return []string{"sandbox " + in.Provision.SandboxID + " lost (killed): the work runs again in a new one"}
		}
		return nil
	}
	run := runSandboxed(lost, provision, wait, read, cleanup)
	env.OnActivity(a.RunSandboxed, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activity.RunInput) (status.RunOutcome, error) {
		info := sdkactivity.GetInfo(ctx)
		f.mu.Lock()
		if f.byActivity == nil {
			f.byActivity = map[string]string{}
		}
		f.byActivity[info.WorkflowExecution.RunID+"/"+info.ActivityID] = strings.TrimPrefix(in.Provision.Labels["fleetlift.io/task-id"], "c/")
		f.mu.Unlock()
		return run(ctx, in)
	})
	// The test environment calls this on its main loop once it handed
	// the result to the workflow and before the workflow runs on: an
	// agent held until "done:key" returns after the workflow took the
	// unit's outcome in, as an agent that ends later would.
	env.SetOnActivityCompletedListener(func(info *sdkactivity.Info, _ converter.EncodedValue, _ error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if key, ok := f.byActivity[info.WorkflowExecution.RunID+"/"+info.ActivityID]; ok {
			f.events = append(f.events, "done:"+key)
		}
	})
	// The same for a unit that runs as a child (id <campaign>/<key>@<run>).
	env.SetOnChildWorkflowCompletedListener(func(info *sdkworkflow.Info, v converter.EncodedValue, err error) {
		id := info.WorkflowExecution.ID
		if info.WorkflowType.Name == "CampaignPage" {
			var res workflow.PageResult
			if err == nil && v.Get(&res) == nil {
				f.mu.Lock()
				if f.pages == nil {
					f.pages = map[string]workflow.PageResult{}
				}
				f.pages[id] = res
				f.mu.Unlock()
			}
			return
		}
		key, _, _ := strings.Cut(id[strings.LastIndex(id, "/")+1:], "@")
		f.mu.Lock()
		defer f.mu.Unlock()
		f.events = append(f.events, "done:"+key)
	})
	env.OnActivity(a.RunUnits, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activity.UnitsInput) (activity.UnitsOutcome, error) {
		var out activity.UnitsOutcome
		f.mu.Lock()
		f.runs = append(f.runs, len(in.Units))
		f.within = append(f.within, in.Within)
		if f.attempts == nil {
			f.attempts = map[string][]int{}
		}
		for _, u := range in.Units {
			f.attempts[u.Key] = append(f.attempts[u.Key], u.Attempt)
		}
		took := cmp.Or(f.took, time.Second)
		f.mu.Unlock()
		for i, u := range in.Units {
			if i > 0 && in.StopAtFailure && out.Done[i-1].Failed() {
				break
			}
			r := activity.RunInput{Provision: activity.ProvisionInput{SandboxID: u.SandboxID, Labels: map[string]string{"fleetlift.io/task-id": u.TaskID}}}
			o, err := run(ctx, r)
			done := status.UnitOutcome{Key: u.Key, Outcome: o, Took: took, Attempt: u.Attempt}
			if err != nil {
				done.Error = err.Error()
				var ae *temporal.ApplicationError
				if errors.As(err, &ae) {
					done.Error = ae.Message()
				}
			}
			out.Done = append(out.Done, done)
			if f.afterUnit != nil {
				f.afterUnit(slices.Clone(out.Done))
			}
		}
		return out, nil
	})
}

// forEachMode runs a test with the sliding window and with strict
// batches.
func forEachMode(t *testing.T, run func(t *testing.T, strict bool)) {
	for _, strict := range []bool{false, true} {
		name := "sliding window"
		if strict {
			name = "strict batches"
		}
		t.Run(name, func(t *testing.T) { run(t, strict) })
	}
}

// campaignInput is a campaign of n units in strict batches of two, as
// the tests of batch boundaries need; the sliding window's tests clear
// StrictBatches.
func campaignInput(n int) workflow.CampaignInput {
	in := workflow.CampaignInput{
		ID:        "c",
		Template:  workflow.TaskInput{Manifest: protocol.Manifest{Mode: protocol.ModeTransform}, Timeout: time.Hour},
		BatchSize: 2, StrictBatches: true, MaxParallel: 2, ThresholdPercent: 30, FailureAction: "pause",
	}
	for i := range n {
		in.Units = append(in.Units, workflow.Unit{Key: fmt.Sprintf("r%d", i), Repositories: []protocol.Repository{{Name: fmt.Sprintf("r%d", i)}}})
	}
	return in
}

func newCampaignEnv(f *fleet) *testsuite.TestWorkflowEnvironment {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflow.Campaign)
	env.RegisterWorkflow(workflow.CampaignPage)
	env.RegisterWorkflow(workflow.Task)
	f.register(env)
	registerFollower(env)
	return env
}

func campaignResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) status.CampaignState {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("campaign did not complete")
	}
	var st status.CampaignState
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatalf("campaign error: %v", err)
	}
	return st
}

// continueAfter has the campaign in env continued once d of its time has
// passed (a pause at the threshold waits for that), and returns the state
// it had then, filled in when it happens.
func continueAfter(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration) *status.CampaignState {
	var st status.CampaignState
	env.RegisterDelayedCallback(func() {
		st = queryState(t, env)
		env.SignalWorkflow(workflow.SignalContinue, workflow.ContinueSignal{})
	}, d)
	return &st
}

func phases(st status.CampaignState) string {
	var out []string
	for _, u := range st.Units {
		out = append(out, u.Key+"="+string(u.Phase))
	}
	return strings.Join(out, " ")
}

func TestCampaignAllSucceed(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		env := newCampaignEnv(f)
		in := campaignInput(5)
		in.StrictBatches = strict
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if st.Phase != status.CampaignCompleted || st.Summary.Completed != 5 || st.Summary.PRsCreated != 5 {
			t.Errorf("state: %+v", st)
		}
		if f.cleaned != 5 {
			t.Errorf("%d sandboxes cleaned, want 5", f.cleaned)
		}
	})
}

// TestCampaignCountsTheRepositoriesOfGroups: a campaign of two groups of
// three repositories counts six repositories, not two, and one that failed
// inside a group that completed counts failed: the campaign did not
// change every repository.
func TestCampaignCountsTheRepositoriesOfGroups(t *testing.T) {
	f := &fleet{groups: map[string][]string{"g1": {"a", "b", "c"}, "g2": {"d", "e", "f"}}, failRepo: map[string]bool{"e": true}}
	env := newCampaignEnv(f)
	in := campaignInput(0)
	for key, names := range map[string][]string{"g1": f.groups["g1"], "g2": f.groups["g2"]} {
		u := workflow.Unit{Key: key}
		for _, n := range names {
			u.Repositories = append(u.Repositories, protocol.Repository{Name: n})
		}
		in.Units = append(in.Units, u)
	}
	slices.SortFunc(in.Units, func(a, b workflow.Unit) int { return strings.Compare(a.Key, b.Key) })
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	want := status.Summary{Total: 6, Completed: 5, Failed: 1, PRsCreated: 5}
	if st.Summary != want {
		t.Errorf("summary %+v, want %+v", st.Summary, want)
	}
	if st.Phase != status.CampaignCompletedWithFailures || st.Message != "1 of 6 repositories failed, 5 completed" {
		t.Errorf("ended %s (%s), want completed_with_failures (1 of 6 repositories failed, 5 completed)", st.Phase, st.Message)
	}
	var g2 []status.UnitRepo
	for _, u := range st.Units {
		if u.Key == "g2" {
			g2 = u.Repos
		}
	}
	wantG2 := []status.UnitRepo{{Name: "d", Status: "success", PullRequest: "file:///d#auto/c"},
		{Name: "e", Status: "failed"}, {Name: "f", Status: "success", PullRequest: "file:///f#auto/c"}}
	if !slices.Equal(g2, wantG2) {
		t.Errorf("g2's repositories %+v, want %+v", g2, wantG2)
	}
}

// TestCampaignRetriesAGroupWithAFailedRepository: retry-failed runs again
// a group that completed with a repository that failed, as it does a task
// that failed: the failed repositories it counts are what it retries.
func TestCampaignRetriesAGroupWithAFailedRepository(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{groups: map[string][]string{"g1": {"a", "b"}}, failRepo: map[string]bool{"b": true}}
		env := newCampaignEnv(f)
		in := campaignInput(3)
		in.StrictBatches = strict
		in.Units[0] = workflow.Unit{Key: "g1", Repositories: []protocol.Repository{{Name: "a"}, {Name: "b"}}}
		in.ThresholdPercent, in.BatchSize, in.MaxParallel = 100, 1, 1
		// One start an hour keeps the campaign running for hours.
		in.PullRequestsPerHour, in.Burst = 1, 1
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			f.failRepo["b"] = false
			f.mu.Unlock()
			env.SignalWorkflow(workflow.SignalRetryFailed, nil)
		}, 30*time.Minute)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if st.Phase != status.CampaignCompleted || st.Summary.Total != 4 || st.Summary.Completed != 4 || st.Summary.PRsCreated != 4 {
			t.Errorf("retry-failed: %s (%s) %+v", st.Phase, st.Message, st.Summary)
		}
		if st.Units[0].Attempts != 2 {
			t.Errorf("g1 attempts %d, want 2", st.Units[0].Attempts)
		}
	})
}

// TestCampaignSlidingWindow: by default a finished unit's slot is taken
// by the next at once: while one slow unit runs, the others go through
// the other slot, where strict batches wait for the slow one at every
// batch.
func TestCampaignSlidingWindow(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		// r0 holds its slot until r4 has started, which only the
		// sliding window does; in batches it holds it its full
		// time.
		f := &fleet{slow: map[string]time.Duration{"r0": 10 * time.Second}, until: map[string]string{"r0": "start:r4"}}
		if strict {
			f.slow["r0"] = 300 * time.Millisecond
		}
		env := newCampaignEnv(f)
		in := campaignInput(5)
		in.StrictBatches = strict
		env.ExecuteWorkflow(workflow.Campaign, in)
		if st := campaignResult(t, env); st.Summary.Completed != 5 {
			t.Fatalf("%s", phases(st))
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		r4, r0 := slices.Index(f.events, "start:r4"), slices.Index(f.events, "end:r0")
		if !strict && r4 > r0 {
			t.Errorf("r4 started after the slow r0 ended: %v", f.events)
		}
		if strict && (slices.Index(f.events, "start:r2") < r0 || r4 < r0) {
			t.Errorf("a batch started before the slow r0 of the first ended: %v", f.events)
		}
	})
}

// TestCampaignSlidingWindowStopsAtTheThreshold: in the sliding window,
// once more finished units failed than the threshold allows, no unit
// starts; those running finish, then the campaign pauses, and continue
// goes on with the rest.
//
// Runs of units (TestCampaignRunStopsAtAFailureForTheThreshold) stop in
// their own way: this is a campaign of reports, one child per unit.
func TestCampaignSlidingWindowStopsAtTheThreshold(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true}, slow: map[string]time.Duration{"r1": 10 * time.Second}, until: map[string]string{"r1": "done:r0"}}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.StrictBatches = false
	in.Template.Manifest.Mode = protocol.ModeReport
	paused := continueAfter(t, env, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if paused.Phase != status.CampaignPaused || phases(*paused) != "r0=failed r1=completed r2=pending r3=pending r4=pending r5=pending" {
		t.Errorf("at the threshold: %s %s", paused.Phase, phases(*paused))
	}
	if st.Phase != status.CampaignCompletedWithFailures || st.Summary.Completed != 5 || st.Summary.Failed != 1 {
		t.Errorf("after continue: %s %s", st.Phase, phases(st))
	}
}

// TestCampaignSlidingWindowAbortsAtTheThreshold: with the abort action,
// the units not started when the threshold passed never start.
func TestCampaignSlidingWindowAbortsAtTheThreshold(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true}}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.StrictBatches, in.MaxParallel, in.FailureAction = false, 1, "abort"
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if st.Phase != status.CampaignAborted || phases(st) != "r0=failed r1=skipped r2=skipped r3=skipped r4=skipped r5=skipped" {
		t.Errorf("abort: %s %s (%s)", st.Phase, phases(st), st.Message)
	}
}

// queryState reads the campaign's status query during a test.
func queryState(t *testing.T, env *testsuite.TestWorkflowEnvironment) status.CampaignState {
	t.Helper()
	v, err := env.QueryWorkflow(status.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st status.CampaignState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestCampaignThresholdPausesThenContinue(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true, "r1": true}}
	env := newCampaignEnv(f)
	paused := continueAfter(t, env, time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, campaignInput(6))
	st := campaignResult(t, env)
	if paused.Phase != status.CampaignPaused || paused.Summary.Failed != 2 || paused.Summary.Completed != 0 {
		t.Errorf("after the first batch the campaign must be paused: %+v", paused)
	}
	if !strings.Contains(paused.Message, "2 of 2 finished units failed, over the 30% threshold") {
		t.Errorf("pause message: %q", paused.Message)
	}
	if st.Phase != status.CampaignCompletedWithFailures || st.Summary.Completed != 4 || st.Summary.Failed != 2 {
		t.Errorf("after continue: %s %s %+v", st.Phase, phases(st), st.Summary)
	}
}

// Once its units' model calls cost max_cost_per_campaign, a campaign
// starts no more units and pauses, saying why; `continue` runs the rest,
// and it does not pause again at the same budget. A raised budget (an
// update in place) would pause it again once reached.
func TestCampaignPausesAtItsCostBudget(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{cost: 1.25}
		env := newCampaignEnv(f)
		in := campaignInput(6)
		in.StrictBatches = strict
		in.MaxCostUSD = 3
		paused := continueAfter(t, env, time.Hour)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		// Strict batches finish the batch that reached the budget; the
		// sliding window starts no unit once it is reached, not even the
		// next of a run of units that set out together.
		done, cost := 4, "$5.00"
		if !strict {
			done, cost = 3, "$3.75"
		}
		if paused.Phase != status.CampaignPaused || paused.Summary.Completed != done || paused.Summary.Total-paused.Summary.Completed != 6-done {
			t.Errorf("past $3 the campaign must pause with %d done: %s %s", done, paused.Phase, phases(*paused))
		}
		if want := "the campaign's model calls cost " + cost + ", reaching max_cost_per_campaign $3.00: paused until `fleetlift continue` or `abort`"; paused.Message != want {
			t.Errorf("pause message %q; want %q", paused.Message, want)
		}
		if u := paused.Summary.ModelUsage; u == nil || u.CostUSD != 1.25*float64(done) || u.Requests != int64(done) {
			t.Errorf("cost when paused %+v; want %s of %d calls", u, cost, done)
		}
		if st.Phase != status.CampaignCompleted || st.Summary.Completed != 6 {
			t.Errorf("after continue: %s %s", st.Phase, phases(st))
		}
		if u := st.Summary.ModelUsage; u == nil || u.CostUSD != 7.5 || u.Requests != 6 {
			t.Errorf("final cost %+v; want $7.50 of 6 calls", u)
		}
	})
}

// A campaign with a budget whose cost cannot be counted (a model the
// price table does not price) pauses too, naming the model.
func TestCampaignPausesWhenItsCostCannotBeCounted(t *testing.T) {
	f := &fleet{unpriced: "claude-opus-9"}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.MaxCostUSD = 100
	paused := continueAfter(t, env, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if paused.Phase != status.CampaignPaused || paused.Summary.Completed != 2 ||
		!strings.Contains(paused.Message, "the campaign's cost cannot be counted: the worker's price table (--model-prices) has no price for claude-opus-9") {
		t.Errorf("paused %s %s %q; want paused after the first batch, naming the model", paused.Phase, phases(*paused), paused.Message)
	}
	if st.Phase != status.CampaignCompleted || st.Summary.Completed != 4 {
		t.Errorf("after continue: %s %s", st.Phase, phases(st))
	}
}

// TestCampaignPausesAgainOnNewFailures: continuing accepts the failures so
// far; a later batch with new failures pauses again.
func TestCampaignPausesAgainOnNewFailures(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true, "r4": true}}
	env := newCampaignEnv(f)
	var pauses int
	for _, at := range []time.Duration{time.Minute, 2 * time.Minute} {
		env.RegisterDelayedCallback(func() {
			if queryState(t, env).Phase == status.CampaignPaused {
				pauses++
			}
			env.SignalWorkflow(workflow.SignalContinue, workflow.ContinueSignal{})
		}, at)
	}
	env.ExecuteWorkflow(workflow.Campaign, campaignInput(8))
	st := campaignResult(t, env)
	if pauses != 2 || st.Summary.Completed != 6 || st.Summary.Failed != 2 {
		t.Errorf("pauses %d, want 2; %s", pauses, phases(st))
	}
}

func TestCampaignPauseThenSkipRemaining(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true}}
	env := newCampaignEnv(f)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflow.SignalContinue, workflow.ContinueSignal{SkipRemaining: true})
	}, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, campaignInput(6))
	st := campaignResult(t, env)
	if st.Summary.Skipped != 4 || st.Summary.Failed != 1 || st.Summary.Completed != 1 {
		t.Errorf("skip-remaining: %s", phases(st))
	}
}

func TestCampaignPauseThenAbort(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true}}
	env := newCampaignEnv(f)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflow.SignalAbort, nil) }, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, campaignInput(6))
	st := campaignResult(t, env)
	if st.Phase != status.CampaignAborted || st.Summary.Skipped != 4 {
		t.Errorf("abort: %s phase %s", phases(st), st.Phase)
	}
}

// TestCampaignIgnoresDecisionsForAnotherGeneration: a paused run of
// generation 2 ignores an abort and a retry sent for generation 1 (a
// record about an earlier run, delivered late); updated in place to
// generation 3, it ignores a continue for generation 2 and resumes on one
// for generation 3.
func TestCampaignIgnoresDecisionsForAnotherGeneration(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true, "r1": true}}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.Generation = 2
	var afterStale, afterUpdate status.CampaignState
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflow.SignalAbort, workflow.RecordSignal{Record: "approvals/abort.yaml@1", Generation: 1})
		env.SignalWorkflow(workflow.SignalRetryFailed, workflow.RecordSignal{Record: "approvals/retry.yaml@1", Generation: 1})
	}, time.Minute)
	env.RegisterDelayedCallback(func() {
		afterStale = queryState(t, env)
		next := in
		next.Generation = 3
		env.SignalWorkflow(workflow.SignalUpdate, workflow.UpdateSignal{Input: next})
		env.SignalWorkflow(workflow.SignalContinue, workflow.ContinueSignal{Record: "approvals/continue.yaml@2", Generation: 2})
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		afterUpdate = queryState(t, env)
		env.SignalWorkflow(workflow.SignalContinue, workflow.ContinueSignal{Record: "approvals/continue.yaml@3", Generation: 3})
	}, 3*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if afterStale.Phase != status.CampaignPaused || len(afterStale.Applied) != 0 {
		t.Errorf("after decisions for generation 1: phase %s, applied %v; want paused, nothing applied", afterStale.Phase, afterStale.Applied)
	}
	if afterUpdate.Phase != status.CampaignPaused || len(afterUpdate.Applied) != 0 {
		t.Errorf("after a continue for generation 2 sent to generation 3: phase %s, applied %v; want paused, nothing applied",
			afterUpdate.Phase, afterUpdate.Applied)
	}
	if st.Phase != status.CampaignCompletedWithFailures || st.Summary.Completed != 4 || st.Summary.Failed != 2 {
		t.Errorf("after the continue for generation 3: phase %s, %s", st.Phase, phases(st))
	}
	if !slices.Equal(st.Applied, []string{"approvals/continue.yaml@3"}) {
		t.Errorf("applied %v, want only the continue for generation 3", st.Applied)
	}
}

func TestCampaignThresholdAbortAction(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r1": true}}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.FailureAction = "abort"
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if st.Phase != status.CampaignAborted || st.Summary.Skipped != 4 || len(f.started) != 2 {
		t.Errorf("abort action: %s, started %v", phases(st), f.started)
	}
}

func TestCampaignRetryFailed(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{fail: map[string]bool{"r0": true}}
		env := newCampaignEnv(f)
		in := campaignInput(4)
		in.StrictBatches = strict
		in.ThresholdPercent = 100
		in.BatchSize = 1
		in.MaxParallel = 1
		// One start an hour keeps the campaign running for hours.
		in.PullRequestsPerHour, in.Burst = 1, 1
		// Heal r0 and ask for the failed to run again while r1.. still run.
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			f.fail["r0"] = false
			f.mu.Unlock()
			env.SignalWorkflow(workflow.SignalRetryFailed, nil)
		}, 30*time.Minute)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if st.Summary.Completed != 4 || st.Summary.Failed != 0 || st.Phase != status.CampaignCompleted {
			t.Errorf("retry-failed: %s %s", st.Phase, phases(st))
		}
		if st.Units[0].Attempts != 2 {
			t.Errorf("r0 attempts %d, want 2", st.Units[0].Attempts)
		}
		// What both runs of r0 used of the model, and r1's one run.
		if u := st.Units[0].ModelUsage; u == nil || u.Requests != 2 || u.Tokens() != 220 {
			t.Errorf("r0 model usage %+v; want both runs': 2 requests, 220 tokens", u)
		}
		if u := st.Units[1].ModelUsage; u == nil || u.Requests != 1 {
			t.Errorf("r1 model usage %+v; want 1 request", u)
		}
		// The campaign's ledger: every unit's runs together.
		if u := st.Summary.ModelUsage; u == nil || u.Requests != 5 || u.Tokens() != 550 {
			t.Errorf("campaign model usage %+v; want r0's two runs and the others' one: 5 requests, 550 tokens", u)
		}
		// Run again, r0 ran in a sandbox of that attempt's own.
		var r0 []string
		for id, key := range f.unit {
			if key == "r0" {
				r0 = append(r0, id)
			}
		}
		slices.Sort(r0)
		if len(r0) != 2 || !strings.HasPrefix(r0[1], "default-test-workflow-id-r0-retry-1-") {
			t.Errorf("r0's sandboxes %q, want a second one for its retry", r0)
		}
	})
}

func TestCampaignContinuesAsNewAtBatchBoundary(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		env := newCampaignEnv(f)
		in := campaignInput(6)
		in.StrictBatches = strict
		in.UnitsPerRun = 2 // after the first batch
		env.ExecuteWorkflow(workflow.Campaign, in)
		if !env.IsWorkflowCompleted() {
			t.Fatal("not completed")
		}
		err := env.GetWorkflowError()
		if !sdkworkflow.IsContinueAsNewError(err) {
			t.Fatalf("want continue-as-new, got %v", err)
		}
		if len(f.started) != 2 {
			t.Errorf("the first run must stop at the batch boundary: started %v", f.started)
		}
	})
}

// TestCampaignProgressCarriesOver: a run continued as new starts where the
// last one stopped and keeps its results.
func TestCampaignProgressCarriesOver(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.Progress = &workflow.CampaignProgress{Next: 2, Phase: status.CampaignRunning, Runs: 1, Results: map[string]status.UnitResult{
		"r0": {Key: "r0", Phase: status.TaskCompleted, Attempts: 1},
		"r1": {Key: "r1", Phase: status.TaskFailed, Attempts: 1},
	}}
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	// Children of one batch run side by side: their order is not part of
	// the contract, only which units ran.
	slices.Sort(f.started)
	if strings.Join(f.started, ",") != "r2,r3" || st.Summary.Completed != 3 || st.Summary.Failed != 1 {
		t.Errorf("carried over: started %v, %s", f.started, phases(st))
	}
}

func TestCampaignPullRequestBudget(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		env := newCampaignEnv(f)
		in := campaignInput(3)
		in.StrictBatches = strict
		in.PullRequestsPerHour, in.Burst = 1, 1
		start := env.Now()
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if st.Summary.Completed != 3 {
			t.Fatalf("budget: %s", phases(st))
		}
		if took := env.Now().Sub(start); took < 2*time.Hour {
			t.Errorf("3 PR-creating units at 1/hour with burst 1 took %s of workflow time, want >= 2h", took)
		}
	})
}

// TestCampaignPacedByRateLimitOnlyWhenItSetsOne: a campaign of 50
// repositories that sets no rate_limit starts them as fast as its slots
// free up (the forge's own budget paces the agents' writes); with the 60
// an hour, burst 10, that was once every campaign's default, the same
// campaign spends 40 minutes waiting.
func TestCampaignPacedByRateLimitOnlyWhenItSetsOne(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rateLimit string
		min, max  time.Duration
	}{
		{name: "no rate_limit", max: time.Minute},
		{name: "the old default written out", rateLimit: "rate_limit: {pull_requests_per_hour: 60, burst: 10}\n", min: 40 * time.Minute, max: 41 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			b.WriteString("version: 1\nkind: Campaign\nid: c\ntitle: C\ntemplate:\n  execution:\n    deterministic: {image: golang, command: [\"true\"]}\n")
			b.WriteString("max_parallel: 8\n" + tc.rateLimit + "repositories:\n")
			for i := range 50 {
				fmt.Fprintf(&b, "  - url: https://github.com/acme/r%d.git\n", i)
			}
			res, err := (&spec.Loader{}).Load(context.Background(), fstest.MapFS{"c.yaml": {Data: []byte(b.String())}}, ".")
			if err != nil || len(res.Errors) > 0 || len(res.Definitions) != 1 {
				t.Fatalf("load: %v %v", err, res.Errors)
			}
			s, err := workflow.ForDefinition(res.Definitions[0], workflow.Options{})
			if err != nil {
				t.Fatal(err)
			}
			env := newCampaignEnv(&fleet{})
			start := env.Now()
			env.ExecuteWorkflow(workflow.Campaign, *s.Campaign)
			if st := campaignResult(t, env); st.Summary.Completed != 50 {
				t.Fatalf("%s", phases(st))
			}
			if took := env.Now().Sub(start); took < tc.min || took > tc.max {
				t.Errorf("50 repositories took %s of workflow time, want %s to %s", took, tc.min, tc.max)
			}
		})
	}
}

// A transform unit that needs no approval runs as one activity of the
// campaign, in a sandbox named for the campaign's run, the unit and its
// attempt, with no workflow of its own; one that needs approval runs as a
// child Task workflow, which decisions reach, and so does a report's,
// whose body its child's result keeps. Either way the campaign records
// what the agent did, and a unit whose every sandbox was lost fails with
// why.
func TestCampaignRunsUnitsWithoutApprovalInItsOwnHistory(t *testing.T) {
	for _, c := range []struct {
		name     string
		approval bool
		mode     protocol.Mode
		child    bool
	}{
		{"transform", false, protocol.ModeTransform, false},
		{"transform with approval", true, protocol.ModeTransform, true},
		{"report", false, protocol.ModeReport, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fleet{fail: map[string]bool{"r1": true}, lose: map[string]bool{"r2": true}, lost: map[string]bool{"r0": true}}
			env := newCampaignEnv(f)
			in := campaignInput(3)
			in.StrictBatches = false
			in.ThresholdPercent = 100
			in.Template.Manifest.RequireApproval, in.Template.Manifest.Mode = c.approval, c.mode
			env.ExecuteWorkflow(workflow.Campaign, in)
			st := campaignResult(t, env)
			if got := phases(st); got != "r0=completed r1=failed r2=failed" {
				t.Errorf("phases %s", got)
			}
			if st.Summary.PRsCreated != 1 || !strings.Contains(st.Units[2].Error, "6 sandboxes lost before the agent finished") {
				t.Errorf("summary %+v, r2's error %q", st.Summary, st.Units[2].Error)
			}
			if f.cleaned != 3 {
				t.Errorf("%d sandboxes removed, want 3", f.cleaned)
			}
			for _, u := range st.Units {
				if child := u.WorkflowID != ""; child != c.child {
					t.Errorf("%s ran as a child workflow %v (%q), want %v", u.Key, child, u.WorkflowID, c.child)
				}
			}
			if c.child {
				return
			}
			if st.Units[0].SandboxesLost != 1 {
				t.Errorf("r0 lost a sandbox on its way: %+v", st.Units[0])
			}
			ids := slices.Sorted(maps.Keys(f.unit))
			for i, id := range ids {
				if want := fmt.Sprintf("default-test-workflow-id-r%d-", i); !strings.HasPrefix(id, want) {
					t.Errorf("sandbox %s, want it named %s<run>", id, want)
				}
			}
		})
	}
}

// TestCampaignRegeneratesFinishedUnits: the regenerate signal (from
// keep_current or `prs update`) has a running campaign run a finished
// unit again, however it ended; a unit not started yet, or one it does
// not have, is left as it is. The unit keeps the pull request it opened.
func TestCampaignRegeneratesFinishedUnits(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		env := newCampaignEnv(f)
		in := campaignInput(3)
		in.StrictBatches = strict
		in.BatchSize, in.MaxParallel = 1, 1
		// One start an hour keeps the campaign running for hours.
		in.PullRequestsPerHour, in.Burst = 1, 1
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(workflow.SignalRegenerate, workflow.RegenerateSignal{Units: []string{"r0", "r2", "nope", "r0"}})
		}, 30*time.Minute)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if st.Phase != status.CampaignCompleted || st.Summary.Total != 3 || st.Summary.Completed != 3 {
			t.Errorf("after regenerate: %s (%s) %+v", st.Phase, st.Message, st.Summary)
		}
		attempts := map[string]int{}
		for _, u := range st.Units {
			attempts[u.Key] = u.Attempts
			if len(u.PRs) != 1 {
				t.Errorf("%s has pull requests %+v, want its one", u.Key, u.PRs)
			}
		}
		if attempts["r0"] != 2 || attempts["r1"] != 1 || attempts["r2"] != 1 {
			t.Errorf("attempts %v, want r0 run twice and the others once", attempts)
		}
	})
}

// With max_pending_checks, a campaign that opens pull requests starts no
// unit while as many of its open pull requests have checks pending (as
// PendingChecksActivity counts them), counting its units at work, and
// says why it holds; once the count drops it goes on, a unit at a time
// while one pull request of the two allowed still has checks running.
func TestCampaignHoldsWhileChecksArePending(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		var mu sync.Mutex
		var asked []workflow.PendingChecksInput
		env, in := checksCampaign(f, strict, func(in workflow.PendingChecksInput, since time.Duration) int {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, in)
			if since < 3*time.Minute {
				return 2
			}
			return 1
		})
		var held status.CampaignState
		var startedWhileHeld int
		env.RegisterDelayedCallback(func() {
			held = queryState(t, env)
			f.mu.Lock()
			startedWhileHeld = len(f.started)
			f.mu.Unlock()
		}, 90*time.Second)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if startedWhileHeld != 0 || !strings.Contains(held.Message, "holding new pull requests: 2 open have checks running and 0 tasks are at work (max_pending_checks 2)") {
			t.Errorf("after 90 s: %d units started, message %q; want none, holding", startedWhileHeld, held.Message)
		}
		if st.Summary.Completed != 4 || strings.Contains(st.Message, "holding") {
			t.Errorf("the campaign ended %+v %q; want its 4 units completed once the checks ran", st.Summary, st.Message)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(asked) < 4 || asked[0].Source != "default-test-workflow-id" || asked[0].Campaign != "" {
			t.Errorf("asked %+v; want the campaign's own count, once a minute while held", asked)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if !strict && slices.ContainsFunc(f.runs, func(n int) bool { return n != 1 }) {
			t.Errorf("runs of units %v; want one unit at a time while a pull request has checks running", f.runs)
		}
	})
}

// checksCampaign is an environment for a campaign of 4 units that opens
// pull requests with max_pending_checks 2, whose PendingChecksActivity
// answers count (given the time since the start), and its input.
func checksCampaign(f *fleet, strict bool, count func(in workflow.PendingChecksInput, since time.Duration) int) (*testsuite.TestWorkflowEnvironment, workflow.CampaignInput) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	// A campaign held for good fails its test in a day of its time,
	// instead of firing its timers for ever.
	env.SetWorkflowRunTimeout(24 * time.Hour)
	env.RegisterWorkflow(workflow.Campaign)
	start := env.Now()
	env.RegisterActivityWithOptions(func(_ context.Context, in workflow.PendingChecksInput) (int, error) {
		return count(in, env.Now().Sub(start)), nil
	}, sdkactivity.RegisterOptions{Name: workflow.PendingChecksActivity})
	f.register(env)
	registerFollower(env)
	in := campaignInput(4)
	in.StrictBatches = strict
	in.MaxPendingChecks = 2
	in.Template.Manifest.PullRequest = &protocol.PullRequest{BranchPrefix: "auto/", Title: "bump"}
	return env, in
}

// A campaign held by max_pending_checks takes a raised limit (an update
// of its spec in place) while it holds, and goes on.
func TestCampaignHoldTakesARaisedLimit(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		env, in := checksCampaign(f, strict, func(workflow.PendingChecksInput, time.Duration) int { return 2 })
		env.RegisterDelayedCallback(func() {
			next := in
			next.MaxPendingChecks = 10
			env.SignalWorkflow(workflow.SignalUpdate, workflow.UpdateSignal{Input: next})
		}, 5*time.Minute)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if st.Summary.Completed != 4 {
			t.Errorf("the campaign ended %+v %q; want its 4 units completed under the raised limit", st.Summary, st.Message)
		}
	})
}
