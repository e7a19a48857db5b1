package workflow

import (
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
)

// FollowInput is a PullRequests workflow's input.
type FollowInput struct {
	// Source is the workflow whose pull requests are followed.
	Source string `json:"source"`
	// State is what an earlier run of the follower knew (continue-as-new).
	State *status.PullRequests `json:"state,omitempty"`
}

// followPassesPerRun is how many reads a PullRequests run makes before
// it continues as new: each adds a handful of events.
const followPassesPerRun = 200

// followVersion marks, in a run's history, that the run starts the
// follower of its pull requests; a run recorded before (no marker)
// starts none.
const followVersion = "follow-pull-requests"

// PullRequests follows the pull requests a run opens (a campaign that
// runs its units itself, a page of a larger one, or a task started on
// its own), from the moment the run starts until every one is merged or
// closed and the run has ended: it reads them from their forges on a
// worker (RefreshPullRequests) every few minutes (the worker's
// setting), at once when asked (UpdateRefresh: `fleetlift prs
// --refresh`), and answers QueryPullRequests with
// what it read. Its result is the last of it. The state reader shows it
// beside the run's own state. Its state holds at most the pull requests
// of one run or page, so it stays bounded as campaigns grow.
func PullRequests(ctx workflow.Context, in FollowInput) (status.PullRequests, error) {
	st := status.PullRequests{Source: in.Source}
	if in.State != nil {
		st = *in.State
	}
	// runPasses counts this run's reads; wanted is the read an update
	// waits for; reading says one is under way, which began before any
	// update that comes meanwhile.
	runPasses, wanted, reading := 0, 0, false
	if err := workflow.SetQueryHandler(ctx, status.QueryPullRequests, func() (status.PullRequests, error) { return st, nil }); err != nil {
		return st, err
	}
	if err := workflow.SetUpdateHandler(ctx, status.UpdateRefresh, func(ctx workflow.Context) (status.PullRequests, error) {
		want := runPasses + 1
		if reading {
			want++
		}
		wanted = max(wanted, want)
		err := workflow.Await(ctx, func() bool { return runPasses >= want })
		return st, err
	}); err != nil {
		return st, err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    activity.FollowHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2,
			MaximumInterval: 5 * time.Minute, MaximumAttempts: 5},
	})
	every := activity.DefaultFollowEvery
	for {
		var out activity.RefreshOutcome
		reading = true
		err := workflow.ExecuteActivity(actx, a.RefreshPullRequests, activity.RefreshInput{Source: st.Source, Known: st.PRs}).Get(ctx, &out)
		reading = false
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		if err != nil {
			// No worker could read them: try again at the next pass.
			workflow.GetLogger(ctx).Warn("pull requests not read", "source", st.Source, "error", err)
		} else {
			st.PRs, st.CheckedAt = out.PRs, workflow.Now(ctx)
			if out.Every > 0 {
				every = out.Every
			}
		}
		st.Passes++
		runPasses++
		if err == nil && out.SourceEnded && !anyOpen(st.PRs) {
			st.Ended = true
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return st, err
			}
			return st, nil
		}
		if runPasses >= followPassesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return st, err
			}
			next := st
			return st, workflow.NewContinueAsNewError(ctx, PullRequests, FollowInput{Source: st.Source, State: &next})
		}
		if _, err := workflow.AwaitWithTimeout(ctx, every, func() bool { return wanted > runPasses }); err != nil {
			return st, err
		}
	}
}

// anyOpen reports whether one of prs is open (or not read yet).
func anyOpen(prs []status.FollowedPR) bool {
	for _, p := range prs {
		if p.Open() {
			return true
		}
	}
	return false
}

// opensPullRequests reports whether work of t opens pull requests.
func opensPullRequests(t TaskInput) bool {
	return t.Manifest.Mode == protocol.ModeTransform && t.Manifest.PullRequest != nil
}

// follow starts the follower of the pull requests of the running
// workflow, unless it runs already (from an earlier run of the same
// workflow id, which it goes on following), and does not wait for it:
// it outlives the run.
func follow(ctx workflow.Context) {
	if workflow.GetVersion(ctx, followVersion, workflow.DefaultVersion, 1) != 1 {
		return
	}
	source := workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            status.FollowerID(source),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TaskQueue:             workflow.GetInfo(ctx).TaskQueueName,
	})
	f := workflow.ExecuteChildWorkflow(cctx, PullRequests, FollowInput{Source: source})
	// Started, or running already: either way it follows.
	_ = f.GetChildWorkflowExecution().Get(ctx, nil)
}
