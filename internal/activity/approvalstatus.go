package activity

import (
	"context"
	"errors"
	"fmt"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/status"
)

// ApprovalContext is the commit status a pull request carries while a
// change made again for it (keep_current, `fleetlift prs update`) awaits
// a decision, and once one was taken.
const ApprovalContext = "fleetlift/approval"

// ApprovalStatusInput asks SetApprovalStatus to set ApprovalContext to
// State (a forge.Status* constant) with Description on the head commit
// fleetlift pushed to each of PRs.
type ApprovalStatusInput struct {
	PRs         []protocol.PullRequestInfo `json:"prs"`
	State       string                     `json:"state"`
	Description string                     `json:"description"`
}

// SetApprovalStatus sets the fleetlift/approval status on each of
// in.PRs' commits, through the forge that opened it, with the worker's
// credentials. Forges without commit statuses (the local forge) are
// skipped. It fails with every pull request it could not mark.
func (a *Activities) SetApprovalStatus(ctx context.Context, in ApprovalStatusInput) error {
	var errs []error
	for _, pr := range in.PRs {
		if pr.Commit == "" {
			continue
		}
		f, err := a.follower(status.FollowedPR{PullRequestInfo: pr})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		hub, ok := f.(forge.Hub)
		if !ok {
			continue
		}
		s := forge.CommitStatus{SHA: pr.Commit, Context: ApprovalContext, State: in.State, Description: in.Description}
		if err := hub.SetCommitStatus(ctx, pr.Repository, s); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", pr.URL, err))
		}
	}
	return errors.Join(errs...)
}
