package dispatch

import (
	"context"
	"fmt"
	"slices"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// PendingChecks is workflow.PendingChecksActivity with the worker's
// client: how many of a campaign's open pull requests have checks
// pending, as their followers last read them (see
// status.PullRequests.ChecksPending), and those the campaign opened
// since its follower last read it (in.Opened); for a page of a campaign,
// those of every page of it.
func PendingChecks(ctx context.Context, in workflow.PendingChecksInput) (int, error) {
	return CountPendingChecks(ctx, sdkactivity.GetClient(ctx), in)
}

// CountPendingChecks is PendingChecks with client c.
func CountPendingChecks(ctx context.Context, c client.Client, in workflow.PendingChecksInput) (int, error) {
	r := &statetemporal.Reader{Client: c}
	sources := []string{in.Source}
	if in.Campaign != "" {
		v, err := r.Client.QueryWorkflow(ctx, in.Campaign, "", status.QueryStatus)
		if err != nil {
			return 0, fmt.Errorf("query %s for its pages: %w", in.Campaign, err)
		}
		var st status.CampaignState
		if err := v.Get(&st); err != nil {
			return 0, fmt.Errorf("read %s's pages: %w", in.Campaign, err)
		}
		sources = sources[:0]
		for _, p := range st.Pages {
			if p.WorkflowID != "" {
				sources = append(sources, p.WorkflowID)
			}
		}
		if !slices.Contains(sources, in.Source) {
			sources = append(sources, in.Source)
		}
	}
	n := 0
	for _, s := range sources {
		prs, err := r.Followed(ctx, s)
		if err != nil {
			return 0, err
		}
		known := 0
		if prs != nil {
			n += prs.ChecksPending()
			known = len(prs.PRs)
		}
		if s == in.Source {
			// Opened since its follower last read the source: their
			// checks have barely started.
			n += max(in.Opened-known, 0)
		}
	}
	return n, nil
}
