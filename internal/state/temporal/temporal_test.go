package temporal_test

import (
	"context"
	"encoding/json"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// finished is a Temporal with one finished run: its memo and its result.
// Only what Reader.Get calls on a finished run is there.
type finished struct {
	client.Client
	wid, typ string
	memo     map[string]any
	result   any
}

func (f finished) DescribeWorkflowExecution(_ context.Context, wid, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if wid != f.wid {
		return nil, serviceerror.NewNotFound(wid)
	}
	fields := map[string]*commonpb.Payload{}
	for k, v := range f.memo {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return nil, err
		}
		fields[k] = p
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: "run-1"},
		Type:      &commonpb.WorkflowType{Name: f.typ},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		Memo:      &commonpb.Memo{Fields: fields},
	}}, nil
}

func (f finished) GetWorkflow(context.Context, string, string) client.WorkflowRun {
	return result{v: f.result}
}

type result struct {
	client.WorkflowRun
	v any
}

func (r result) Get(_ context.Context, v any) error {
	b, err := json.Marshal(r.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// TestReaderReportsHowARunEnded: the recorded phase of a finished run says
// whether every repository got its change, some failed, or the campaign was
// aborted, with the counts as its message; every such phase is done. A
// campaign recorded before the final phases were told apart ("completed"
// with failed units) reads as it ended.
func TestReaderReportsHowARunEnded(t *testing.T) {
	units := func(phases ...workflow.TaskPhase) []workflow.UnitResult {
		var out []workflow.UnitResult
		for i, p := range phases {
			out = append(out, workflow.UnitResult{Key: string(rune('a' + i)), Phase: p})
		}
		return out
	}
	cases := []struct {
		name      string
		typ       string
		memoPhase string
		result    any
		want      state.Phase
		message   string
	}{
		{name: "campaign, every repository completed", typ: "Campaign", memoPhase: "completed",
			result: workflow.CampaignState{Phase: workflow.CampaignCompleted, Message: "2 repositories completed",
				Summary: workflow.Summary{Total: 2, Completed: 2}, Units: units(workflow.TaskCompleted, workflow.TaskCompleted)},
			want: state.PhaseCompleted, message: "2 repositories completed"},
		{name: "campaign, one repository failed", typ: "Campaign", memoPhase: "completed_with_failures",
			result: workflow.CampaignState{Phase: workflow.CampaignCompletedWithFailures, Message: "1 of 2 repositories failed, 1 completed",
				Summary: workflow.Summary{Total: 2, Completed: 1, Failed: 1}, Units: units(workflow.TaskCompleted, workflow.TaskFailed)},
			want: state.PhaseCompletedWithFailures, message: "1 of 2 repositories failed, 1 completed"},
		{name: "campaign, every repository failed", typ: "Campaign", memoPhase: "failed",
			result: workflow.CampaignState{Phase: workflow.CampaignFailed, Message: "2 of 2 repositories failed",
				Summary: workflow.Summary{Total: 2, Failed: 2}, Units: units(workflow.TaskFailed, workflow.TaskFailed)},
			want: state.PhaseFailed, message: "2 of 2 repositories failed"},
		{name: "campaign, aborted", typ: "Campaign", memoPhase: "aborted",
			result: workflow.CampaignState{Phase: workflow.CampaignAborted, Message: "1 of 2 repositories failed, 1 skipped; aborted",
				Summary: workflow.Summary{Total: 2, Failed: 1, Skipped: 1}, Units: units(workflow.TaskFailed, workflow.Skipped)},
			want: state.PhaseAborted, message: "1 of 2 repositories failed, 1 skipped; aborted"},
		{name: "campaign recorded before the final phases, one repository failed", typ: "Campaign", memoPhase: "completed",
			result: workflow.CampaignState{Phase: workflow.CampaignCompleted,
				Summary: workflow.Summary{Total: 2, Completed: 1, Failed: 1}, Units: units(workflow.TaskCompleted, workflow.TaskFailed)},
			want: state.PhaseCompletedWithFailures, message: "1 of 2 repositories failed, 1 completed"},
		{name: "task, every repository completed", typ: "Task",
			result: workflow.TaskResult{Phase: workflow.TaskCompleted, Repositories: []workflow.RepoResult{
				{Name: "a", Status: "success"}, {Name: "b", Status: "skipped"}}},
			want: state.PhaseCompleted, message: "2 repositories completed"},
		{name: "task, one of its repositories failed", typ: "Task",
			result: workflow.TaskResult{Phase: workflow.TaskCompleted, Repositories: []workflow.RepoResult{
				{Name: "a", Status: "success"}, {Name: "b", Status: "failed"}}},
			want: state.PhaseCompletedWithFailures, message: "1 of 2 repositories failed, 1 completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind := "campaign/"
			if c.typ == "Task" {
				kind = "task/"
			}
			memo := map[string]any{statetemporal.MemoID: "x", statetemporal.MemoKind: c.typ, statetemporal.MemoGeneration: int64(1)}
			if c.memoPhase != "" {
				memo[statetemporal.MemoPhase] = c.memoPhase
			}
			r := &statetemporal.Reader{Client: finished{wid: kind + "x", typ: c.typ, memo: memo, result: c.result}}
			got, err := r.Get(t.Context(), "x")
			if err != nil {
				t.Fatal(err)
			}
			if got.Phase != c.want || got.Message != c.message || !got.Phase.Done() {
				t.Errorf("recorded %s (%s), done %t; want %s (%s), done", got.Phase, got.Message, got.Phase.Done(), c.want, c.message)
			}
		})
	}
}
