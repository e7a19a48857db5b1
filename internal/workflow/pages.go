package workflow

import (
	"fmt"
	"maps"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Pages. A campaign carries what it has done from one run of its workflow
// to the next (continue-as-new), answers its status query with every
// unit's state and returns them all: each grows with its repositories,
// and Temporal refuses a payload over 2 MiB. So a campaign of more units
// than a page holds (PageSize, 500 by default) runs them a page at a
// time: each page is a child workflow (CampaignPage) that runs its units
// exactly as a campaign of that size does, holds their state and returns
// it, and the campaign keeps, of each page, only where it is and what it
// counted. The campaign's own payloads stay the size of a page:
//
//   - a page starts once the page before it has ended, so MaxParallel,
//     the order of the units and the pull-request budget (its bucket
//     goes from page to page) hold across pages;
//   - the failure threshold counts every unit of the campaign: a page
//     starts from the counts of the pages before it (PageOf.Before),
//     and a pause in a page pauses the campaign (the page tells it,
//     signalPagePhase);
//   - continue, abort, suspend, resume and update go to the page at
//     work as they come; retry-failed too, and the pages that finished
//     with failures run again after it;
//   - once the campaign stops (abort, the threshold's abort, continue
//     --skip-remaining), the pages left run only to mark their units
//     skipped, so that every unit has a page that says what became of
//     it;
//   - status readers read the pages the campaign lists
//     (CampaignState.Pages) and merge them (status.MergePages).
//
// The campaign itself never continues as new: it adds a few events for
// each page, a few hundred for 10,000 repositories.

// DefaultPageSize is PageSize when unset, and the most units any one
// payload about a campaign names (a regenerate's keys too): a page of
// units adds at most a few thousand events to its own history (one child
// task each, a handful of events), within Temporal's 10,240-event
// warning, and its state is a few hundred KiB.
const DefaultPageSize = 500

// signalPagePhase is how a page tells its campaign that it paused or went
// on (pagePhase).
const signalPagePhase = "page-phase"

// pagePhase is the payload of signalPagePhase.
type pagePhase struct {
	Phase   status.CampaignPhase `json:"phase"`
	Message string               `json:"message,omitempty"`
}

// PageOf says that a Campaign input is a page of a campaign.
type PageOf struct {
	// WorkflowID and FirstRunID are the campaign's: the page names its
	// units' tasks and sandboxes after them, as the campaign would.
	WorkflowID string `json:"workflow_id"`
	FirstRunID string `json:"first_run_id"`
	// Index is the page's place among the campaign's pages, from 0.
	Index int `json:"index"`
	// Before counts what the units of the pages before this one did:
	// the failure threshold counts from there.
	Before status.Summary `json:"before"`
	// More: units follow this page, so the failure threshold pauses
	// even after its last unit.
	More bool `json:"more,omitempty"`
	// Previous is the page of the run this one starts again (fleetlift
	// retry): its units start as they ended there, and those that
	// failed run again.
	Previous string `json:"previous,omitempty"`
}

// PageResult is what a page returns: its units' state, and what of its
// progress the campaign carries on to the next page (Progress, without
// its Results, which State.Units holds).
type PageResult struct {
	State    status.CampaignState `json:"state"`
	Progress CampaignProgress     `json:"progress"`
}

// CampaignPage runs one page of a campaign's units (in.Page says which).
func CampaignPage(ctx workflow.Context, in CampaignInput) (PageResult, error) {
	if in.Page != nil && in.Page.Previous != "" && (in.Progress == nil || len(in.Progress.Results) == 0) {
		if err := takePrevious(ctx, &in); err != nil {
			return PageResult{}, err
		}
	}
	c, st, err := runCampaign(ctx, in, CampaignPage)
	if c == nil {
		return PageResult{}, err
	}
	p := *c.p
	p.Results = nil
	return PageResult{State: st, Progress: p}, err
}

// takePrevious starts the page in as its units ended in the page it
// starts again (in.Page.Previous): those units first, as started, the
// failed ones to run again (or those in.Regenerate names); units that
// page did not hold (none, unless the spec changed) after them, not
// started.
func takePrevious(ctx workflow.Context, in *CampaignInput) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: shortTimeout,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 5}})
	var prev status.CampaignState
	if err := workflow.ExecuteActivity(actx, a.ReadPage, in.Page.Previous).Get(ctx, &prev); err != nil {
		return err
	}
	if in.Progress == nil {
		in.Progress = &CampaignProgress{Phase: status.CampaignRunning}
	}
	p := in.Progress
	p.Results = map[string]status.UnitResult{}
	was := map[string]status.UnitResult{}
	for _, u := range prev.Units {
		was[u.Key] = u
	}
	var ran, rest []Unit
	for _, u := range in.Units {
		r, ok := was[u.Key]
		if !ok || r.Phase == status.Skipped {
			rest = append(rest, u)
			continue
		}
		ran = append(ran, u)
		p.Results[u.Key] = r
		regenerating := in.RegenerateOnly || len(in.Regenerate) > 0
		if regenerating && slices.Contains(in.Regenerate, u.Key) || !regenerating && r.HasFailures() {
			p.Retry = append(p.Retry, u.Key)
		}
	}
	in.Units = append(ran, rest...)
	p.Next = len(ran)
	return nil
}

