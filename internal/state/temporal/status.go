package temporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Resolve is the workflow id of the run id names: a workflow id, or a bare
// definition id (its campaign's run, else its task's).
func (r *Reader) Resolve(ctx context.Context, id string) (string, error) {
	candidates := []string{id}
	if !strings.HasPrefix(id, "campaign/") && !strings.HasPrefix(id, "task/") {
		candidates = []string{"campaign/" + id, "task/" + id, id}
	}
	for _, cand := range candidates {
		_, err := r.Client.DescribeWorkflowExecution(ctx, cand, "")
		if err == nil {
			return cand, nil
		}
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			return "", fmt.Errorf("look up %s: %w", cand, err)
		}
	}
	return "", fmt.Errorf("no run %q (tried %s)", id, strings.Join(candidates, ", "))
}

// Runs lists every run that is not a campaign's child or a notification
// message (notify/…), as the namespace lists them (newest first).
func (r *Reader) Runs(ctx context.Context) ([]status.Entry, error) {
	var runs []status.Entry
	var token []byte
	for {
		resp, err := r.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: r.Namespace, PageSize: 200, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.Executions {
			if e.ParentExecution != nil || strings.HasPrefix(e.Execution.WorkflowId, "notify/") {
				continue
			}
			runs = append(runs, entry(e))
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return runs, nil
		}
	}
}

// entry is a run as the list shows it, with what its memo records.
func entry(e *workflowpb.WorkflowExecutionInfo) status.Entry {
	r := status.Entry{
		ID: e.Execution.WorkflowId, RunID: e.Execution.RunId, Workflow: e.Type.Name,
		Status:  statusName(e.Status),
		Started: e.StartTime.AsTime().UTC().Format(time.RFC3339),
	}
	if e.CloseTime != nil && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		r.Closed = e.CloseTime.AsTime().UTC().Format(time.RFC3339)
	}
	memo := e.GetMemo().GetFields()
	for key, dst := range map[string]any{MemoKind: &r.Kind, MemoID: &r.Definition, MemoDigest: &r.Digest, MemoGeneration: &r.Generation, MemoPhase: &r.Phase} {
		if p, ok := memo[key]; ok {
			_ = payload.Converter.FromPayload(p, dst)
		}
	}
	// The phase kept current in the search attributes (a task's
	// awaiting_approval), else as the memo records it (a campaign's
	// paused, or how it ended: completed_with_failures, …), else the
	// workflow's status; a run that failed, was cancelled or terminated
	// is that.
	if phase := searchPhase(e.GetSearchAttributes()); phase != "" {
		r.Phase = phase
	}
	if r.Phase == "" || (e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
		r.Phase = r.Status
	}
	return r
}

// statusName is s as status shows it: running, completed, failed, …
func statusName(s enumspb.WorkflowExecutionStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// searchPhase is the phase a run keeps current in its search attributes
// (status.SearchPhase), "" when it carries none.
func searchPhase(sa *commonpb.SearchAttributes) string {
	var phase string
	if p, ok := sa.GetIndexedFields()[status.SearchPhase]; ok && payload.Converter.FromPayload(p, &phase) == nil {
		return phase
	}
	return ""
}

// Status is the state of the run wid as its workflow records it: what a
// running one answers its status query with, or a completed one's
// result. A run that ended otherwise (failed, cancelled, …) is an error
// saying so.
func (r *Reader) Status(ctx context.Context, wid string) (*status.Run, error) {
	d, err := r.Client.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", wid, err)
	}
	info := d.WorkflowExecutionInfo
	st := &status.Run{ID: wid, Closed: info.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	isCampaign := info.Type.Name == "Campaign"
	if st.Closed && info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		run := r.Client.GetWorkflow(ctx, wid, "")
		if isCampaign {
			var cs status.CampaignState
			err = run.Get(ctx, &cs)
			if err == nil {
				cs, err = r.WithPages(ctx, cs)
			}
			// How it ended, also for a run recorded before campaigns
			// told their endings apart.
			cs = status.Final(cs)
			st.Campaign = &cs
		} else {
			var res status.TaskResult
			err = run.Get(ctx, &res)
			st.Task = &status.TaskState{ID: res.ID, Phase: res.Phase, Final: &res}
		}
		return st, err
	}
	if st.Closed {
		return nil, fmt.Errorf("%s ended %s", wid, statusName(info.Status))
	}
	st, err = r.QueryStatus(ctx, wid, isCampaign)
	if err == nil && st.Campaign != nil {
		*st.Campaign = status.WithRunsProgress(*st.Campaign, RunsProgressOf(d.PendingActivities))
	}
	return st, err
}

// QueryStatus asks the running Campaign (or Task) wid for its state,
// without describing it first as Status does.
func (r *Reader) QueryStatus(ctx context.Context, wid string, isCampaign bool) (*status.Run, error) {
	v, err := r.query(ctx, wid, "")
	if err != nil {
		return nil, fmt.Errorf("query %s (is a worker running?): %w", wid, err)
	}
	st := &status.Run{ID: wid}
	if isCampaign {
		var cs status.CampaignState
		if err = v.Get(&cs); err == nil {
			cs, err = r.WithPages(ctx, cs)
		}
		st.Campaign = &cs
	} else {
		st.Task = &status.TaskState{}
		err = v.Get(st.Task)
	}
	return st, err
}

