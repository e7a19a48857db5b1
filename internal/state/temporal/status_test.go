package temporal_test

import (
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
)

// TestReaderReadsARunAsStatusShowsIt: status finds a run by its bare
// definition id, shows a running campaign with the unit whose task
// awaits approval, a finished task with its result, and says how a run
// ended that has no result; the list shows each run with its phase.
func TestReaderReadsARunAsStatusShowsIt(t *testing.T) {
	running, completed, failed := enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, enumspb.WORKFLOW_EXECUTION_STATUS_FAILED
	memo := func(kind, id string) map[string]any {
		return map[string]any{statetemporal.MemoID: id, statetemporal.MemoKind: kind, statetemporal.MemoGeneration: int64(1)}
	}
	digest := "sha256:" + strings.Repeat("a", 64)
	f := &fleet{
		runs: map[string]fleetRun{
			"campaign/c":       {typ: "Campaign", status: running, memo: memo("Campaign", "c")},
			"task/t":           {typ: "Task", status: completed, memo: memo("Task", "t")},
			"task/f":           {typ: "Task", status: failed, memo: memo("Task", "f")},
			"campaign/c/api@1": {typ: "Task", status: running},
		},
		queries: map[string]any{
			"campaign/c": status.CampaignState{ID: "c", Phase: status.CampaignRunning, Units: []status.UnitResult{
				{Key: "api", Phase: status.TaskRunning, WorkflowID: "campaign/c/api@1"},
				{Key: "web", Phase: status.TaskCompleted, WorkflowID: "campaign/c/web@1"},
			}},
			"campaign/c/api@1": status.TaskState{ID: "c/api", Phase: status.TaskAwaitingApproval, ResultDigest: digest,
				Result: &protocol.Result{Repositories: []protocol.RepositoryResult{{Name: "api", Status: "success"}}}},
		},
		results: map[string]any{"task/t": status.TaskResult{ID: "t", Phase: status.TaskCompleted,
			Repositories: []status.RepoResult{{Name: "svc", Status: "success"}}}},
		gets: map[string]int{},
	}
	r := &statetemporal.Reader{Client: f, QueryTimeout: -1, QueryCache: -1}
	ctx := t.Context()

	if wid, err := r.Resolve(ctx, "c"); err != nil || wid != "campaign/c" {
		t.Errorf("Resolve(c) = %q, %v; want campaign/c", wid, err)
	}
	if _, err := r.Resolve(ctx, "gone"); err == nil || !strings.Contains(err.Error(), "campaign/gone, task/gone, gone") {
		t.Errorf("Resolve(gone) = %v; want an error naming what it tried", err)
	}

	c, err := r.Status(ctx, "campaign/c")
	if err != nil || c.Closed || c.Campaign == nil || len(c.Campaign.Units) != 2 {
		t.Fatalf("Status(campaign/c) = %+v, %v", c, err)
	}
	if phase, ok := r.UnitPhase(ctx, c.Campaign.Units[0]); !ok || phase != status.TaskAwaitingApproval {
		t.Errorf("UnitPhase(api) = %q, %v; want awaiting_approval", phase, ok)
	}
	if _, ok := r.UnitPhase(ctx, c.Campaign.Units[1]); ok {
		t.Errorf("UnitPhase(web) of a completed unit is known; want it read from the campaign")
	}
	if waiting := r.Awaiting(ctx, c); len(waiting) != 1 || waiting[0].ResultDigest != digest {
		t.Errorf("Awaiting(campaign/c) = %+v; want the api unit's task", waiting)
	}

	task, err := r.Status(ctx, "task/t")
	if err != nil || !task.Closed || task.Task == nil || task.Task.Final == nil || len(task.Task.Final.Repositories) != 1 {
		t.Fatalf("Status(task/t) = %+v, %v; want its result", task, err)
	}
	if waiting := r.Awaiting(ctx, task); len(waiting) != 0 {
		t.Errorf("Awaiting(task/t) = %+v; want none", waiting)
	}
	if _, err := r.Status(ctx, "task/f"); err == nil || err.Error() != "task/f ended failed" {
		t.Errorf("Status(task/f) = %v; want it to say the run failed", err)
	}

	runs, err := r.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]string{}
	for _, e := range runs {
		phases[e.ID] = e.Status + "/" + e.Phase
	}
	if len(runs) != 4 || phases["task/f"] != "failed/failed" || phases["campaign/c"] != "running/running" || phases["task/t"] != "completed/completed" {
		t.Errorf("Runs = %v", phases)
	}
}