// pageSize is PageSize, DefaultPageSize when unset.
func (in CampaignInput) pageSize() int {
	if in.PageSize > 0 {
		return in.PageSize
	}
	return DefaultPageSize
}

// paged reports whether the campaign whose workflow starts with in runs
// its units in pages: a new campaign (not a page, not a later run) of
// more units than a page holds, or one that starts the pages of an
// earlier run again.
func paged(in CampaignInput) bool {
	return in.Page == nil && in.Progress == nil && (len(in.Units) > in.pageSize() || len(in.Previous) > 0 || in.Pieces > 1)
}

// page is one page of a paged campaign.
type page struct {
	keys []string
	// workflowID is the latest run's; runs counts them.
	workflowID string
	runs       int
	// result is what the latest run returned; nil until one has ended.
	result *PageResult
	// retry lists the units a retry-failed asked to run again ("" for
	// every failed one), once the page has ended; regenerate those whose
	// changes are to be made anew (SignalRegenerate).
	retry, regenerate []string
	// previous is the page of the run this one starts again whose
	// units this one holds.
	previous string
	// seed, until the page starts, is what its units did in the
	// campaign of one page it was (inPages): its first run goes on
	// from there.
	seed *CampaignProgress
}

// pagedRun is a campaign that runs its units in pages.
type pagedRun struct {
	// loop's progress is the campaign's own: phase, stop, suspension,
	// acknowledged failures, the approval records carried out and the
	// pull-request budget between pages; its Results stay empty.
	loop
	in CampaignInput
	// units are the campaign's units by key: the spec's, and those a
	// spec taken in place removed after they started.
	units map[string]Unit
	pages []*page
	// next is the first page never started.
	next int
	// active is the page at work, or -1.
	active int
	// piecesGot of piecesWant pages of units have reached the run
	// (SignalUnits); a spec update in place ends the wait for more.
	piecesGot, piecesWant int
	// awaiting is the piece the run waits for, having run every unit it
	// holds; 0 while it does not wait.
	awaiting int
}

// runPages runs campaign in a page at a time.
func runPages(ctx workflow.Context, in CampaignInput) (status.CampaignState, error) {
	r := newPagedRun(ctx, in, &CampaignProgress{Phase: status.CampaignRunning, Tokens: float64(max(in.Burst, 1)), Refilled: workflow.Now(ctx), Suspended: in.Suspend})
	r.paginate(in.Units, in.Previous)
	r.in.Units, r.in.Previous, r.in.Pieces = nil, nil, 0
	return r.run()
}