// UnitTask is the live state of a campaign unit's task while it runs
// (awaiting approval, say), or nil when the unit is not running or its
// task cannot be read.
func (r *Reader) UnitTask(ctx context.Context, u status.UnitResult) *status.TaskState {
	if u.Phase != status.TaskRunning || u.WorkflowID == "" {
		return nil
	}
	st, err := r.Status(ctx, u.WorkflowID)
	if err != nil || st.Task == nil {
		return nil
	}
	return st.Task
}

// UnitPhase is the phase of a campaign's running unit: the one its run
// keeps current in its search attributes, which a description of it
// carries, else the one it answers a query with. Following a run reads
// every running unit each second; a query is a round trip through the
// worker each.
func (r *Reader) UnitPhase(ctx context.Context, u status.UnitResult) (status.TaskPhase, bool) {
	if u.Phase != status.TaskRunning || u.WorkflowID == "" {
		return "", false
	}
	d, err := r.Client.DescribeWorkflowExecution(ctx, u.WorkflowID, "")
	if err != nil {
		return "", false
	}
	if d.WorkflowExecutionInfo.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		if phase := searchPhase(d.WorkflowExecutionInfo.GetSearchAttributes()); phase != "" {
			return status.TaskPhase(phase), true
		}
	}
	if t := r.UnitTask(ctx, u); t != nil {
		return t.Phase, true
	}
	return "", false
}

// Awaiting is the tasks of st that await approval with a result: the
// task, or those of a campaign's running units.
func (r *Reader) Awaiting(ctx context.Context, st *status.Run) []*status.TaskState {
	var tasks []*status.TaskState
	switch {
	case st.Task != nil:
		tasks = append(tasks, st.Task)
	case st.Campaign != nil:
		for _, u := range st.Campaign.Units {
			if t := r.UnitTask(ctx, u); t != nil {
				tasks = append(tasks, t)
			}
		}
	}
	var out []*status.TaskState
	for _, t := range tasks {
		if t.Phase == status.TaskAwaitingApproval && t.Result != nil {
			out = append(out, t)
		}
	}
	return out
}

// WithPages is campaign c with the units of its pages, when it runs them
// in pages (c.Pages): each page that ended as its result says (read
// once), the page at work as it answers its status query, with what its
// runs of units in flight have done.
func (r *Reader) WithPages(ctx context.Context, c status.CampaignState) (status.CampaignState, error) {
	if len(c.Pages) == 0 {
		return c, nil
	}
	// Pages are read several at once: a 10,000-repository campaign has
	// twenty, each a round trip or two and a state of 500 units.
	states := make([]status.CampaignState, len(c.Pages))
	errs := make([]error, len(c.Pages))
	atOnce(len(c.Pages), func(i int) {
		if ref := c.Pages[i]; ref.WorkflowID != "" {
			states[i], errs[i] = r.page(ctx, ref)
		}
	})
	var pages []status.CampaignState
	for i, ref := range c.Pages {
		if ref.WorkflowID == "" {
			continue
		}
		var nf *serviceerror.NotFound
		if !ref.Done && errors.As(errs[i], &nf) {
			// The campaign named the page and is starting it: it
			// holds nothing yet.
			continue
		}
		if errs[i] != nil {
			return c, fmt.Errorf("page %d of %d of %s: %w", i+1, len(c.Pages), c.ID, errs[i])
		}
		pages = append(pages, states[i])
	}
	return status.MergePages(c, pages), nil
}

// readsAtOnce bounds the reads of one run's pages or followers made at
// once.
const readsAtOnce = 8

// atOnce calls read(i) for each i below n, readsAtOnce at a time, and
// returns once every call has.
func atOnce(n int, read func(i int)) {
	sem := make(chan struct{}, readsAtOnce)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			read(i)
		})
	}
	wg.Wait()
}

// page is the state of one page of a campaign.
func (r *Reader) page(ctx context.Context, ref status.PageRef) (status.CampaignState, error) {
	r.mu.Lock()
	st, ok := r.pages[ref.WorkflowID]
	r.mu.Unlock()
	if ok {
		return st, nil
	}
	d, err := r.Client.DescribeWorkflowExecution(ctx, ref.WorkflowID, "")
	if err != nil {
		return st, fmt.Errorf("describe %s: %w", ref.WorkflowID, err)
	}
	switch d.WorkflowExecutionInfo.Status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := r.query(ctx, ref.WorkflowID, "")
		if err != nil {
			return st, fmt.Errorf("query %s (is a worker running?): %w", ref.WorkflowID, err)
		}
		if err := v.Get(&st); err != nil {
			return st, err
		}
		return status.WithRunsProgress(st, RunsProgressOf(d.PendingActivities)), nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		// A page's result (workflow.PageResult) holds its state.
		var res struct {
			State status.CampaignState `json:"state"`
		}
		if err := r.Client.GetWorkflow(ctx, ref.WorkflowID, "").Get(ctx, &res); err != nil {
			return st, fmt.Errorf("read %s: %w", ref.WorkflowID, err)
		}
		r.mu.Lock()
		if r.pages == nil {
			r.pages = map[string]status.CampaignState{}
		}
		r.pages[ref.WorkflowID] = res.State
		r.mu.Unlock()
		return res.State, nil
	}
	return st, fmt.Errorf("%s ended %s", ref.WorkflowID, statusName(d.WorkflowExecutionInfo.Status))
}
