package dispatch

import (
	"context"
	"fmt"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// startCampaign starts a Campaign workflow with in, a page of units at a
// time when it runs in pages (workflow.Split): the start carries the
// first page's, and the run it started is signalled the others, in
// order, before this returns.
func startCampaign(ctx context.Context, c client.Client, so client.StartWorkflowOptions, in workflow.CampaignInput) (client.WorkflowRun, error) {
	head, pieces := workflow.Split(in)
	run, err := Execute(ctx, c, so, workflow.Campaign, head)
	if err != nil {
		return nil, err
	}
	return run, sendPieces(ctx, c, so.ID, run.GetRunID(), pieces)
}

// sendPieces signals run runID of workflow id (its current run when
// runID is empty) each of pieces, in order.
func sendPieces(ctx context.Context, c client.Client, id, runID string, pieces []workflow.UnitsPiece) error {
	for _, pc := range pieces {
		if err := c.SignalWorkflow(ctx, id, runID, workflow.SignalUnits, pc); err != nil {
			return fmt.Errorf("%s: hand it page %d of %d of its units: %w (a campaign missing pages of units fails once it has run the others)",
				id, pc.Index+1, len(pieces)+1, err)
		}
	}
	return nil
}

// ResendPieces sends the running campaign rec, run in pages, the pages
// of its units from the one it waits for (rec.AwaitingPieces) on: its
// starter stopped before it had sent them all. They are made from d as
// StartRun made them; when they are not the ones its start announced
// (the repositories changed since, or a retry started it), none is sent
// and the error says so: the run then fails once it has waited, and a
// new run must start.
func (t *Temporal) ResendPieces(ctx context.Context, d spec.Definition, rec state.Campaign) error {
	s, err := workflow.ForDefinition(d, t.Options)
	if err != nil {
		return err
	}
	if s.Campaign == nil {
		return fmt.Errorf("%s: only a campaign takes its units in pages", d.ID)
	}
	in := *s.Campaign
	in.Generation = rec.Generation
	head, pieces := workflow.Split(in)
	from := rec.AwaitingPieces
	if from < 1 || from > len(pieces) {
		return fmt.Errorf("%s: it waits for page %d of its units; its spec has %d", rec.WorkflowID, from+1, len(pieces)+1)
	}
	started, err := startInput(ctx, t.Client, rec.WorkflowID, rec.RunID)
	if err != nil {
		return err
	}
	if !slices.Equal(started.PieceDigests, head.PieceDigests) {
		return fmt.Errorf("%s: pages %d to %d of its units never reached it, and its spec no longer makes the ones it started with (its repositories changed, or a retry started it): start it again",
			rec.WorkflowID, from+1, len(pieces)+1)
	}
	return sendPieces(ctx, t.Client, rec.WorkflowID, rec.RunID, pieces[from-1:])
}

// startInput is the input run runID of workflow id started with (its
// current run's when runID is empty): its first page of units, when it
// runs in pages.
func startInput(ctx context.Context, c client.Client, id, runID string) (workflow.CampaignInput, error) {
	return readStart(c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT), id)
}

// readStart decodes the input of the run whose history it reads, from
// its first event; it leaves it at the next.
func readStart(it client.HistoryEventIterator, id string) (workflow.CampaignInput, error) {
	var in workflow.CampaignInput
	if !it.HasNext() {
		return in, fmt.Errorf("%s has no history", id)
	}
	ev, err := it.Next()
	if err != nil {
		return in, err
	}
	attrs := ev.GetWorkflowExecutionStartedEventAttributes()
	if attrs == nil || attrs.Input == nil || len(attrs.Input.Payloads) != 1 {
		return in, fmt.Errorf("%s: cannot read the campaign's input", id)
	}
	if err := payload.Converter.FromPayload(attrs.Input.Payloads[0], &in); err != nil {
		return in, fmt.Errorf("%s: decode input: %w", id, err)
	}
	return in, nil
}

// lastInput is the input campaign id's last run started with, its units
// whole: the start's, and the pages of units signalled after it.
func lastInput(ctx context.Context, c client.Client, id string) (workflow.CampaignInput, error) {
	it := c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	in, err := readStart(it, id)
	if err != nil || in.Pieces <= 1 {
		return in, err
	}
	var pieces []workflow.UnitsPiece
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return in, fmt.Errorf("%s: read history: %w", id, err)
		}
		sig := ev.GetWorkflowExecutionSignaledEventAttributes()
		if sig == nil || sig.GetSignalName() != workflow.SignalUnits || len(sig.GetInput().GetPayloads()) != 1 {
			continue
		}
		var pc workflow.UnitsPiece
		if err := payload.Converter.FromPayload(sig.GetInput().GetPayloads()[0], &pc); err != nil {
			return in, fmt.Errorf("%s: decode a page of its units: %w", id, err)
		}
		pieces = append(pieces, pc)
	}
	whole, err := workflow.Join(in, pieces)
	if err != nil {
		return in, fmt.Errorf("%s: %w", id, err)
	}
	return whole, nil
}
