package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	sdkworkflow "go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestRegenerable: prs update and prs retry make changes again for a
// campaign's units, in pages or not, and say why not for a task.
func TestRegenerable(t *testing.T) {
	if why := dispatch.Regenerable(&status.Run{Campaign: &status.CampaignState{}}); why != "" {
		t.Errorf("a campaign: %q", why)
	}
	if why := dispatch.Regenerable(&status.Run{Task: &status.TaskState{}}); !strings.Contains(why, "single task") {
		t.Errorf("a task: %q", why)
	}
	paged := &status.Run{Campaign: &status.CampaignState{Pages: []status.PageRef{{WorkflowID: "campaign/big/page-1@x"}}}}
	if why := dispatch.Regenerable(paged); why != "" {
		t.Errorf("a campaign in pages: %q", why)
	}
}

// TestRegenerateStartsAnEndedCampaignAgain, on the embedded server with
// a stand-in for the Campaign workflow: a campaign that ended starts
// again with only the units named queued and the others' results kept;
// one that was aborted, or ended without a result (a prune cancels it),
// is not started again, and says why.
func TestRegenerateStartsAnEndedCampaignAgain(t *testing.T) {
	ctx := context.Background()
	c := embedded(t)
	var mu sync.Mutex
	inputs := map[string][]workflow.CampaignInput{}
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		mu.Lock()
		inputs[in.ID] = append(inputs[in.ID], in)
		mu.Unlock()
		st := status.CampaignState{Phase: status.CampaignCompleted}
		if in.ID == "aborted" {
			st.Phase = status.CampaignAborted
		}
		if in.ID == "hanging" {
			return st, sdkworkflow.Await(ctx, func() bool { return false })
		}
		for _, u := range in.Units {
			st.Units = append(st.Units, status.UnitResult{Key: u.Key, Phase: status.TaskCompleted})
		}
		return st, nil
	}, sdkworkflow.RegisterOptions{Name: "Campaign"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	run := func(id string) string {
		wid := "campaign/" + id
		r, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: workflow.TaskQueue}, "Campaign",
			workflow.CampaignInput{ID: id, Units: []workflow.Unit{{Key: "a"}, {Key: "b"}}})
		if err != nil {
			t.Fatal(err)
		}
		if id != "hanging" {
			if err := r.Get(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		return wid
	}

	wid := run("done")
	n, err := dispatch.Regenerate(ctx, c, wid, []string{"b"})
	if err != nil || n != 1 {
		t.Fatalf("Regenerate: %d, %v", n, err)
	}
	var again status.CampaignState
	if err := c.GetWorkflow(ctx, wid, "").Get(ctx, &again); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	second := inputs["done"][len(inputs["done"])-1]
	mu.Unlock()
	if len(inputs["done"]) != 2 || second.Progress == nil || strings.Join(second.Progress.Retry, ",") != "b" ||
		second.Progress.Results["a"].Phase != status.TaskCompleted {
		t.Errorf("started again with %+v, want b queued and a's result kept", second.Progress)
	}

	if _, err := dispatch.Regenerate(ctx, c, run("aborted"), []string{"a"}); err == nil || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("an aborted campaign: %v", err)
	}
	hanging := run("hanging")
	if err := c.CancelWorkflow(ctx, hanging, ""); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d, err := c.DescribeWorkflowExecution(ctx, hanging, "")
		if err == nil && d.WorkflowExecutionInfo.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cancelled campaign did not end")
		}
	}
	if _, err := dispatch.Regenerate(ctx, c, hanging, []string{"a"}); err == nil || !strings.Contains(err.Error(), "ended without a result (canceled)") {
		t.Errorf("a cancelled campaign: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(inputs["aborted"]) != 1 || len(inputs["hanging"]) != 1 {
		t.Errorf("started again: %d aborted, %d cancelled runs; want neither", len(inputs["aborted"]), len(inputs["hanging"]))
	}
}

// TestRegenerateOfAPageAsksItsCampaign, on the embedded server with
// stand-ins: the follower of a page of a campaign run in pages asks for
// changes made again naming the page; the campaign is signalled (it runs
// the page again), not refused as before.
func TestRegenerateOfAPageAsksItsCampaign(t *testing.T) {
	ctx := context.Background()
	c := embedded(t)
	got := make(chan workflow.RegenerateSignal, 1)
	w := worker.New(c, workflow.TaskQueue, worker.Options{})
	page := status.PageID("campaign/big", 0, "abc", 1)
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		cctx := sdkworkflow.WithChildOptions(ctx, sdkworkflow.ChildWorkflowOptions{WorkflowID: page})
		if err := sdkworkflow.ExecuteChildWorkflow(cctx, "CampaignPage", in).Get(ctx, nil); err != nil {
			return status.CampaignState{}, err
		}
		var s workflow.RegenerateSignal
		sdkworkflow.GetSignalChannel(ctx, workflow.SignalRegenerate).Receive(ctx, &s)
		got <- s
		return status.CampaignState{Phase: status.CampaignCompleted}, nil
	}, sdkworkflow.RegisterOptions{Name: "Campaign"})
	w.RegisterWorkflowWithOptions(func(ctx sdkworkflow.Context, in workflow.CampaignInput) (status.CampaignState, error) {
		return status.CampaignState{Phase: status.CampaignCompleted}, nil
	}, sdkworkflow.RegisterOptions{Name: "CampaignPage"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "campaign/big", TaskQueue: workflow.TaskQueue}, "Campaign",
		workflow.CampaignInput{ID: "big"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		d, err := c.DescribeWorkflowExecution(ctx, page, "")
		if err == nil && d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the page did not end")
		}
	}
	if _, err := dispatch.Regenerate(ctx, c, page, []string{"r7"}); err != nil {
		t.Fatalf("Regenerate of a page: %v", err)
	}
	select {
	case s := <-got:
		if strings.Join(s.Units, ",") != "r7" {
			t.Errorf("the campaign was asked to make %v again, want r7", s.Units)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the campaign was not signalled")
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
}
