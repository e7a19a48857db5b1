package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// startInPieces starts campaign in as fleetlift's starters do
// (workflow.Split): the start carries its first page's units, and each
// other page's reach it in a signal just after.
func startInPieces(t *testing.T, env *testsuite.TestWorkflowEnvironment, in workflow.CampaignInput) {
	t.Helper()
	head, pieces := workflow.Split(in)
	if n := len(head.Units); n > in.PageSize {
		t.Fatalf("the start carries %d units; a page holds %d", n, in.PageSize)
	}
	env.RegisterDelayedCallback(func() {
		for _, pc := range pieces {
			env.SignalWorkflow(workflow.SignalUnits, pc)
		}
	}, time.Millisecond)
	env.ExecuteWorkflow(workflow.Campaign, head)
}

// merged is the campaign's state as the readers show it: its pages'
// units and counts (status.MergePages), each page as it last ended.
func merged(t *testing.T, f *fleet, st status.CampaignState) status.CampaignState {
	t.Helper()
	var pages []status.CampaignState
	for i, ref := range st.Pages {
		res, ok := f.pages[ref.WorkflowID]
		if !ok {
			t.Fatalf("page %d (%q) never ended", i+1, ref.WorkflowID)
		}
		pages = append(pages, res.State)
	}
	return status.MergePages(st, pages)
}

// A campaign of more units than a page holds runs them a page at a time:
// what it returns lists its pages, not its units, and the pages hold
// every unit, each run once, in the spec's order.
func TestCampaignRunsInPages(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		env := newCampaignEnv(f)
		in := campaignInput(7)
		in.StrictBatches = strict
		in.PageSize = 3
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if len(st.Units) != 0 || len(st.Pages) != 3 {
			t.Fatalf("the campaign's own state: %d units, %d pages; want none and 3", len(st.Units), len(st.Pages))
		}
		for i, ref := range st.Pages {
			want := fmt.Sprintf("/page-%d@", i+1)
			if !ref.Done || !strings.Contains(ref.WorkflowID, want) || ref.Units != min(3, 7-3*i) {
				t.Errorf("page %d: %+v; want done, id with %q, %d units", i+1, ref, want, min(3, 7-3*i))
			}
		}
		if st.Phase != status.CampaignCompleted || st.Summary.Completed != 7 || st.Summary.Total != 7 || st.Summary.PRsCreated != 7 {
			t.Errorf("campaign: %s %+v", st.Phase, st.Summary)
		}
		all := merged(t, f, st)
		if got := phases(all); got != "r0=completed r1=completed r2=completed r3=completed r4=completed r5=completed r6=completed" {
			t.Errorf("units: %s", got)
		}
		started := slices.Clone(f.started)
		slices.Sort(started)
		if want := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6"}; !slices.Equal(started, want) {
			t.Errorf("units started: %v; want each once", f.started)
		}
		// What the campaign carries does not grow with its units: a page
		// is a reference.
		b, _ := json.Marshal(st)
		if strings.Contains(string(b), `"r4"`) {
			t.Errorf("the campaign's result names its units: %s", b)
		}
	})
}

// Units of every page are named after the campaign, as they would be in
// a campaign of one page: a task's id is <campaign workflow>/<key>@<run>.
func TestCampaignPagesNameTasksAfterTheCampaign(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.PageSize = 2
	in.Template.Manifest.RequireApproval = true
	in.Template.ApprovalTimeout = time.Minute
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	for _, u := range merged(t, f, st).Units {
		if !strings.HasPrefix(u.WorkflowID, "default-test-workflow-id/"+u.Key+"@") {
			t.Errorf("unit %s ran as %q; want it named after the campaign", u.Key, u.WorkflowID)
		}
	}
}

