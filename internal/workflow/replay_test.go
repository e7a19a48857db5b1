package workflow_test

import (
	"os"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestReplayTaskHistory replays Task runs recorded on the embedded server
// (provision, agent run, approval, pull request, cleanup) by
// TestTaskApprovalOnServer in internal/devserver: task-wait-submits
// removes the sandbox with a cleanup of its own, task-wait-cleans-up with
// the last wait. It fails when a change to the workflow code would break
// runs already in flight. Record another fixture with:
//
//	go test ./internal/devserver -run TestTaskApprovalOnServer -record-history $PWD/internal/workflow/testdata/NAME.history.json
func TestReplayTaskHistory(t *testing.T) {
	for _, name := range []string{"task-wait-submits", "task-wait-cleans-up"} {
		t.Run(name, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflow.Task)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/"+name+".history.json"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestReplayCampaignHistory replays Campaign runs recorded on the
// embedded server, by workflow id (children's ids derive from it).
func TestReplayCampaignHistory(t *testing.T) {
	for name, id := range map[string]string{
		// A campaign of eight direct units over two slots, recorded by
		// TestRunCampaignRunsShortUnitsInRuns -record-runs-history in
		// cmd/fleetlift: run in runs of 4, 2, 1 and 1 (before a run's
		// share counted the units in flight), and of 4 and 4. How long
		// a run is and how it learns to stop are its input, not
		// commands: both replay.
		"campaign-direct-runs":        "campaign/runs",
		"campaign-direct-runs-shares": "campaign/runs",
	} {
		t.Run(name, func(t *testing.T) {
			f, err := os.Open("testdata/" + name + ".history.json")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			hist, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflow.Campaign)
			// Children's ids derive from the campaign's workflow id.
			err = r.ReplayWorkflowHistoryWithOptions(nil, hist, worker.ReplayWorkflowHistoryOptions{
				OriginalExecution: sdkworkflow.Execution{ID: id}})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
