package workflow_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func queryTask(t *testing.T, env *testsuite.TestWorkflowEnvironment) status.TaskState {
	t.Helper()
	v, err := env.QueryWorkflow(status.QueryStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st status.TaskState
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestTaskStaleDecisionIgnored: an approval naming a result that has
// since changed (here: the result before a steer) does nothing; one
// naming the current result approves.
func TestTaskStaleDecisionIgnored(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	var first, second string
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			first = queryTask(t, env).ResultDigest
			env.SignalWorkflow(workflow.SignalSteer, workflow.SteerSignal{Prompt: "again", DecisionSignal: workflow.DecisionSignal{ResultDigest: first, Record: "approvals/steer.yaml"}})
		}, time.Minute)
		env.RegisterDelayedCallback(func() {
			st := queryTask(t, env)
			second = st.ResultDigest
			// The same steer, delivered again (a reconciler retrying), and
			// an approval of the old result: both stale.
			env.SignalWorkflow(workflow.SignalSteer, workflow.SteerSignal{Prompt: "again", DecisionSignal: workflow.DecisionSignal{ResultDigest: first, Record: "approvals/steer.yaml"}})
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: first, Record: "approvals/old.yaml"})
		}, 2*time.Minute)
		env.RegisterDelayedCallback(func() {
			st := queryTask(t, env)
			if st.Phase != status.TaskAwaitingApproval || len(st.Ignored) != 2 || !strings.Contains(st.Ignored[1], "approvals/old.yaml") {
				t.Errorf("after stale decisions: phase %s, ignored %q", st.Phase, st.Ignored)
			}
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: second, By: "alice", Record: "approvals/new.yaml"})
		}, 3*time.Minute)
	})
	if first == "" || second == "" || first == second {
		t.Fatalf("digests before and after a steer: %q, %q (want two different ones)", first, second)
	}
	if res.Phase != status.TaskCompleted || res.Steers != 1 {
		t.Errorf("result: phase %s, %d steers; want completed after exactly 1 steer", res.Phase, res.Steers)
	}
	// The records carried out, once each; the stale ones are not.
	if strings.Join(res.Applied, ",") != "approvals/steer.yaml,approvals/new.yaml" {
		t.Errorf("applied records %q, want the steer and the approval of the current result", res.Applied)
	}
}

func TestResultDigest(t *testing.T) {
	r := &protocol.Result{Repositories: []protocol.RepositoryResult{{Name: "svc", Status: "success",
		Diffs: []protocol.FileDiff{{Path: "main.go", Diff: "+x", Additions: 1}}}}}
	same := &protocol.Result{Repositories: []protocol.RepositoryResult{{Name: "svc", Status: "success",
		Diffs: []protocol.FileDiff{{Path: "main.go", Diff: "+x", Additions: 1}}}}, Status: "awaiting_input"}
	other := &protocol.Result{Repositories: []protocol.RepositoryResult{{Name: "svc", Status: "success",
		Diffs: []protocol.FileDiff{{Path: "main.go", Diff: "+y", Additions: 1}}}}}
	d := workflow.ResultDigest(0, r)
	if !strings.HasPrefix(d, "sha256:") || len(d) != len("sha256:")+64 {
		t.Fatalf("digest %q", d)
	}
	if workflow.ResultDigest(0, same) != d {
		t.Error("the same diffs must have the same digest")
	}
	if workflow.ResultDigest(0, other) == d {
		t.Error("other diffs must have another digest")
	}
	if workflow.ResultDigest(1, r) == d {
		t.Error("the same diffs after a steer must have another digest")
	}
}

