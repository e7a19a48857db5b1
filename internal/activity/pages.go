package activity

import (
	"context"
	"fmt"

	sdkactivity "go.temporal.io/sdk/activity"

	"github.com/fleetlift/fleetlift/internal/status"
)

// ReadPage reads the state a page of a campaign (a CampaignPage
// workflow, by its id) ended with: a page of a campaign started again
// (fleetlift retry) takes in what its units did there. The page's result
// holds at most a page of units, so neither its input nor its result
// grows with the campaign.
func (a *Activities) ReadPage(ctx context.Context, workflowID string) (status.CampaignState, error) {
	// A page's result (workflow.PageResult) holds its state.
	var res struct {
		State status.CampaignState `json:"state"`
	}
	if err := sdkactivity.GetClient(ctx).GetWorkflow(ctx, workflowID, "").Get(ctx, &res); err != nil {
		return status.CampaignState{}, fmt.Errorf("read page %s: %w", workflowID, err)
	}
	return res.State, nil
}
