package workflow_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// permits asks the budget in env for a permit as each of asks passes
// (from its start), and records when each was granted, by its index.
func permits(t *testing.T, env *testsuite.TestWorkflowEnvironment, asks []time.Duration) func() map[int]time.Time {
	var mu sync.Mutex
	got := map[int]time.Time{}
	for i, at := range asks {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(workflow.UpdateForgePermit, fmt.Sprint("permit-", i), &testsuite.TestUpdateCallback{
				OnAccept: func() {},
				OnReject: func(err error) { t.Errorf("permit %d refused: %v", i, err) },
				OnComplete: func(v any, err error) {
					if err != nil {
						t.Errorf("permit %d: %v", i, err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					got[i] = v.(workflow.ForgePermit).At
				},
			}, workflow.ForgePermitRequest{Caller: "test"})
		}, at)
	}
	return func() map[int]time.Time {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// A permit is granted once every window has room: with 3 a minute and
// 5 in ten minutes, seven asked at once go 3 at the start, 2 a minute
// later and the last 2 ten minutes after the first; the budget then ends,
// idle.
func TestForgeBudgetGrantsWithinEveryWindow(t *testing.T) {
	start := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	asks := make([]time.Duration, 7)
	for i := range asks {
		asks[i] = time.Duration(i) * time.Millisecond
	}
	got := permits(t, env, asks)
	env.ExecuteWorkflow(workflow.ForgeBudget, workflow.ForgeBudgetInput{Key: "github.com/bot",
		Limits: []workflow.ForgeLimit{{Count: 3, Per: time.Minute}, {Count: 5, Per: 10 * time.Minute}}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the budget ended with %v; want it to end idle", err)
	}
	want := []time.Duration{0, 0, 0, time.Minute, time.Minute, 10 * time.Minute, 10 * time.Minute}
	g := got()
	for i, w := range want {
		at, ok := g[i]
		if !ok {
			t.Errorf("permit %d never granted", i)
			continue
		}
		// A grant is at the first workflow task at or after its time.
		if d := at.Sub(start); d < w || d > w+time.Second {
			t.Errorf("permit %d granted at +%s; want +%s", i, d, w)
		}
	}
}

// A hold (the forge answered someone with a rate limit) holds every
// permit asked after it until its end, and the spacing applies.
func TestForgeBudgetHoldsEveryPermit(t *testing.T) {
	start := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	got := permits(t, env, []time.Duration{0, 10 * time.Second, 11 * time.Second, 12 * time.Second})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflow.SignalForgeHold, workflow.ForgeHold{Until: start.Add(5 * time.Minute), Reason: "403 secondary rate limit"})
	}, 5*time.Second)
	env.ExecuteWorkflow(workflow.ForgeBudget, workflow.ForgeBudgetInput{Key: "github.com/bot",
		Limits: []workflow.ForgeLimit{{Count: 80, Per: time.Minute}}, MinInterval: 2 * time.Second})
	g := got()
	if d := g[0].Sub(start); d > time.Second {
		t.Errorf("the permit before the hold: +%s; want at once", d)
	}
	for i, w := range []time.Duration{5 * time.Minute, 5*time.Minute + 2*time.Second, 5*time.Minute + 4*time.Second} {
		if d := g[i+1].Sub(start); d < w || d > w+time.Second {
			t.Errorf("permit %d after the hold: +%s; want +%s", i+1, d, w)
		}
	}
}

// After GrantsPerRun grants the budget continues as new, with what its
// windows still count.
func TestForgeBudgetContinuesAsNew(t *testing.T) {
	start := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	got := permits(t, env, []time.Duration{0, time.Millisecond})
	env.ExecuteWorkflow(workflow.ForgeBudget, workflow.ForgeBudgetInput{Key: "github.com/bot",
		Limits: []workflow.ForgeLimit{{Count: 80, Per: time.Minute}}, GrantsPerRun: 2})
	var can *sdkworkflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("the budget ended with %v; want it to continue as new", err)
	}
	if len(got()) != 2 {
		t.Errorf("granted %d permits before continuing as new; want 2", len(got()))
	}
}

// A budget of tokens a minute (a model account's): each call's permit
// counts one, and what it then spent counts from when the budget took it
// in. With 1,000 a minute, two calls and 998 tokens spent fill the
// minute: the next is granted once the window holds less, when the
// first call's permit leaves it; the second, asked before the spend
// came, went at once.
func TestForgeBudgetCountsWhatEachRequestSpent(t *testing.T) {
	start := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(start)
	got := permits(t, env, []time.Duration{0, time.Second, 20 * time.Second})
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(workflow.SignalForgeSpend, workflow.ForgeSpend{Count: 998})
	}, 10*time.Second)
	env.ExecuteWorkflow(workflow.ForgeBudget, workflow.ForgeBudgetInput{Key: "api.anthropic.com/org",
		Limits: []workflow.ForgeLimit{{Count: 1000, Per: time.Minute}}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("the budget ended with %v; want it to end idle", err)
	}
	g := got()
	for i, w := range []time.Duration{0, time.Second, time.Minute} {
		if d := g[i].Sub(start); d < w || d > w+time.Second {
			t.Errorf("permit %d granted at +%s; want +%s", i, d, w)
		}
	}
}