// The failure threshold counts the units of every page: failures in the
// first page pause the campaign (its query says so) before the second
// starts, continue goes on, and the second page's units do not pause it
// again for the failures already continued past.
func TestCampaignPagesPauseAtTheThreshold(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true, "r1": true}}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.PageSize = 2
	paused := continueAfter(t, env, time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if paused.Phase != status.CampaignPaused || !strings.Contains(paused.Message, "2 of 2 finished units failed, over the 30% threshold") {
		t.Errorf("after the first page the campaign must be paused: %s %q", paused.Phase, paused.Message)
	}
	if slices.Contains(f.started, "r2") && slices.Index(f.started, "r2") < 2 {
		t.Errorf("the second page started before the pause: %v", f.started)
	}
	if st.Phase != status.CampaignCompletedWithFailures || st.Summary.Completed != 4 || st.Summary.Failed != 2 {
		t.Errorf("after continue: %s %+v", st.Phase, st.Summary)
	}
}

// An abort stops the campaign: the pages not started yet mark their
// units skipped, and the campaign ends aborted. (It comes while the
// second page's first unit waits for the pull-request budget, which
// starts it once it has waited, as a campaign of one page does.)
func TestCampaignPagesAbort(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.PageSize = 2
	in.BatchSize, in.MaxParallel = 1, 1
	in.PullRequestsPerHour, in.Burst = 1, 1
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflow.SignalAbort, workflow.RecordSignal{})
	}, 90*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	all := merged(t, f, st)
	if st.Phase != status.CampaignAborted || st.Summary.Completed != 3 || st.Summary.Skipped != 3 {
		t.Errorf("abort while r2 waits: %s %+v (%s)", st.Phase, st.Summary, phases(all))
	}
	if got := phases(all); got != "r0=completed r1=completed r2=completed r3=skipped r4=skipped r5=skipped" {
		t.Errorf("units: %s", got)
	}
}

// retry-failed runs again the failed units of pages that already ended.
func TestCampaignPagesRetryFailed(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true}}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.PageSize = 2
	in.ThresholdPercent = 100
	in.BatchSize, in.MaxParallel = 1, 1
	in.PullRequestsPerHour, in.Burst = 1, 1
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		f.fail["r0"] = false
		f.mu.Unlock()
		env.SignalWorkflow(workflow.SignalRetryFailed, workflow.RecordSignal{})
	}, 150*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	all := merged(t, f, st)
	if st.Phase != status.CampaignCompleted || st.Summary.Completed != 4 || st.Summary.Failed != 0 {
		t.Errorf("retry-failed: %s %+v (%s)", st.Phase, st.Summary, phases(all))
	}
	if all.Units[0].Attempts != 2 || !strings.HasSuffix(st.Pages[0].WorkflowID, "/run-2") {
		t.Errorf("r0: %d attempts, page 1 %q; want 2, and the page's second run", all.Units[0].Attempts, st.Pages[0].WorkflowID)
	}
}

