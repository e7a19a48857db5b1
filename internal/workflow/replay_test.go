package workflow_test

import (
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestReplayTaskHistory replays Task runs recorded on the embedded server
// (provision, agent run, approval, pull request, cleanup): one from before
// the cleanup became a regular activity, one after. It fails when a change
// to the workflow code would break runs already in flight. Record another
// fixture (do not overwrite these: they are the runs in flight) with:
//
//	go test ./internal/devserver -run TestTaskApprovalOnServer -record-history $PWD/internal/workflow/testdata/NAME.history.json
func TestReplayTaskHistory(t *testing.T) {
	for _, name := range []string{"task-approve", "task-approve-cleanup-activity"} {
		t.Run(name, func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(workflow.Task)
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/"+name+".history.json"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
