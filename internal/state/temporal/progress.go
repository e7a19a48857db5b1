package temporal

import (
	workflowpb "go.temporal.io/api/workflow/v1"

	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/status"
)

// RunsProgressOf is the progress of the runs of units among a campaign's
// pending activities (as DescribeWorkflowExecution shows them), by their
// last heartbeats (status.UnitsBeat), which a run sends before each unit
// but its first. A heartbeat that does not decode as a run's progress
// adds nothing.
func RunsProgressOf(pending []*workflowpb.PendingActivityInfo) status.RunsProgress {
	var rp status.RunsProgress
	for _, pa := range pending {
		if pa.GetActivityType().GetName() != status.RunUnitsName || len(pa.GetHeartbeatDetails().GetPayloads()) == 0 {
			continue
		}
		var b status.UnitsBeat
		if payload.Converter.FromPayloads(pa.GetHeartbeatDetails(), &b) != nil {
			continue
		}
		rp.Done = append(rp.Done, b.Done...)
		if b.AtWork != nil {
			rp.AtWork = append(rp.AtWork, *b.AtWork)
		}
	}
	return rp
}