// newPagedRun is campaign in, run in pages from progress p, with no page
// yet.
func newPagedRun(ctx workflow.Context, in CampaignInput, p *CampaignProgress) *pagedRun {
	r := &pagedRun{loop: loop{ctx: ctx, search: newSearchAttributes(ctx), p: p}, in: in, units: map[string]Unit{}, active: -1}
	r.handlers = r.addSignalHandlers
	r.piecesGot, r.piecesWant = 1, max(in.Pieces, 1)
	return r
}

// run runs the campaign's pages, answering status queries, until it ends.
func (r *pagedRun) run() (status.CampaignState, error) {
	ctx := r.ctx
	if err := workflow.SetQueryHandler(ctx, status.QueryStatus, func() (status.CampaignState, error) { return r.state(), nil }); err != nil {
		return status.CampaignState{}, err
	}
	for {
		r.drainSignals()
		r.waitWhileSuspended(nil)
		if ctx.Err() != nil {
			return r.finish(), ctx.Err()
		}
		i, ok := r.nextPage()
		if !ok && r.piecesGot < r.piecesWant && !r.p.Stop {
			was := r.message
			r.message = fmt.Sprintf("waiting for pages %d to %d of its units from what started it", r.piecesGot+1, r.piecesWant)
			r.awaiting = r.piecesGot
			arrived := r.awaitPiece(func() int { return r.piecesGot })
			r.message, r.awaiting = was, 0
			if arrived {
				continue
			}
			if ctx.Err() != nil {
				return r.finish(), ctx.Err()
			}
			r.p.Stop = true
			r.p.Stopped = fmt.Sprintf("pages %d to %d of its %d pages of units never reached it: what started it stopped before it had sent them (start the campaign again)",
				r.piecesGot+1, r.piecesWant, r.piecesWant)
			r.message = r.p.Stopped
			continue
		}
		if !ok {
			return r.finish(), nil
		}
		if err := r.runPage(i); err != nil && ctx.Err() == nil {
			// A page that failed as a workflow (not its units: those
			// it records) leaves its units as they were; the
			// campaign says so and stops.
			r.p.Stop = true
			r.p.Stopped = fmt.Sprintf("page %d of %d failed: %s", i+1, len(r.pages), errText(err))
			r.message = r.p.Stopped
		}
	}
}

// paginate makes the pages of units not started yet (after the pages
// that started, or that hold units that did: fixed):
// first as many as previous (the pages of the run this one starts
// again), each holding as many units as that page did and reading what
// they did there, then pages of PageSize units.
func (r *pagedRun) paginate(units []Unit, previous []status.PageRef) {
	r.pages = r.pages[:r.fixed()]
	for _, pl := range planPages(units, previous, r.in.pageSize()) {
		r.addPage(pl)
	}
}

// addPage adds a page of units after the others.
func (r *pagedRun) addPage(pl pagePlan) {
	pg := &page{previous: pl.previous}
	for _, u := range pl.units {
		r.units[u.Key] = u
		pg.keys = append(pg.keys, u.Key)
	}
	r.pages = append(r.pages, pg)
}

// takePiece takes the next page of the run's units (SignalUnits), or a
// piece of the spec update being gathered.
func (r *pagedRun) takePiece(pc UnitsPiece) {
	if r.takeUpdatePiece(pc, r.update) {
		return
	}
	want := r.in.PieceDigests
	if pc.Generation == r.in.Generation && pc.Index >= 1 && pc.Index < r.piecesGot && len(want) >= pc.Index && pc.Digest == want[pc.Index-1] {
		// Sent again by a starter that goes on with the run
		// (dispatch.ResendPieces): taken already.
		return
	}
	if r.piecesGot >= r.piecesWant || pc.Generation != r.in.Generation || pc.Index != r.piecesGot {
		workflow.GetLogger(r.ctx).Warn("a piece of units out of turn", "generation", pc.Generation, "index", pc.Index, "have", r.piecesGot)
		return
	}
	if len(want) >= pc.Index && pc.Index >= 1 && pc.Digest != want[pc.Index-1] {
		// Sent again from a spec whose repositories changed since the
		// start: not the units the run began with.
		workflow.GetLogger(r.ctx).Warn("a piece of units other than the one announced", "index", pc.Index, "digest", pc.Digest, "want", want[pc.Index-1])
		return
	}
	r.piecesGot++
	r.addPage(pagePlan{units: pc.Units, previous: pc.Previous})
	r.in.Regenerate = append(r.in.Regenerate, pc.Regenerate...)
}

