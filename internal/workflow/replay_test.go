package workflow_test

import (
	"testing"

	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestReplayTaskHistory replays a Task run recorded on the embedded server
// (provision, agent run, approval, pull request, cleanup). It fails when a
// change to the workflow code would break runs already in flight.
// Refresh the fixture with:
//
//	go test ./internal/devserver -run TestTaskApprovalOnServer -record-history $PWD/internal/workflow/testdata/task-approve.history.json
func TestReplayTaskHistory(t *testing.T) {
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflow(workflow.Task)
	if err := r.ReplayWorkflowHistoryFromJSONFile(nil, "testdata/task-approve.history.json"); err != nil {
		t.Fatal(err)
	}
}
