package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// ErrNothingToRerun is returned (wrapped) when none of a campaign's
// units is one to run again.
var ErrNothingToRerun = errors.New("nothing to run again")

// errCannotRerun marks a run whose units cannot be run again this way.
var errCannotRerun = errors.New("cannot be run again this way")

// Regenerable says why the units of run st cannot be run again with
// Regenerate, "" when they can: it must be a campaign (run in pages or
// not).
func Regenerable(st *status.Run) string {
	if st.Campaign == nil {
		return "it is a single task: run it again with `fleetlift run`"
	}
	return ""
}

// RegenerateUnits is workflow.RegenerateActivity: Regenerate with the
// worker's client. A campaign that cannot have its units run again is
// not asked again.
func RegenerateUnits(ctx context.Context, in workflow.RegenerateInput) (int, error) {
	n, err := Regenerate(ctx, sdkactivity.GetClient(ctx), in.Source, in.Units)
	if errors.Is(err, ErrNothingToRerun) || errors.Is(err, errCannotRerun) {
		return 0, temporal.NewNonRetryableApplicationError(err.Error(), "CannotRerun", nil)
	}
	return n, err
}

// RetryFailed runs campaign id's failed units again: a running campaign
// queues them (SignalRetryFailed); one that has ended starts again with
// only them, keeping the results of the others. It returns how many it
// started again (0 for a running campaign, which decides itself).
func RetryFailed(ctx context.Context, c client.Client, id string) (int, error) {
	return rerun(ctx, c, id, func(ctx context.Context) error {
		return c.SignalWorkflow(ctx, id, "", workflow.SignalRetryFailed, nil)
	}, status.UnitResult.HasFailures, true)
}

// Regenerate runs the finished units of campaign id named in units
// again, however they ended: their change is made anew on their
// repositories as they are now, and pushed to the branches of the pull
// requests they opened (a branch someone else pushed to is left alone).
// A running campaign queues them (SignalRegenerate: a campaign run in
// pages runs the pages that hold them again); one that has ended starts
// again with only them. id may name a page of a campaign, whose
// campaign is meant.
func Regenerate(ctx context.Context, c client.Client, id string, units []string) (int, error) {
	if len(units) == 0 {
		return 0, fmt.Errorf("%s: %w", id, ErrNothingToRerun)
	}
	id, err := campaignOf(ctx, c, id)
	if err != nil {
		return 0, err
	}
	named := make(map[string]bool, len(units))
	for _, k := range units {
		named[k] = true
	}
	return rerun(ctx, c, id, func(ctx context.Context) error {
		// In signals of at most a page's worth of keys each, so that
		// no payload grows with the campaign: each adds to the queue.
		for batch := range slices.Chunk(units, workflow.DefaultPageSize) {
			if err := c.SignalWorkflow(ctx, id, "", workflow.SignalRegenerate, workflow.RegenerateSignal{Units: batch}); err != nil {
				return err
			}
		}
		return nil
	}, func(u status.UnitResult) bool { return named[u.Key] }, false)
}

// errAborted: a campaign someone aborted is not started again to keep
// its pull requests current.
var errAborted = fmt.Errorf("it was aborted (%w)", errCannotRerun)

// rerun signals campaign id with signal while it runs; once it has
// ended, it starts it again with its last input and results, queueing
// the units pick chooses. retry says it is retry-failed, which a
// campaign run in pages may have (each new page reads its own results
// from the page it replaces and runs only its failed units again), and
// an aborted one; a change made again may have neither.
func rerun(ctx context.Context, c client.Client, id string, signal func(context.Context) error, pick func(status.UnitResult) bool, retry bool) (int, error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return 0, err
	}
	info := d.WorkflowExecutionInfo
	switch info.Type.Name {
	case "Campaign":
	case "CampaignPage":
		return 0, fmt.Errorf("%s is a page of a campaign: run its campaign again (%w)", id, errCannotRerun)
	default:
		return 0, fmt.Errorf("%s is a single task: run it again with `fleetlift run` (%w)", id, errCannotRerun)
	}
	switch info.Status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return 0, signal(ctx)
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
	default:
		// Cancelled (a prune), terminated, failed: nothing to go on from.
		return 0, fmt.Errorf("%s ended without a result (%s): %w", id, strings.ToLower(info.Status.String()), errCannotRerun)
	}
	in, err := lastInput(ctx, c, id)
	if err != nil {
		return 0, err
	}
	var last status.CampaignState
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &last); err != nil {
		return 0, fmt.Errorf("%s: read result: %w", id, err)
	}
	pages := last.Pages
	if last.Phase == status.CampaignAborted && !retry {
		return 0, fmt.Errorf("%s: %w", id, errAborted)
	}
	// A campaign that ran in pages: its units are in its pages' results.
	if last, err = (&statetemporal.Reader{Client: c, QueryTimeout: -1, QueryCache: -1}).WithPages(ctx, last); err != nil {
		return 0, err
	}
	p := &workflow.CampaignProgress{Next: len(in.Units), Results: map[string]status.UnitResult{}, Phase: status.CampaignRunning}
	for _, u := range last.Units {
		p.Results[u.Key] = u
		if pick(u) {
			p.Retry = append(p.Retry, u.Key)
		}
	}
	if len(p.Retry) == 0 {
		return 0, fmt.Errorf("%s: %w", id, ErrNothingToRerun)
	}
	in.Regenerate = nil
	if len(pages) > 0 {
		// In pages again, each reading what its units did in the page
		// before it: the new run carries no results. Each runs again
		// its failed units, or those whose change is made anew.
		in.Units = inPageOrder(in.Units, last.Units)
		in.Previous = pages
		if !retry {
			in.Regenerate = p.Retry
		}
	} else {
		in.Progress = p
	}
	return len(p.Retry), startAgain(ctx, c, id, info.GetMemo().GetFields(), in)
}