// nextPage is the page to run next: a page that ended and has units to
// run again (unless the campaign stopped), else the next page never
// started (which marks its units skipped when the campaign stopped).
func (r *pagedRun) nextPage() (int, bool) {
	if !r.p.Stop {
		for i, pg := range r.pages[:r.next] {
			if len(pg.retry) > 0 || len(pg.regenerate) > 0 {
				return i, true
			}
		}
	}
	if r.next < len(r.pages) {
		r.next++
		return r.next - 1, true
	}
	return 0, false
}

// before counts what the units of the pages other than i that ran did.
func (r *pagedRun) before(i int) status.Summary {
	var s status.Summary
	for j, pg := range r.pages {
		switch {
		case j == i:
		case pg.result != nil:
			s.Add(unitCounts(pg.result.State.Units))
		case pg.seed != nil:
			s.Add(unitCounts(pg.seeded()))
		}
	}
	return s
}

// unitCounts counts units by phase, as the failure threshold does, and
// what their model calls used, as max_cost_per_campaign does.
func unitCounts(units []status.UnitResult) status.Summary {
	var s status.Summary
	for _, u := range units {
		s.Total++
		countUnit(&s, u.Phase)
		s.Use(u.ModelUsage, 1)
	}
	return s
}

// pageInput is the input of page i's next run.
func (r *pagedRun) pageInput(i int) CampaignInput {
	pg := r.pages[i]
	info := workflow.GetInfo(r.ctx)
	in := r.in
	in.Units, in.Regenerate = nil, nil
	in.RegenerateOnly = r.in.RegenerateOnly || len(r.in.Regenerate) > 0
	regenerate := keySet(r.in.Regenerate)
	for _, k := range pg.keys {
		in.Units = append(in.Units, r.units[k])
		if regenerate[k] {
			in.Regenerate = append(in.Regenerate, k)
		}
	}
	in.Suspend = false
	in.Page = &PageOf{WorkflowID: info.WorkflowExecution.ID, FirstRunID: info.FirstRunID, Index: i,
		Before: r.before(i), More: i < len(r.pages)-1 || r.piecesGot < r.piecesWant}
	if pg.result == nil {
		in.Page.Previous = pg.previous
	}
	p := &CampaignProgress{Results: map[string]status.UnitResult{}, Phase: status.CampaignRunning,
		Tokens: r.p.Tokens, Refilled: r.p.Refilled, Suspended: r.p.Suspended, Acknowledged: r.p.Acknowledged, CostContinued: r.p.CostContinued,
		Applied: slices.Clone(r.p.Applied), UnitTime: r.p.UnitTime, UnitsTimed: r.p.UnitsTimed,
		Stop: r.p.Stop, Stopped: r.p.Stopped}
	if pg.result != nil {
		// A page run again: its units as they ended, those asked for
		// to run again.
		for _, u := range pg.result.State.Units {
			p.Results[u.Key] = u
		}
		p.Next = len(in.Units)
		for _, u := range in.Units {
			if res, ok := p.Results[u.Key]; ok && res.HasFailures() && (slices.Contains(pg.retry, "") || slices.Contains(pg.retry, u.Key)) {
				p.Retry = append(p.Retry, u.Key)
			}
		}
		p.Retry = append(p.Retry, regenerable(p, nil, pg.regenerate)...)
	} else if pg.seed != nil {
		// Its units as they were when the campaign went on in pages:
		// those started first (Next), those to run again queued.
		p.Results = maps.Clone(pg.seed.Results)
		p.Next = min(pg.seed.Next, len(in.Units))
		p.Retry, p.Requeued = slices.Clone(pg.seed.Retry), slices.Clone(pg.seed.Requeued)
	}
	in.Progress = p
	return in
}