func TestCampaignSuspendResume(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.Suspend = true
	env.RegisterDelayedCallback(func() {
		st := queryState(t, env)
		if !st.Suspended || len(f.started) != 0 {
			t.Errorf("a campaign started suspended started %v (suspended=%v)", f.started, st.Suspended)
		}
		env.SignalWorkflow(workflow.SignalResume, nil)
	}, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if st.Summary.Completed != 4 || st.Suspended {
		t.Errorf("after resume: %s suspended=%v", phases(st), st.Suspended)
	}
}

// TestCampaignUpdateInPlace: units not yet started take the new spec; a
// new unit is added; a removed unit that never started is dropped.
func TestCampaignUpdateInPlace(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.BatchSize, in.MaxParallel = 1, 1
	in.Suspend = true
	env.RegisterDelayedCallback(func() {
		nu := campaignInput(4)
		nu.Units = slices.Delete(nu.Units, 3, 4) // r3 removed
		nu.Units = append(nu.Units, workflow.Unit{Key: "r9", Repositories: []protocol.Repository{{Name: "r9"}}})
		nu.Template.Manifest.Title = "new title"
		env.SignalWorkflow(workflow.SignalUpdate, workflow.UpdateSignal{Input: nu})
		env.SignalWorkflow(workflow.SignalResume, nil)
	}, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	var keys []string
	for _, u := range st.Units {
		keys = append(keys, u.Key)
	}
	if strings.Join(keys, ",") != "r0,r1,r2,r9" || st.Summary.Completed != 4 {
		t.Errorf("units after update: %v (%s)", keys, phases(st))
	}
	slices.Sort(f.started)
	if strings.Join(f.started, ",") != "r0,r1,r2,r9" {
		t.Errorf("started %v", f.started)
	}
}

// TestCampaignRecordAppliedOnce: the same approval record signalled twice
// (a reconciler re-reading Git) retries the failed units once.
func TestCampaignRecordAppliedOnce(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r1": true}}
	env := newCampaignEnv(f)
	in := campaignInput(4)
	in.ThresholdPercent = 10
	env.RegisterDelayedCallback(func() {
		st := queryState(t, env)
		if st.Phase != status.CampaignPaused {
			t.Errorf("want paused, got %s", st.Phase)
		}
		f.mu.Lock()
		f.fail = nil
		f.mu.Unlock()
		rec := workflow.RecordSignal{Record: "approvals/retry.yaml@abc"}
		env.SignalWorkflow(workflow.SignalRetryFailed, rec)
		env.SignalWorkflow(workflow.SignalRetryFailed, rec)
		env.SignalWorkflow(workflow.SignalContinue, workflow.ContinueSignal{Record: "approvals/continue.yaml@abc"})
	}, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	attempts := map[string]int{}
	for _, u := range st.Units {
		attempts[u.Key] = u.Attempts
	}
	if attempts["r1"] != 2 || st.Summary.Completed != 4 {
		t.Errorf("r1 ran %d times (want 2: once, then one retry), %s", attempts["r1"], phases(st))
	}
	if strings.Join(st.Applied, ",") != "approvals/retry.yaml@abc,approvals/continue.yaml@abc" {
		t.Errorf("applied %v", st.Applied)
	}
}

// Whoever can signal the workflow still cannot decide without knowing the
// result: an approval, steer or reject that names no digest is refused
// and said so; the task goes on waiting for a decision that names it.
func TestDecisionWithoutDigestIsRefused(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		signalAt(env, time.Minute, workflow.SignalApprove, nil)
		signalAt(env, time.Minute, workflow.SignalReject, workflow.DecisionSignal{By: "mallory"})
		signalAt(env, time.Minute, workflow.SignalSteer, workflow.SteerSignal{Prompt: "push something else"})
		env.RegisterDelayedCallback(func() {
			st := queryTask(t, env)
			if st.Phase != status.TaskAwaitingApproval || len(st.Ignored) != 3 {
				t.Errorf("after decisions without a digest: phase %s, ignored %q", st.Phase, st.Ignored)
			}
			for _, note := range st.Ignored {
				if !strings.Contains(note, "without a result digest refused") || !strings.Contains(note, "fleetlift status t") {
					t.Errorf("ignored note %q does not say how to name the result", note)
				}
			}
		}, 2*time.Minute)
		decideAt(t, env, 3*time.Minute, workflow.SignalApprove, approval)
	})
	if res.Phase != status.TaskCompleted || res.Steers != 0 {
		t.Errorf("result: phase %s, %d steers; want completed by the approval that named the result", res.Phase, res.Steers)
	}
	if len(s.steerings) != 1 || s.steerings[0].Action != protocol.ActionApprove {
		t.Errorf("the agent was told %+v; want one approval", s.steerings)
	}
}

// An approval approves one tree: when what the agent reports it pushed is
// another tree, the task fails instead of completing.
func TestPushedTreeMustBeTheApprovedOne(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer, pushedTree: "d670460b4b4aece5915caf5c68d12f560a9fe3e4"}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		decideAt(t, env, time.Minute, workflow.SignalApprove, approval)
	})
	if res.Phase != status.TaskFailed || !strings.Contains(res.Error, "not the approved tree "+scriptTree) {
		t.Errorf("result: phase %s %q; want failed, naming the approved tree", res.Phase, res.Error)
	}
}

// An update in place that brings more units than a page holds comes in
// pieces (workflow.Split): a campaign of one page takes it once every
// piece is there, and runs the units of all of them.
func TestCampaignUpdateInPlaceInPieces(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	in := campaignInput(2)
	in.PageSize = 3
	in.BatchSize, in.MaxParallel = 1, 1
	in.Suspend = true
	var later workflow.UnitsPiece
	env.RegisterDelayedCallback(func() {
		nu := campaignInput(7)
		nu.PageSize = 3
		nu.Generation = 2
		head, pieces := workflow.Split(nu)
		if len(pieces) != 2 {
			t.Fatalf("an update of 7 units in pages of 3 came in %d pieces after its head", len(pieces))
		}
		env.SignalWorkflow(workflow.SignalUpdate, workflow.UpdateSignal{Input: head})
		env.SignalWorkflow(workflow.SignalResume, nil)
		env.SignalWorkflow(workflow.SignalUnits, pieces[0])
		later = pieces[1]
	}, time.Hour)
	env.RegisterDelayedCallback(func() {
		if st := queryState(t, env); len(st.Units) != 2 || st.Phase != status.CampaignRunning {
			t.Errorf("with a piece of the update missing the campaign is %s with %d units; want running with the 2 it had", st.Phase, len(st.Units))
		}
		env.SignalWorkflow(workflow.SignalUnits, later)
	}, time.Hour+5*time.Minute)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	if st.Summary.Completed != 7 || len(f.started) != 7 {
		t.Errorf("after the update: %s, started %v; want r0..r6 completed", phases(st), f.started)
	}
}