// While a page works, the campaign's query lists where each page is, and
// the page's own query its units.
func TestCampaignPagesQuery(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(5)
	in.PageSize = 2
	in.BatchSize, in.MaxParallel = 1, 1
	in.PullRequestsPerHour, in.Burst = 1, 1
	var mid status.CampaignState
	env.RegisterDelayedCallback(func() { mid = queryState(t, env) }, 150*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	campaignResult(t, env)
	if len(mid.Units) != 0 || len(mid.Pages) != 3 {
		t.Fatalf("mid-run: %d units, %d pages", len(mid.Units), len(mid.Pages))
	}
	if !mid.Pages[0].Done || mid.Pages[1].Done || mid.Pages[1].WorkflowID == "" || mid.Pages[2].WorkflowID != "" {
		t.Errorf("mid-run pages: %+v; want the first done, the second at work, the third not started", mid.Pages)
	}
	if mid.Summary.Total != 5 || mid.Summary.Completed != 2 {
		t.Errorf("mid-run counts: %+v; want 5 in all, the first page's 2 completed", mid.Summary)
	}
}

// The threshold is the campaign's share of failed units, not a page's:
// one failure in a page of two is half that page but a quarter of the
// units finished, under the threshold of 30%.
func TestCampaignPagesThresholdCountsEveryPage(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r2": true}}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.PageSize = 2
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if st.Phase != status.CampaignCompletedWithFailures || st.Summary.Completed != 5 || st.Summary.Failed != 1 {
		t.Errorf("one failure in six: %s %+v %q", st.Phase, st.Summary, st.Message)
	}
}

// A spec taken in place reaches the pages to come: a unit it removes
// before it started never runs, one it adds runs in a page after the
// others, and the units that ran stay. (It comes while the second page
// waits for the pull-request budget to start r3, which it has taken.)
func TestCampaignPagesTakeAnUpdate(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(5)
	in.PageSize = 2
	in.BatchSize, in.MaxParallel = 1, 1
	in.PullRequestsPerHour, in.Burst = 1, 1
	env.RegisterDelayedCallback(func() {
		next := campaignInput(6)
		next.PageSize = 2
		next.BatchSize, next.MaxParallel = 1, 1
		next.PullRequestsPerHour, next.Burst = 1, 1
		// Without r0 (it ran) and r4 (in the page not started yet).
		next.Units = slices.DeleteFunc(next.Units, func(u workflow.Unit) bool { return u.Key == "r0" || u.Key == "r4" })
		// As UpdateInPlace sends it: the update carries the first
		// page's units, and a signal each the others'.
		next.Generation = 2
		head, pieces := workflow.Split(next)
		if len(head.Units) != 2 || len(pieces) != 1 {
			t.Errorf("the update's head holds %d units, %d pieces follow; want 2 and 1", len(head.Units), len(pieces))
		}
		env.SignalWorkflow(workflow.SignalUpdate, workflow.UpdateSignal{Input: head})
		for _, pc := range pieces {
			env.SignalWorkflow(workflow.SignalUnits, pc)
		}
	}, 150*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	all := merged(t, f, st)
	if got := phases(all); got != "r0=completed r1=completed r2=completed r3=completed r5=completed" {
		t.Errorf("units after the update: %s (started %v)", got, f.started)
	}
	if slices.Contains(f.started, "r4") {
		t.Errorf("r4, removed before it started, ran: %v", f.started)
	}
	if st.Summary.Total != 5 || st.Summary.Completed != 5 {
		t.Errorf("counts: %+v", st.Summary)
	}
}

// fleetlift retry on a paged campaign that ended starts it again with
// its last run's pages (Previous): each new page reads what its units did
// in the page before it, runs only the failed ones again, and the merged
// state shows every unit, the ones that passed as they were.
func TestCampaignPagesStartAgainFromTheirPages(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true, "r3": true}}
	env := newCampaignEnv(f)
	in := campaignInput(5)
	in.PageSize = 2
	in.ThresholdPercent = 100
	env.ExecuteWorkflow(workflow.Campaign, in)
	first := campaignResult(t, env)
	if first.Summary.Failed != 2 || len(first.Pages) != 3 {
		t.Fatalf("first run: %+v, %d pages; want 2 failed in 3 pages", first.Summary, len(first.Pages))
	}
	before := map[string]status.CampaignState{}
	for _, ref := range first.Pages {
		before[ref.WorkflowID] = f.pages[ref.WorkflowID].State
	}

	g := &fleet{}
	env = newCampaignEnv(g)
	var a *activity.Activities
	var read []string
	env.OnActivity(a.ReadPage, mock.Anything, mock.Anything).Return(func(_ context.Context, id string) (status.CampaignState, error) {
		read = append(read, id)
		st, ok := before[id]
		if !ok {
			return status.CampaignState{}, fmt.Errorf("no page %q", id)
		}
		return st, nil
	})
	again := campaignInput(5)
	again.PageSize = 2
	again.ThresholdPercent = 100
	again.Previous = first.Pages
	startInPieces(t, env, again)
	st := campaignResult(t, env)
	all := merged(t, g, st)
	if st.Phase != status.CampaignCompleted || st.Summary.Completed != 5 || st.Summary.Failed != 0 || st.Summary.Total != 5 {
		t.Errorf("started again: %s %+v (%s)", st.Phase, st.Summary, phases(all))
	}
	if got := phases(all); got != "r0=completed r1=completed r2=completed r3=completed r4=completed" {
		t.Errorf("units: %s", got)
	}
	started := slices.Clone(g.started)
	slices.Sort(started)
	if want := []string{"r0", "r3"}; !slices.Equal(started, want) {
		t.Errorf("units started again: %v; want only the failed ones %v", g.started, want)
	}
	if len(read) != 3 {
		t.Errorf("pages read: %v; want each of the 3 of the run before", read)
	}
	if all.Units[0].Attempts != 2 || all.Units[1].Attempts != 1 {
		t.Errorf("attempts: r0 %d, r1 %d; want 2 and 1", all.Units[0].Attempts, all.Units[1].Attempts)
	}
}

