package workflow_test

import (
	"os"
	"testing"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// The replay tests replay runs recorded on the embedded server against
// the workflow code, and fail when a change to it would break runs in
// flight. No release has run these workflows yet: the fixtures are runs
// of their one code path. From the first release on, a change to a
// workflow's commands goes behind workflow.GetVersion, the fixtures of
// the version before it stay (they are the runs in flight then), and
// one of the new version is added beside them, under a name of its own.
// Each fixture is recorded by a test on the embedded server:
//
//	go test ./internal/devserver -run '^TestTaskApprovalOnServer$' -record-history $PWD/internal/workflow/testdata/task-approve.history.json
//	go test ./cmd/fleetlift -run '^TestSearchAttributes$' -record-search-histories $PWD/internal/workflow/testdata
//	go test ./cmd/fleetlift -run '^TestRunCampaignRunsShortUnitsInRuns$' -record-runs-history $PWD/internal/workflow/testdata/campaign-direct-runs.history.json
//	go test ./internal/devserver -run '^TestCampaignInPagesOnServer$' -record-pages-histories $PWD/internal/workflow/testdata

// TestReplayTaskHistory replays Task runs that need approval: provision,
// the agent's run, approval, pull request, the last wait removing the
// sandbox; task-search-attributes carries search attributes and keeps
// its phase current. By workflow id: the follower of a task's pull
// request has an id derived from it.
func TestReplayTaskHistory(t *testing.T) {
	for name, id := range map[string]string{"task-approve": "task/approve-me", "task-search-attributes": "task/needs-ok"} {
		t.Run(name, func(t *testing.T) { replay(t, name, id, workflow.Task) })
	}
}

// TestReplayCampaignHistory replays Campaign runs by workflow id (their
// children's ids and sandboxes derive from it), each with search
// attributes: campaign/bump's two units, which need no decision, ran
// as activities of its own (runs of units); campaign/inventory's two
// reports as children; campaign/runs' eight units over two slots in runs
// of 4 and 4; campaign/paged's five units ran in three pages of two
// (campaign-pages), the second of which is campaign-page (a page's id
// carries its campaign's first run, the recording's).
func TestReplayCampaignHistory(t *testing.T) {
	for name, id := range map[string]string{
		"campaign-direct-units": "campaign/bump",
		"campaign-children":     "campaign/inventory",
		"campaign-direct-runs":  "campaign/runs",
		"campaign-pages":        "campaign/paged",
		"campaign-page":         "campaign/paged/page-2@f4e440cc4400",
	} {
		t.Run(name, func(t *testing.T) { replay(t, name, id, workflow.Campaign, workflow.CampaignPage) })
	}
}

// replay replays the fixture name as the run of workflow id id, with
// workflows registered.
func replay(t *testing.T, name, id string, workflows ...any) {
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
	for _, w := range workflows {
		r.RegisterWorkflow(w)
	}
	err = r.ReplayWorkflowHistoryWithOptions(nil, hist, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: sdkworkflow.Execution{ID: id}})
	if err != nil {
		t.Fatal(err)
	}
}
