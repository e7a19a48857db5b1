package dispatch

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
)

// RefreshPullRequests has the followers of the pull requests of sources
// (workflow ids of runs, or of a campaign's pages) read them from their
// forges now, and returns once each has (or ctx ends). A source with no
// follower running (it never opened one, or everything it opened is
// merged or closed and its run ended) is skipped: what it knows is
// final.
func RefreshPullRequests(ctx context.Context, c client.Client, sources []string) error {
	var errs []error
	for _, s := range sources {
		id := status.FollowerID(s)
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: id, UpdateName: status.UpdateRefresh, WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, nil)
		}
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("refresh the pull requests of %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}

// ActOnPullRequests has the followers of the pull requests of sources
// carry out req, and returns what became of each pull request it named.
// Sources whose follower has ended (everything merged or closed) have
// nothing left to act on.
func ActOnPullRequests(ctx context.Context, c client.Client, sources []string, req status.ActRequest) ([]status.ActOutcome, error) {
	var out []status.ActOutcome
	for _, s := range sources {
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: status.FollowerID(s), UpdateName: status.UpdateAct, Args: []any{req},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		var res status.ActResult
		if err == nil {
			err = h.Get(ctx, &res)
		}
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("%s the pull requests of %s: %w", req.Action, s, err)
		}
		out = append(out, res.Outcomes...)
	}
	return out, nil
}

// ClosePullRequests has the followers of rec's ended run close its open
// pull requests as req says, and does not wait for them: the update's
// id names the run, so a pass that asks again while they close (the
// recorded state still shows them open) joins the same closing. The
// followers are the run's own, or its pages' (read from the run, which
// answers its status query also once cancelled).
func (t *Temporal) ClosePullRequests(ctx context.Context, rec state.Campaign, req status.ActRequest) error {
	err := t.updateFollowers(ctx, rec, client.UpdateWorkflowOptions{
		UpdateID: "close-removed-" + rec.RunID, UpdateName: status.UpdateAct,
		Args: []any{req}, WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	if err != nil {
		return fmt.Errorf("close the pull requests of %s: %w", rec.WorkflowID, err)
	}
	return nil
}

// updateFollowers sends update o to every follower of rec's run (its
// own, or its pages', read from the run, which answers its status query
// also once cancelled), waiting for each as o.WaitForStage says; a
// follower that no longer runs is passed over.
func (t *Temporal) updateFollowers(ctx context.Context, rec state.Campaign, o client.UpdateWorkflowOptions) error {
	sources, err := t.followed(ctx, rec)
	if err != nil {
		return err
	}
	return t.updateEach(ctx, sources, o)
}

// followed are the sources whose followers follow rec's run's pull
// requests (status.Run.Followers).
func (t *Temporal) followed(ctx context.Context, rec state.Campaign) ([]string, error) {
	st, err := (&statetemporal.Reader{Client: t.Client}).QueryStatus(ctx, rec.WorkflowID, rec.Kind == state.KindCampaign)
	if err != nil {
		return nil, err
	}
	st.ID = rec.WorkflowID
	return st.Followers(), nil
}

// updateEach sends update o to the follower of each of sources that
// runs.
func (t *Temporal) updateEach(ctx context.Context, sources []string, o client.UpdateWorkflowOptions) error {
	for _, s := range sources {
		o.WorkflowID = status.FollowerID(s)
		h, err := t.Client.UpdateWorkflow(ctx, o)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			continue
		}
		if err == nil && o.WaitForStage == client.WorkflowUpdateStageCompleted {
			err = h.Get(ctx, nil)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", o.WorkflowID, err)
		}
	}
	return nil
}