// max_cost_per_campaign counts every page: the second page starts from
// what the first cost, pauses the campaign once the two together reach
// the budget, and continue runs the rest; the campaign's counts hold
// every page's cost.
func TestCampaignPagesCountTheirCostTogether(t *testing.T) {
	f := &fleet{cost: 1.25}
	env := newCampaignEnv(f)
	in := campaignInput(6)
	in.PageSize = 2
	in.MaxCostUSD = 3
	paused := continueAfter(t, env, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if paused.Phase != status.CampaignPaused || !strings.Contains(paused.Message, "the campaign's model calls cost $5.00, reaching max_cost_per_campaign $3.00") {
		t.Errorf("after the second page the campaign must be paused at its budget: %s %q", paused.Phase, paused.Message)
	}
	if st.Phase != status.CampaignCompleted || st.Summary.Completed != 6 {
		t.Errorf("after continue: %s %+v", st.Phase, st.Summary)
	}
	if u := st.Summary.ModelUsage; u == nil || u.CostUSD != 7.5 || u.Requests != 6 {
		t.Errorf("the campaign's cost %+v; want every page's: $7.50 of 6 calls", u)
	}
	if u := merged(t, f, st).Summary.ModelUsage; u == nil || u.CostUSD != 7.5 {
		t.Errorf("the merged pages' cost %+v; want $7.50", u)
	}
}

// A running campaign in pages makes a change again (keep_current, a
// reopen) by running the page that held the unit again, with only that
// unit, or has the page at work make it again; a unit that failed is
// not run again with it.
func TestCampaignPagesRegenerate(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r1": true}}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.PageSize = 2
	in.ThresholdPercent = 100
	in.BatchSize, in.MaxParallel = 1, 1
	in.PullRequestsPerHour, in.Burst = 1, 1
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflow.SignalRegenerate, workflow.RegenerateSignal{Units: []string{"r0", "r3"}})
	}, 150*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	all := merged(t, f, st)
	if got := phases(all); got != "r0=completed r1=failed r2=completed r3=completed" {
		t.Errorf("units: %s", got)
	}
	if all.Units[0].Attempts != 2 || all.Units[1].Attempts != 1 || !strings.HasSuffix(st.Pages[0].WorkflowID, "/run-2") {
		t.Errorf("attempts r0 %d, r1 %d, page 1 %q; want r0 made again in the page's second run, r1 left failed",
			all.Units[0].Attempts, all.Units[1].Attempts, st.Pages[0].WorkflowID)
	}
	if all.Units[3].Attempts != 2 || strings.HasSuffix(st.Pages[1].WorkflowID, "/run-2") {
		t.Errorf("r3 ran %d times, page 2 %q; want twice, in the page at work when asked (it ran it again itself)",
			all.Units[3].Attempts, st.Pages[1].WorkflowID)
	}
}

