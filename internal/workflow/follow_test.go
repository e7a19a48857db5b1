package workflow_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// registerFollower stands in for the PullRequests workflow a run
// starts beside it, which the campaign and task tests do not follow.
func registerFollower(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.FollowInput) (status.PullRequests, error) {
		return status.PullRequests{Source: in.Source}, nil
	}, sdkworkflow.RegisterOptions{Name: "PullRequests"})
}

func followed(url, state string) status.FollowedPR {
	return status.FollowedPR{PullRequestInfo: protocol.PullRequestInfo{URL: url}, PullRequestStatus: forge.PullRequestStatus{State: state}}
}

func TestPullRequestsFollowsUntilTheSourceEndedAndNoneIsOpen(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflow.PullRequests)
	var acts *activity.Activities
	env.RegisterActivity(acts)
	// Pass 1: the run goes on with one open; pass 2: the forge cannot be
	// reached; pass 3: the run ended, one merged and one closed.
	passes := 0
	var known [][]status.FollowedPR
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			passes++
			known = append(known, in.Known)
			switch passes {
			case 1:
				return activity.RefreshOutcome{PRs: []status.FollowedPR{followed("a", forge.StateOpen)}, Every: time.Minute}, nil
			case 2:
				return activity.RefreshOutcome{}, errors.New("forge down")
			}
			return activity.RefreshOutcome{SourceEnded: true, Every: time.Minute,
				PRs: []status.FollowedPR{followed("a", forge.StateMerged), followed("b", forge.StateClosed)}}, nil
		})
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "campaign/x"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the follower did not end")
	}
	var st status.PullRequests
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	if !st.Ended || len(st.PRs) != 2 || st.PRs[0].State != forge.StateMerged || st.Source != "campaign/x" {
		t.Errorf("final state %+v", st)
	}
	// After a failed read (retried five times), the next pass still
	// starts from what the first read.
	if len(known) < 3 || len(known[len(known)-1]) != 1 || known[len(known)-1][0].State != forge.StateOpen {
		t.Errorf("passes started from %+v", known)
	}
}

func TestPullRequestsRefreshReturnsAFreshRead(t *testing.T) {
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflow.PullRequests)
	var acts *activity.Activities
	env.RegisterActivity(acts)
	passes := 0
	env.OnActivity(acts.RefreshPullRequests, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activity.RefreshInput) (activity.RefreshOutcome, error) {
			passes++
			state := forge.StateOpen
			if passes >= 2 {
				state = forge.StateMerged
			}
			return activity.RefreshOutcome{PRs: []status.FollowedPR{followed("a", state)}, SourceEnded: passes >= 3, Every: time.Hour}, nil
		})
	var got status.PullRequests
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(status.UpdateRefresh, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("refresh rejected: %v", err) },
			OnAccept: func() {},
			OnComplete: func(v any, err error) {
				if err != nil {
					t.Errorf("refresh: %v", err)
					return
				}
				got = v.(status.PullRequests)
			},
		})
	}, time.Minute)
	env.ExecuteWorkflow(workflow.PullRequests, workflow.FollowInput{Source: "task/t"})
	// Asked a minute in, long before the hour is up: answered by a read
	// made after it was asked.
	if got.Passes != 2 || len(got.PRs) != 1 || got.PRs[0].State != forge.StateMerged {
		t.Errorf("refresh answered %+v", got)
	}
}