// campaignOf is the campaign whose page id is (its parent), or id when
// it is no page.
func campaignOf(ctx context.Context, c client.Client, id string) (string, error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return "", err
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetType().GetName() != "CampaignPage" {
		return id, nil
	}
	parent := info.GetParentExecution().GetWorkflowId()
	if parent == "" {
		return "", fmt.Errorf("%s is a page of a campaign that it does not name: %w", id, errCannotRerun)
	}
	return parent, nil
}

// startAgain starts campaign id again with in, as its current run,
// with the memo of its last run (its phase aside): it carries out the
// same spec, so the recorded state, the plan and the status mirror
// follow it and report how it ends.
func startAgain(ctx context.Context, c client.Client, id string, memo map[string]*commonpb.Payload, in workflow.CampaignInput) error {
	carried := map[string]any{}
	for k, v := range memo {
		if k == status.MemoPhase {
			// How the last run ended; this one says so when it ends.
			continue
		}
		var raw json.RawMessage
		if err := payload.Converter.FromPayload(v, &raw); err != nil {
			return fmt.Errorf("%s: read memo %s: %w", id, k, err)
		}
		carried[k] = raw
	}
	// The search attributes of the campaign, as its memo names it.
	var kind, did, digest string
	for key, dst := range map[string]*string{status.MemoKind: &kind, status.MemoID: &did, status.MemoDigest: &digest} {
		if v, ok := memo[key]; ok {
			_ = payload.Converter.FromPayload(v, dst)
		}
	}
	_, err := startCampaign(ctx, c, client.StartWorkflowOptions{
		ID: id, TaskQueue: workflow.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		Memo:                  carried,
		TypedSearchAttributes: workflow.StartAttributes(kind, did, did, digest, string(status.CampaignRunning)),
	}, in)
	return err
}

// inPageOrder is units in the order ran lists them (the units of a paged
// campaign's last run, page by page), those it does not list after.
func inPageOrder(units []workflow.Unit, ran []status.UnitResult) []workflow.Unit {
	by := make(map[string]workflow.Unit, len(units))
	for _, u := range units {
		by[u.Key] = u
	}
	out := make([]workflow.Unit, 0, len(units))
	for _, r := range ran {
		if u, ok := by[r.Key]; ok {
			out = append(out, u)
			delete(by, r.Key)
		}
	}
	for _, u := range units {
		if _, ok := by[u.Key]; ok {
			out = append(out, u)
		}
	}
	return out
}

// Reopen has campaign run rec make the change of units again, their
// done_when having regressed (reconcile.Dispatcher): Regenerate, then
// the run's followers record each regression as reopened, so that the
// next plan does not reopen it again. Units already queued or running
// are not queued twice.
func (t *Temporal) Reopen(ctx context.Context, rec state.Campaign, units []string) error {
	// What the followers hold now, not what the plan read a moment ago:
	// a unit whose regression they record as reopened already was (by
	// an earlier pass whose record the plan did not see yet).
	sources, err := t.followed(ctx, rec)
	if err != nil {
		return fmt.Errorf("reopen %v of %s: %w", units, rec.WorkflowID, err)
	}
	reader := &statetemporal.Reader{Client: t.Client}
	var followed []status.FollowedPR
	for _, s := range sources {
		prs, err := reader.Followed(ctx, s)
		if err != nil {
			return fmt.Errorf("reopen %v of %s: %w", units, rec.WorkflowID, err)
		}
		if prs != nil {
			followed = append(followed, prs.PRs...)
		}
	}
	if units = notReopened(units, followed); len(units) == 0 {
		return nil
	}
	if _, err := Regenerate(ctx, t.Client, rec.WorkflowID, units); err != nil && !errors.Is(err, ErrNothingToRerun) {
		return fmt.Errorf("reopen %v of %s: %w", units, rec.WorkflowID, err)
	}
	// The followers read above, which hold the regressed pull requests
	// (a campaign in pages started again may have pages of new ids).
	err = t.updateEach(ctx, sources, client.UpdateWorkflowOptions{
		UpdateName: status.UpdateReopened, Args: []any{units}, WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return fmt.Errorf("reopen %v of %s: record it with its followers: %w", units, rec.WorkflowID, err)
	}
	return nil
}

// notReopened are the units of units none of whose regressed pull
// requests in followed is recorded as reopened for the commit it
// regressed at; a unit followed has none is kept (its follower may not
// have read it yet).
func notReopened(units []string, followed []status.FollowedPR) []string {
	var out []string
	for _, u := range units {
		if !slices.ContainsFunc(followed, func(p status.FollowedPR) bool { return p.Unit == u && p.Reopened() }) {
			out = append(out, u)
		}
	}
	return out
}