// runPage runs page i to its end, handing it the signals the campaign
// takes meanwhile, and takes in what it did.
func (r *pagedRun) runPage(i int) error {
	pg := r.pages[i]
	in := r.pageInput(i)
	pg.retry, pg.regenerate, pg.seed = nil, nil, nil
	pg.runs++
	info := workflow.GetInfo(r.ctx)
	id := status.PageID(info.WorkflowExecution.ID, i, shortRunID(info.FirstRunID), pg.runs)
	pg.workflowID = id
	digest, _ := workflow.GetTypedSearchAttributes(r.ctx).GetKeyword(SearchSpecDigest)
	memo := childMemo(r.ctx, r.in.ID, r.in.ID, r.in.Generation)
	memo[status.MemoKind] = kindPage
	var sa temporal.SearchAttributes
	if r.search.on {
		sa = StartAttributes(kindPage, r.in.ID, r.in.ID, digest, string(status.CampaignRunning))
	}
	cctx := workflow.WithChildOptions(r.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		RetryPolicy:           &temporal.RetryPolicy{MaximumAttempts: 1},
		Memo:                  memo,
		TypedSearchAttributes: sa,
	})
	f := workflow.ExecuteChildWorkflow(cctx, CampaignPage, in)
	r.active = i
	defer func() { r.active = -1 }()
	done := false
	sel := workflow.NewSelector(r.ctx)
	r.addSignalHandlers(sel)
	sel.AddFuture(f, func(workflow.Future) { done = true })
	for !done {
		sel.Select(r.ctx)
	}
	var res PageResult
	if err := f.Get(r.ctx, &res); err != nil {
		return err
	}
	pg.result = &res
	pg.keys = pg.keys[:0]
	for _, u := range res.State.Units {
		pg.keys = append(pg.keys, u.Key)
	}
	// What goes on from page to page.
	q := res.Progress
	r.p.Tokens, r.p.Refilled = q.Tokens, q.Refilled
	r.p.Acknowledged, r.p.CostContinued = q.Acknowledged, q.CostContinued
	r.p.UnitTime, r.p.UnitsTimed = q.UnitTime, q.UnitsTimed
	r.p.Applied = mergeApplied(r.p.Applied, q.Applied)
	if q.Stop && !r.p.Stop {
		r.p.Stop, r.p.Stopped = true, q.Stopped
		if q.Phase == status.CampaignAborted {
			r.p.Phase = status.CampaignAborted
		}
	}
	if r.p.Phase == status.CampaignPaused {
		r.p.Phase = status.CampaignRunning
		r.message = ""
		r.upsertPhase()
	}
	return nil
}

// mergeApplied is a with the records of b it lacks, in order.
func mergeApplied(a, b []string) []string {
	for _, rec := range b {
		if !slices.Contains(a, rec) {
			a = append(a, rec)
		}
	}
	return a
}

// kindPage is the kind of a campaign's pages, in their memo and search
// attributes.
const kindPage = "CampaignPage"

// forward hands the page at work, if any, signal name with arg.
func (r *pagedRun) forward(name string, arg any) {
	if r.active < 0 {
		return
	}
	f := workflow.SignalExternalWorkflow(r.ctx, r.pages[r.active].workflowID, "", name, arg)
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("hand a signal to the page at work", "signal", name, "error", err)
		}
	})
}

