package workflow_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// loseAt loses the sandbox at the waits listed (counted from 0).
func loseAt(waits ...int) func(int) bool {
	return func(n int) bool {
		for _, w := range waits {
			if w == n {
				return true
			}
		}
		return false
	}
}

// An agent killed while it works (its sandbox lost) is not the work
// failing: the task provisions another sandbox, runs the work again there
// and finishes by itself.
func TestKilledAgentsTaskIsProvisionedAgainAndFinishes(t *testing.T) {
	s := &agentScript{first: protocol.PhaseComplete, lose: loseAt(0)}
	in := taskInput()
	in.Manifest.RequireApproval = false
	res, _ := runTask(t, s, in, nil)
	if res.Phase != status.TaskCompleted || res.Repositories[0].PullRequest == nil {
		t.Fatalf("result %+v; want completed with its pull request", res)
	}
	if len(s.sandboxes) != 2 || s.sandboxes[0] == s.sandboxes[1] || res.SandboxesLost != 1 {
		t.Errorf("sandboxes %v, %d lost; want a second, new sandbox after one lost", s.sandboxes, res.SandboxesLost)
	}
}

// What a lost sandbox's model calls used is the task's: its result
// counts it with the new sandbox's, and the new sandbox's budgets count
// on from it (the manifest's limits.spent).
func TestLostSandboxesSpendCountsForTheTask(t *testing.T) {
	lost := &protocol.ModelUsage{Requests: 2, InputTokens: 900, CostUSD: 0.5}
	s := &agentScript{first: protocol.PhaseComplete, lose: loseAt(0), usedAt: map[int]*protocol.ModelUsage{0: lost},
		usage: &protocol.ModelUsage{Requests: 1, InputTokens: 100, CostUSD: 0.25}}
	in := taskInput()
	in.Manifest.RequireApproval = false
	res, _ := runTask(t, s, in, nil)
	if res.Phase != status.TaskCompleted || res.SandboxesLost != 1 {
		t.Fatalf("result %s, %d lost; want completed after one lost", res.Phase, res.SandboxesLost)
	}
	if u := res.ModelUsage; u == nil || u.Requests != 3 || u.InputTokens != 1000 || u.CostUSD != 0.75 {
		t.Errorf("the task's usage %+v; want both sandboxes': 3 requests, 1,000 tokens, $0.75", u)
	}
	if len(s.spent) != 2 || s.spent[0] != nil || s.spent[1] == nil || *s.spent[1] != *lost {
		t.Errorf("the manifests' limits.spent %v; want none, then the lost sandbox's", s.spent)
	}
}

// Sandboxes lost over and over end the task, failed, saying why, after
// a bounded number of them: every one counted as lost, and what each
// one's model calls used in the task's usage, the last one's too.
func TestTaskGivesUpAfterLosingSandboxesOverAndOver(t *testing.T) {
	each := &protocol.ModelUsage{Requests: 1, InputTokens: 100, CostUSD: 0.25}
	s := &agentScript{first: protocol.PhaseComplete, lose: func(int) bool { return true },
		usedAt: map[int]*protocol.ModelUsage{0: each, 1: each, 2: each, 3: each, 4: each, 5: each}}
	in := taskInput()
	in.Manifest.RequireApproval = false
	res, _ := runTask(t, s, in, nil)
	if res.Phase != status.TaskFailed || !strings.Contains(res.Error, "without finishing") {
		t.Fatalf("result %s %q; want failed, saying the agent did not finish", res.Phase, res.Error)
	}
	if len(s.sandboxes) != 6 || res.SandboxesLost != 6 {
		t.Errorf("%d sandboxes, %d lost; want 6 and 6", len(s.sandboxes), res.SandboxesLost)
	}
	if u := res.ModelUsage; u == nil || u.Requests != 6 || u.InputTokens != 600 || u.CostUSD != 1.5 {
		t.Errorf("the task's usage %+v; want the six sandboxes': 6 requests, 600 tokens, $1.50", u)
	}
	if s.cleanupSteps != 6 {
		t.Errorf("%d sandboxes removed, want each of the 6 once", s.cleanupSteps)
	}
}

// A task awaiting approval whose every sandbox is lost, the last while
// its approved change is pushed, counts the last sandbox's spend once:
// its result's share is in what the sandbox's calls used.
func TestLastLostSandboxOfAnApprovalCountsOnce(t *testing.T) {
	each := &protocol.ModelUsage{Requests: 2, InputTokens: 200, CostUSD: 0.5}
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer, lose: loseAt(1, 3, 5, 7, 9, 11),
		usage:  &protocol.ModelUsage{Requests: 1, InputTokens: 100, CostUSD: 0.25},
		usedAt: map[int]*protocol.ModelUsage{0: each, 1: each, 2: each, 3: each, 4: each, 5: each}}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: queryTask(t, env).ResultDigest, By: "alice", Record: "approvals/svc.yaml"})
		}, time.Minute)
	})
	if res.Phase != status.TaskFailed || res.SandboxesLost != 6 {
		t.Fatalf("result %s, %d lost (%q); want failed after 6 lost", res.Phase, res.SandboxesLost, res.Error)
	}
	if u := res.ModelUsage; u == nil || u.Requests != 12 || u.InputTokens != 1200 || u.CostUSD != 3 {
		t.Errorf("the task's usage %+v; want the six sandboxes' counts alone: 12 requests, 1,200 tokens, $3", u)
	}
}