// A campaign in pages that ended and starts again to make some changes
// anew (Regenerate) runs only those units in their pages, and leaves
// the failed ones failed.
func TestCampaignPagesStartAgainToRegenerate(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r0": true}}
	env := newCampaignEnv(f)
	in := campaignInput(5)
	in.PageSize = 2
	in.ThresholdPercent = 100
	env.ExecuteWorkflow(workflow.Campaign, in)
	first := campaignResult(t, env)
	before := map[string]status.CampaignState{}
	for _, ref := range first.Pages {
		before[ref.WorkflowID] = f.pages[ref.WorkflowID].State
	}
	g := &fleet{}
	env = newCampaignEnv(g)
	var a *activity.Activities
	env.OnActivity(a.ReadPage, mock.Anything, mock.Anything).Return(func(_ context.Context, id string) (status.CampaignState, error) {
		return before[id], nil
	})
	again := campaignInput(5)
	again.PageSize = 2
	again.ThresholdPercent = 100
	again.Previous = first.Pages
	again.Regenerate = []string{"r3"}
	startInPieces(t, env, again)
	st := campaignResult(t, env)
	all := merged(t, g, st)
	if !slices.Equal(g.started, []string{"r3"}) {
		t.Errorf("units started again: %v; want only r3", g.started)
	}
	if got := phases(all); got != "r0=failed r1=completed r2=completed r3=completed r4=completed" {
		t.Errorf("units: %s", got)
	}
}

// A campaign's start carries its first page's units and the others
// arrive in signals (workflow.Split): it runs every unit, each once, in
// the spec's order, and nothing it was handed holds more than a page.
func TestCampaignTakesItsUnitsAPageAtATime(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{}
		env := newCampaignEnv(f)
		in := campaignInput(8)
		in.StrictBatches = strict
		in.PageSize = 3
		_, pieces := workflow.Split(in)
		for _, pc := range pieces {
			if len(pc.Units) > 3 {
				t.Errorf("piece %d holds %d units; a page holds 3", pc.Index, len(pc.Units))
			}
		}
		startInPieces(t, env, in)
		st := campaignResult(t, env)
		if st.Phase != status.CampaignCompleted || st.Summary.Completed != 8 || st.Summary.Total != 8 || len(st.Pages) != 3 {
			t.Fatalf("campaign: %s %+v in %d pages; want 8 completed in 3", st.Phase, st.Summary, len(st.Pages))
		}
		if got := phases(merged(t, f, st)); got != "r0=completed r1=completed r2=completed r3=completed r4=completed r5=completed r6=completed r7=completed" {
			t.Errorf("units: %s", got)
		}
		if len(f.started) != 8 {
			t.Errorf("units started: %v; want each of 8 once", f.started)
		}
	})
}

// missingLastPage is a campaign of 8 units in pages of 3 whose starter
// stopped after it had sent the second page: to start with head; pieces
// are the pages after the first.
func missingLastPage() (*fleet, *testsuite.TestWorkflowEnvironment, workflow.CampaignInput, []workflow.UnitsPiece) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(8)
	in.PageSize = 3
	head, pieces := workflow.Split(in)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflow.SignalUnits, pieces[0]) }, time.Millisecond)
	return f, env, head, pieces
}

// Pages of units that never arrive (the starter stopped between its
// start and its signals) do not wedge the campaign: it runs the units it
// holds, waits for the rest a while, then fails, naming the pages it
// never got.
func TestCampaignMissingPagesOfUnitsFails(t *testing.T) {
	f, env, head, _ := missingLastPage()
	var waiting status.CampaignState
	env.RegisterDelayedCallback(func() { waiting = queryState(t, env) }, 5*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, head)
	if waiting.Phase != status.CampaignRunning || waiting.Message != "waiting for pages 3 to 3 of its units from what started it" {
		t.Errorf("while it waits: %s %q", waiting.Phase, waiting.Message)
	}
	st := campaignResult(t, env)
	if st.Phase != status.CampaignFailed || !strings.Contains(st.Message, "pages 3 to 3 of its 3 pages of units never reached it") {
		t.Errorf("campaign: %s %q; want failed, naming page 3", st.Phase, st.Message)
	}
	if st.Summary.Completed != 6 || len(f.started) != 6 {
		t.Errorf("counts %+v, started %v; want the 6 units it held completed", st.Summary, f.started)
	}
}

