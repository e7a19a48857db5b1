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

// TestReplayCampaignHistory replays Campaign runs recorded on the embedded
// server (workflow id campaign/phases, four repositories, svc-0's command
// failing) before campaigns told their endings apart, when every run ended
// "completed": one with no threshold, one paused at its 30% threshold and
// continued with --skip-remaining. A run in flight when the final phases
// came in finishes on the new code: the phase it ends in is data (the
// result and the memo's value), not a new command.
func TestReplayCampaignHistory(t *testing.T) {
	for name, id := range map[string]string{
		"campaign-some-failed":          "campaign/phases",
		"campaign-pause-skip-remaining": "campaign/phases",
		// A campaign (campaign/bump, two repositories) with search
		// attributes, which gives its children a memo and search
		// attributes and keeps its phase current (TestSearchAttributes
		// in cmd/fleetlift).
		"campaign-search-attributes": "campaign/bump",
		// The same campaign run since a unit that needs no approval runs
		// as one activity of the campaign (directUnitsChange), recorded
		// by TestSearchAttributes -record-search-histories.
		"campaign-direct-units": "campaign/bump",
		// A campaign of eight direct units over two slots, run in runs
		// of 4, 2, 1 and 1 units (directRunsChange 1, before a run's
		// share counted the units in flight), recorded by
		// TestRunCampaignRunsShortUnitsInRuns -record-runs-history.
		"campaign-direct-runs": "campaign/runs",
		// The same since a run's share counts the units in flight
		// (directRunsChange 2: runs of 4 and 4), each run asking before
		// a unit, before gated runs.
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