// An approval applies to the result it names, whatever happened to the
// sandbox: the agent dies after the approval, the work runs again in a new
// sandbox, comes out the same, and is pushed on the approval already given,
// which counts as carried out once.
func TestApprovalSurvivesAnAgentCrash(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer, lose: loseAt(1)}
	var approved string
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			approved = queryTask(t, env).ResultDigest
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: approved, By: "alice", Record: "approvals/svc.yaml"})
		}, time.Minute)
	})
	if res.Phase != status.TaskCompleted || res.Repositories[0].PullRequest == nil {
		t.Fatalf("result %s %q; want completed on the approval given before the crash", res.Phase, res.Error)
	}
	if len(s.sandboxes) != 2 {
		t.Errorf("sandboxes %v; want the work run again in a second", s.sandboxes)
	}
	if strings.Join(res.Applied, ",") != "approvals/svc.yaml" {
		t.Errorf("applied %q; want the approval once", res.Applied)
	}
	var approvals int
	for _, st := range s.steerings {
		if st.Action == protocol.ActionApprove {
			approvals++
		}
	}
	if approvals != 2 {
		t.Errorf("the agents were told %+v; want approve told to each", s.steerings)
	}
}

// When the work run again comes out as another result, the approval of the
// first does not carry over: the task waits for a decision on the new one,
// and says so.
func TestRerunWithAnotherResultWaitsForItsOwnDecision(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer, lose: loseAt(1), rerunTree: "d670460b4b4aece5915caf5c68d12f560a9fe3e4"}
	var first, second string
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			first = queryTask(t, env).ResultDigest
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: first, Record: "approvals/first.yaml"})
		}, time.Minute)
		env.RegisterDelayedCallback(func() {
			st := queryTask(t, env)
			second = st.ResultDigest
			if st.Phase != status.TaskAwaitingApproval || len(st.Lost) != 1 || len(st.Ignored) != 1 || !strings.Contains(st.Ignored[0], "awaits a decision of its own") {
				t.Errorf("after the re-run: phase %s, lost %q, notes %q", st.Phase, st.Lost, st.Ignored)
			}
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: second, Record: "approvals/second.yaml"})
		}, 2*time.Minute)
	})
	if first == second || res.Phase != status.TaskCompleted {
		t.Fatalf("digests %q and %q, result %s %q; want two results and completed on the second's approval", first, second, res.Phase, res.Error)
	}
	if strings.Join(res.Applied, ",") != "approvals/first.yaml,approvals/second.yaml" {
		t.Errorf("applied %q", res.Applied)
	}
}

// The steering already given is given again to the work run in a new
// sandbox, so the result awaiting approval is the steered one.
func TestSteeringIsGivenAgainAfterAnAgentCrash(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: standardSteer, lose: loseAt(1)}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		decideAt(t, env, time.Minute, workflow.SignalSteer, steering("use slog"))
		decideAt(t, env, 2*time.Minute, workflow.SignalApprove, approval)
	})
	if res.Phase != status.TaskCompleted || res.Steers != 1 {
		t.Fatalf("result %s %q, %d steers; want completed after one steer", res.Phase, res.Error, res.Steers)
	}
	var got []string
	for _, st := range s.steerings {
		got = append(got, string(st.Action)+":"+st.Prompt)
	}
	if want := "steer:use slog,steer:use slog,approve:"; strings.Join(got, ",") != want {
		t.Errorf("steerings %v, want %s", got, want)
	}
}

// A decision is never reported carried out when the change it approved
// was not pushed: the approval record of a task that then failed still
// applies to a retry.
func TestApprovalOfAChangeNeverPushedIsNotCarriedOut(t *testing.T) {
	s := &agentScript{first: protocol.PhaseAwaitingInput, onSteer: func(st protocol.Steering) protocol.Phase {
		if st.Action == protocol.ActionApprove {
			return protocol.PhaseFailed
		}
		return standardSteer(st)
	}}
	res, _ := runTask(t, s, taskInput(), func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflow(workflow.SignalApprove, workflow.DecisionSignal{ResultDigest: queryTask(t, env).ResultDigest, Record: "approvals/svc.yaml"})
		}, time.Minute)
	})
	if res.Phase != status.TaskFailed || len(res.Applied) != 0 {
		t.Fatalf("result %s, applied %q; want failed and the approval not carried out", res.Phase, res.Applied)
	}
}

// A definition's credentials reach every sandbox of the task, and what a
// sandbox could not apply of them is noted once per task, in the result
// and the status, however many sandboxes said so.
func TestTaskCredentialsAndNotes(t *testing.T) {
	note := "credentials.github.secret_ref (Secret team-github/token) does not apply to local sandboxes: the agent's forge token comes from the worker's own configuration"
	s := &agentScript{first: protocol.PhaseComplete, lose: loseAt(0), notes: []string{note}}
	in := taskInput()
	in.Manifest.RequireApproval = false
	in.Credentials = &activity.Credentials{GitHub: &sandbox.SecretRef{Secret: "team-github", Key: "token"}}
	res, env := runTask(t, s, in, nil)
	if res.Phase != status.TaskCompleted || len(s.sandboxes) != 2 {
		t.Fatalf("result %+v after %d sandboxes; want completed in the second", res, len(s.sandboxes))
	}
	for i, c := range s.credentials {
		if c == nil || c.GitHub == nil || *c.GitHub != *in.Credentials.GitHub || c.Anthropic != nil {
			t.Errorf("sandbox %d provisioned with credentials %+v; want %+v", i, c, in.Credentials)
		}
	}
	if !slices.Equal(res.Notes, []string{note}) {
		t.Errorf("result notes %q; want the note once", res.Notes)
	}
	if st := queryTask(t, env); !slices.Equal(st.Notes, []string{note}) {
		t.Errorf("status notes %q; want the note once", st.Notes)
	}
}
