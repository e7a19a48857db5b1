package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// phase is one stretch of a unit's life, measured from workflow histories
// and the agent's result.
type phase struct {
	name string
	took []time.Duration
}

// unitTimes are the moments of one unit, from the campaign's history, the
// Task workflow's history and the agent's result. The moments of local
// activities are the SDK's estimate (the workflow task's start plus the
// worker's time since): they can be off by the task's delivery, tens of
// milliseconds, against the others.
type unitTimes struct {
	initiated    time.Time // campaign: StartChildWorkflowExecutionInitiated
	started      time.Time // child: WorkflowExecutionStarted
	firstTask    time.Time // child: first WorkflowTaskStarted
	provisioned  time.Time // ProvisionSandbox local activity done
	submitted    time.Time // SubmitManifest local activity done
	agentStarted time.Time // result.started_at: the agent picked up the manifest
	agentDone    time.Time // result.completed_at: terminal status written
	waitDone     time.Time // WaitForAgentPhase completed
	cleanedUp    time.Time // CleanupSandbox local activity done
	completed    time.Time // child: WorkflowExecutionCompleted
	recorded     time.Time // campaign: ChildWorkflowExecutionCompleted
}

// printPhases reads the histories of the campaign and its children and
// prints where each unit's time went.
func printPhases(ctx context.Context, w io.Writer, c client.Client, campaignID string, children []string) error {
	initiated, recorded := map[string]time.Time{}, map[string]time.Time{}
	if err := eachEvent(ctx, c, campaignID, func(e *historypb.HistoryEvent) {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			initiated[e.GetStartChildWorkflowExecutionInitiatedEventAttributes().GetWorkflowId()] = e.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED:
			recorded[e.GetChildWorkflowExecutionCompletedEventAttributes().GetWorkflowExecution().GetWorkflowId()] = e.GetEventTime().AsTime()
		}
	}); err != nil {
		return err
	}
	times := make([]unitTimes, len(children))
	errs := make([]error, len(children))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, id := range children {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			times[i], errs[i] = childTimes(ctx, c, id)
			times[i].initiated, times[i].recorded = initiated[id], recorded[id]
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	// Each stretch ends at a mark and starts at the latest earlier mark
	// the unit has (a quick agent has no wait activity).
	phases := []*phase{
		{name: "campaign start -> child started"}, {name: "-> first workflow task"},
		{name: "-> sandbox provisioned (local activity)"}, {name: "-> manifest written (local activity)"},
		{name: "-> agent running it"}, {name: "-> agent done: clone .. push, result"},
		{name: "-> wait activity done"},
		{name: "-> sandbox cleaned up (local activity)"}, {name: "-> child completed"},
		{name: "-> campaign recorded it"}, {name: "total: campaign start -> recorded"},
	}
	for _, t := range times {
		marks := []time.Time{t.initiated, t.started, t.firstTask, t.provisioned, t.submitted, t.agentStarted,
			t.agentDone, t.waitDone, t.cleanedUp, t.completed, t.recorded}
		prev := 0
		for i := 1; i < len(marks); i++ {
			if marks[i].IsZero() {
				continue
			}
			if !marks[prev].IsZero() {
				phases[i-1].took = append(phases[i-1].took, marks[i].Sub(marks[prev]))
			}
			prev = i
		}
		if !t.initiated.IsZero() && !t.recorded.IsZero() {
			phases[len(phases)-1].took = append(phases[len(phases)-1].took, t.recorded.Sub(t.initiated))
		}
	}
	fmt.Fprintf(w, "  per unit (%d units)                           n     mean      p50      p90\n", len(children))
	for _, p := range phases {
		if len(p.took) == 0 {
			continue
		}
		slices.Sort(p.took)
		var sum time.Duration
		for _, d := range p.took {
			sum += d
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		fmt.Fprintf(w, "    %-42s %4d %6.0f ms %6.0f ms %6.0f ms\n", p.name, len(p.took),
			ms(sum/time.Duration(len(p.took))), ms(p.took[len(p.took)/2]), ms(p.took[len(p.took)*9/10]))
	}
	return nil
}

func childTimes(ctx context.Context, c client.Client, id string) (unitTimes, error) {
	var t unitTimes
	dc := converter.GetDefaultDataConverter()
	var err error
	eachErr := eachEvent(ctx, c, id, func(e *historypb.HistoryEvent) {
		at := e.GetEventTime().AsTime()
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			t.started = at
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if t.firstTask.IsZero() {
				t.firstTask = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			t.waitDone = at
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
			t.completed = at
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			details := e.GetMarkerRecordedEventAttributes().GetDetails()
			var data struct {
				ActivityType string
				ReplayTime   time.Time
			}
			if derr := dc.FromPayloads(details["data"], &data); derr != nil {
				err = derr
				return
			}
			switch data.ActivityType {
			case "ProvisionSandbox":
				t.provisioned = data.ReplayTime
			case "SubmitManifest":
				t.submitted = data.ReplayTime
			case "ReadResult":
				var r protocol.Result
				if derr := dc.FromPayloads(details["result"], &r); derr == nil {
					t.agentStarted = r.StartedAt
					if r.CompletedAt != nil {
						t.agentDone = *r.CompletedAt
					}
				}
			case "CleanupSandbox":
				t.cleanedUp = data.ReplayTime
			}
		}
	})
	if eachErr != nil {
		return t, eachErr
	}
	return t, err
}

func eachEvent(ctx context.Context, c client.Client, id string, fn func(*historypb.HistoryEvent)) error {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return fmt.Errorf("history of %s: %w", id, err)
		}
		fn(e)
	}
	return nil
}
