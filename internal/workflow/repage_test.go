package workflow_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// grow sends the campaign in env, once d of its time has passed, a spec
// of n units in place, as UpdateInPlace does (workflow.Split): the
// update carries the first page's units and a signal each the others'.
func grow(t *testing.T, env *testsuite.TestWorkflowEnvironment, d time.Duration, n int, like func(*workflow.CampaignInput)) {
	env.RegisterDelayedCallback(func() {
		next := campaignInput(n)
		like(&next)
		next.Generation = 2
		head, pieces := workflow.Split(next)
		if len(pieces) == 0 {
			t.Errorf("a spec of %d units in pages of %d came whole", n, next.PageSize)
		}
		env.SignalWorkflow(workflow.SignalUpdate, workflow.UpdateSignal{Input: head})
		for _, pc := range pieces {
			env.SignalWorkflow(workflow.SignalUnits, pc)
		}
	}, d)
}

// pilot sets a campaign's input as the tests of a pilot grown past its
// page have it: pages of four, one unit at a time in batches of batch,
// no failure threshold, and one pull request an hour, so that the pilot
// is under way when the spec grows.
func pilot(strict bool, batch int) func(*workflow.CampaignInput) {
	return func(in *workflow.CampaignInput) {
		in.StrictBatches = strict
		in.PageSize = 4
		in.BatchSize, in.MaxParallel = batch, 1
		in.ThresholdPercent = 100
		in.PullRequestsPerHour, in.Burst = 1, 1
	}
}

// A campaign started as one page (a pilot of four repositories) and
// grown in place to ten, past its page of four, goes on in pages: what
// it carries and returns stays the size of a page, the units that ran
// before are neither run again nor forgotten (r1's failure included),
// and every new unit runs once.
func TestCampaignGrownPastAPageGoesOnInPages(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{fail: map[string]bool{"r1": true}}
		env := newCampaignEnv(f)
		like := pilot(strict, 1)
		in := campaignInput(4)
		like(&in)
		grow(t, env, 150*time.Minute, 10, like)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if len(st.Units) != 0 || len(st.Pages) != 3 {
			t.Fatalf("the campaign's own state: %d units, %d pages; want none and 3 (4, 4 and 2 units)", len(st.Units), len(st.Pages))
		}
		for i, want := range []int{4, 4, 2} {
			if ref := st.Pages[i]; ref.Units != want || !ref.Done {
				t.Errorf("page %d: %+v; want %d units, done", i+1, ref, want)
			}
		}
		all := merged(t, f, st)
		want := "r0=completed r1=failed r2=completed r3=completed r4=completed r5=completed r6=completed r7=completed r8=completed r9=completed"
		if got := phases(all); got != want {
			t.Errorf("units: %s\nwant   %s", got, want)
		}
		started := slices.Clone(f.started)
		slices.Sort(started)
		if want := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7", "r8", "r9"}; !slices.Equal(started, want) {
			t.Errorf("units started: %v; want each once", f.started)
		}
		if s := st.Summary; s.Total != 10 || s.Completed != 9 || s.Failed != 1 || s.PRsCreated != 9 {
			t.Errorf("counts: %+v", s)
		}
		if st.Phase != status.CampaignCompletedWithFailures {
			t.Errorf("phase %s (%s)", st.Phase, st.Message)
		}
		b, _ := json.Marshal(st)
		if strings.Contains(string(b), `"r7"`) {
			t.Errorf("the campaign's result names its units: %s", b)
		}
	})
}

// A campaign that grows past a page while suspended goes on in pages
// and waits, suspended: a spec taken then and a retry-failed keep what
// the units of its first page did, and drop a unit of that page the new
// spec removed before it was taken. (In strict batches, the suspension
// came in the middle of the batch of r2 and r3: r3 was taken, and runs
// once the campaign is resumed, as a batch's units do.)
func TestCampaignGrownWhileSuspendedKeepsWhatRan(t *testing.T) {
	forEachMode(t, func(t *testing.T, strict bool) {
		f := &fleet{fail: map[string]bool{"r1": true}}
		env := newCampaignEnv(f)
		batch := 1
		if strict {
			batch = 2
		}
		like := pilot(strict, batch)
		in := campaignInput(4)
		like(&in)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflow.SignalSuspend, nil) }, 90*time.Minute)
		grow(t, env, 100*time.Minute, 10, like)
		env.RegisterDelayedCallback(func() {
			f.mu.Lock()
			f.fail["r1"] = false
			f.mu.Unlock()
		}, 125*time.Minute)
		env.RegisterDelayedCallback(func() {
			// Without r3 and r8.
			next := campaignInput(10)
			like(&next)
			next.Generation = 3
			next.Units = slices.DeleteFunc(next.Units, func(u workflow.Unit) bool { return u.Key == "r3" || u.Key == "r8" })
			head, pieces := workflow.Split(next)
			env.SignalWorkflow(workflow.SignalUpdate, workflow.UpdateSignal{Input: head})
			for _, pc := range pieces {
				env.SignalWorkflow(workflow.SignalUnits, pc)
			}
			env.SignalWorkflow(workflow.SignalRetryFailed, workflow.RecordSignal{})
		}, 130*time.Minute)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(workflow.SignalResume, nil) }, 140*time.Minute)
		env.ExecuteWorkflow(workflow.Campaign, in)
		st := campaignResult(t, env)
		if len(st.Units) != 0 || len(st.Pages) == 0 {
			t.Fatalf("the campaign's own state: %d units, %d pages; want pages", len(st.Units), len(st.Pages))
		}
		all := merged(t, f, st)
		want, r3 := "r0=completed r1=completed r2=completed r4=completed r5=completed r6=completed r7=completed r9=completed", 0
		if strict {
			want, r3 = "r0=completed r1=completed r2=completed r3=completed r4=completed r5=completed r6=completed r7=completed r9=completed", 1
		}
		if got := phases(all); got != want {
			t.Errorf("units: %s\nwant   %s", got, want)
		}
		counts := map[string]int{}
		for _, k := range f.started {
			counts[k]++
		}
		if counts["r0"] != 1 || counts["r1"] != 2 || counts["r3"] != r3 || counts["r8"] != 0 {
			t.Errorf("units started: %v; want r0 once, r1 twice (retried), r3 %d times, r8 never", f.started, r3)
		}
	})
}