// addSignalHandlers handles the campaign's signals, each also handed to
// the page at work, and the pages' news of their phase.
func (r *pagedRun) addSignalHandlers(sel workflow.Selector) {
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalContinue), func(ch workflow.ReceiveChannel, _ bool) {
		var s ContinueSignal
		ch.Receive(r.ctx, &s)
		if !forThisRun(r.ctx, r.in.Generation, SignalContinue, s.Generation) || !applyOnce(r.ctx, r.p, s.Record) {
			return
		}
		if s.SkipRemaining {
			r.p.Stop = true
			r.message = "continued with --skip-remaining"
			r.p.Stopped = r.message
		} else {
			r.message = ""
		}
		if r.active < 0 {
			before := r.before(-1)
			r.p.Acknowledged = before.Failed
			spent := func() *protocol.ModelUsage { return before.ModelUsage }
			if costOver(r.in.MaxCostUSD, r.p.CostContinued, spent) != "" {
				r.p.CostContinued = r.in.MaxCostUSD
			}
		}
		if r.p.Phase == status.CampaignPaused {
			r.p.Phase = status.CampaignRunning
			r.upsertPhase()
		}
		r.forward(SignalContinue, s)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalAbort), func(ch workflow.ReceiveChannel, _ bool) {
		var s RecordSignal
		ch.Receive(r.ctx, &s)
		if !forThisRun(r.ctx, r.in.Generation, SignalAbort, s.Generation) || !applyOnce(r.ctx, r.p, s.Record) {
			return
		}
		r.p.Stop = true
		r.p.Phase = status.CampaignAborted
		r.message = "aborted"
		if s.Record != "" {
			r.message += " by " + s.Record
		}
		r.p.Stopped = r.message
		r.forward(SignalAbort, s)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalRetryFailed), func(ch workflow.ReceiveChannel, _ bool) {
		var s RecordSignal
		ch.Receive(r.ctx, &s)
		if !forThisRun(r.ctx, r.in.Generation, SignalRetryFailed, s.Generation) || !applyOnce(r.ctx, r.p, s.Record) {
			return
		}
		for i, pg := range r.pages[:r.next] {
			if i == r.active || pg.result == nil || (s.Unit != "" && !slices.Contains(pg.keys, s.Unit)) {
				continue
			}
			for _, u := range pg.result.State.Units {
				if u.HasFailures() && (s.Unit == "" || u.Key == s.Unit) {
					pg.retry = append(pg.retry, s.Unit)
					break
				}
			}
		}
		r.retrySeeded(func(u status.UnitResult) bool { return u.HasFailures() && (s.Unit == "" || u.Key == s.Unit) })
		r.forward(SignalRetryFailed, s)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalRegenerate), func(ch workflow.ReceiveChannel, _ bool) {
		var s RegenerateSignal
		ch.Receive(r.ctx, &s)
		// A page that ended runs those of its units again; the page at
		// work takes the signal itself; units of pages not started yet
		// will be made on their bases as they are then.
		for i, pg := range r.pages[:r.next] {
			if i == r.active || pg.result == nil {
				continue
			}
			for _, k := range s.Units {
				if slices.Contains(pg.keys, k) && !slices.Contains(pg.regenerate, k) {
					pg.regenerate = append(pg.regenerate, k)
				}
			}
		}
		for _, pg := range r.pages[r.next:r.fixed()] {
			pg.seed.Retry = append(pg.seed.Retry, regenerable(pg.seed, nil, s.Units)...)
		}
		r.forward(SignalRegenerate, s)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalSuspend), func(ch workflow.ReceiveChannel, _ bool) {
		ch.Receive(r.ctx, nil)
		r.p.Suspended = true
		r.forward(SignalSuspend, nil)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalResume), func(ch workflow.ReceiveChannel, _ bool) {
		ch.Receive(r.ctx, nil)
		r.p.Suspended = false
		r.forward(SignalResume, nil)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalUpdate), func(ch workflow.ReceiveChannel, _ bool) {
		var u UpdateSignal
		ch.Receive(r.ctx, &u)
		r.takeUpdate(u, r.update)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, SignalUnits), func(ch workflow.ReceiveChannel, _ bool) {
		var pc UnitsPiece
		ch.Receive(r.ctx, &pc)
		r.takePiece(pc)
	})
	sel.AddReceive(workflow.GetSignalChannel(r.ctx, signalPagePhase), func(ch workflow.ReceiveChannel, _ bool) {
		var ph pagePhase
		ch.Receive(r.ctx, &ph)
		if r.p.Phase == status.CampaignAborted {
			return
		}
		r.p.Phase, r.message = ph.Phase, ph.Message
		r.upsertPhase()
	})
}