// A starter that goes on with a run (`fleetlift run` again) sends it
// every page of units after the first, as its start announced them: the
// run takes the one it lacks, those it has are not taken twice, and
// each unit runs once.
func TestCampaignTakesItsPagesSentAgainOnce(t *testing.T) {
	f, env, head, pieces := missingLastPage()
	env.RegisterDelayedCallback(func() {
		for range 2 {
			for _, pc := range pieces {
				env.SignalWorkflow(workflow.SignalUnits, pc)
			}
		}
	}, 2*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, head)
	st := campaignResult(t, env)
	if st.Phase != status.CampaignCompleted || st.Summary.Completed != 8 || len(st.Pages) != 3 {
		t.Errorf("campaign: %s %q, %+v, %d pages; want completed, 8 units in 3 pages", st.Phase, st.Message, st.Summary, len(st.Pages))
	}
	started := slices.Clone(f.started)
	slices.Sort(started)
	if want := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}; !slices.Equal(started, want) {
		t.Errorf("units started: %v; want each once", f.started)
	}
}

// A campaign waiting for a page of units its starter never sent says
// which (AwaitingPieces), and takes it sent again: from a starter that
// split the same input, not one whose units changed since the start.
func TestCampaignTakesAMissingPageSentAgain(t *testing.T) {
	f, env, head, pieces := missingLastPage()
	// Another spec's third page: the repositories changed since.
	other := campaignInput(9)
	other.PageSize = 3
	_, otherPieces := workflow.Split(other)
	var waiting, refused status.CampaignState
	env.RegisterDelayedCallback(func() {
		waiting = queryState(t, env)
		env.SignalWorkflow(workflow.SignalUnits, otherPieces[1])
	}, 2*time.Minute)
	env.RegisterDelayedCallback(func() {
		refused = queryState(t, env)
		env.SignalWorkflow(workflow.SignalUnits, pieces[1])
	}, 3*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, head)
	if waiting.AwaitingPieces != 2 {
		t.Errorf("while it waits, it awaits piece %d; want 2 (page 3)", waiting.AwaitingPieces)
	}
	if refused.AwaitingPieces != 2 {
		t.Errorf("after a page of other units, it awaits piece %d; want still 2", refused.AwaitingPieces)
	}
	st := campaignResult(t, env)
	if st.Phase != status.CampaignCompleted || st.AwaitingPieces != 0 {
		t.Errorf("campaign: %s %q, awaiting %d; want completed", st.Phase, st.Message, st.AwaitingPieces)
	}
	if st.Summary.Completed != 8 || len(f.started) != 8 {
		t.Errorf("counts %+v, started %v; want its 8 units, none of the other spec's", st.Summary, f.started)
	}
}

// Split and Join are inverse: a retry's pages of the run before and the
// units to make anew go out with their page and come back whole.
func TestSplitAndJoinAreInverse(t *testing.T) {
	in := campaignInput(7)
	in.PageSize = 2
	in.Generation = 3
	in.Previous = []status.PageRef{{WorkflowID: "p1", Units: 3}, {WorkflowID: "p2", Units: 1}}
	in.Regenerate = []string{"r1", "r5"}
	head, pieces := workflow.Split(in)
	if head.Pieces != 4 || len(head.Units) != 3 || len(head.Previous) != 1 || head.Previous[0].WorkflowID != "p1" || !slices.Equal(head.Regenerate, []string{"r1"}) {
		t.Errorf("head: %d pieces, %d units, previous %v, regenerate %v", head.Pieces, len(head.Units), head.Previous, head.Regenerate)
	}
	if len(pieces) != 3 || pieces[0].Previous != "p2" || len(pieces[0].Units) != 1 || pieces[1].Previous != "" || !slices.Equal(pieces[1].Regenerate, []string{"r5"}) {
		t.Errorf("pieces: %+v", pieces)
	}
	whole, err := workflow.Join(head, pieces)
	if err != nil {
		t.Fatal(err)
	}
	in.Pieces = 0
	a, _ := json.Marshal(in)
	b, _ := json.Marshal(whole)
	if string(a) != string(b) {
		t.Errorf("joined:\n%s\nwant:\n%s", b, a)
	}
	if _, err := workflow.Join(head, pieces[:2]); err == nil || !strings.Contains(err.Error(), "3 of its 4 pages") {
		t.Errorf("joined without the last piece: %v", err)
	}
}