// update takes a new spec in place: the units of pages that started stay
// in them (the page at work is handed the new spec for its own units),
// and the units not in any of them make the pages not started yet.
func (r *pagedRun) update(u UpdateSignal) {
	in := u.Input
	// The new spec lists every unit: the pieces of the old one still
	// on their way are not waited for.
	r.piecesWant = r.piecesGot
	inSpec := map[string]bool{}
	for _, nu := range in.Units {
		inSpec[nu.Key] = true
	}
	started := map[string]bool{}
	for _, pg := range r.pages[:r.fixed()] {
		if pg.seed != nil {
			pg.keys = pg.dropUnstarted(inSpec)
		}
		for _, k := range pg.keys {
			started[k] = true
		}
	}
	var rest []Unit
	for _, nu := range in.Units {
		r.units[nu.Key] = nu
		if !started[nu.Key] {
			rest = append(rest, nu)
		}
	}
	if r.active >= 0 {
		// The page at work takes the new spec for its own units: those
		// of them the spec removed that have not started, it drops.
		pin := in
		pin.Units = nil
		for _, k := range r.pages[r.active].keys {
			if nu, ok := findUnit(in.Units, k); ok {
				pin.Units = append(pin.Units, nu)
			}
		}
		pin.Page = nil
		r.forward(SignalUpdate, UpdateSignal{Input: pin})
	}
	r.paginate(rest, nil)
	r.in.takeSettings(in)
	if len(u.Memo) > 0 {
		if err := workflow.UpsertMemo(r.ctx, u.Memo); err != nil {
			workflow.GetLogger(r.ctx).Error("record updated spec", "error", err)
		}
		digest, _ := u.Memo[status.MemoDigest].(string)
		r.search.setDigest(r.ctx, digest)
	}
}

// summary counts the repositories of the pages that ran, with every
// repository of the campaign in Total.
func (r *pagedRun) summary() status.Summary {
	var s status.Summary
	for _, pg := range r.pages {
		for _, k := range pg.keys {
			s.Total += max(len(r.units[k].Repositories), 1)
		}
		if pg.result != nil {
			t := s.Total
			s.Add(pg.result.State.Summary)
			s.Total = t
		}
		for _, u := range pg.seeded() {
			s.Count(u, max(len(r.units[u.Key].Repositories), 1), 1)
		}
	}
	return s
}

// state is the campaign's state without its units: where each page is,
// and the counts of those that ended.
func (r *pagedRun) state() status.CampaignState {
	st := status.CampaignState{ID: r.in.ID, Phase: r.p.Phase, Summary: r.summary(), Message: r.message,
		Suspended: r.p.Suspended, Applied: slices.Clone(r.p.Applied), AwaitingPieces: r.awaiting}
	for i, pg := range r.pages {
		n := 0
		for _, k := range pg.keys {
			n += max(len(r.units[k].Repositories), 1)
		}
		st.Pages = append(st.Pages, status.PageRef{WorkflowID: pg.workflowID, Units: len(pg.keys), Repositories: n,
			Done: pg.result != nil && i != r.active})
	}
	return st
}

// finish settles the campaign's final phase and message from what its
// pages did.
func (r *pagedRun) finish() status.CampaignState {
	s := r.summary()
	r.p.Phase = status.FinalPhase(r.p.Phase, s)
	if r.piecesGot < r.piecesWant && r.p.Phase != status.CampaignAborted {
		// Units it never received did not run.
		r.p.Phase = status.CampaignFailed
	}
	r.message = status.FinalMessage(s, r.p.Stopped)
	r.upsertPhase()
	return r.state()
}
