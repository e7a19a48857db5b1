package workflow

import (
	"fmt"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Unit is one child task of a campaign: a repository, or a group of
// repositories that run together.
type Unit struct {
	Key          string                `json:"key"`
	Repositories []protocol.Repository `json:"repositories"`
	// Parallel is how many of a group's repositories its agent works on
	// at once (Manifest.Parallel).
	Parallel int `json:"parallel,omitempty"`
}

// CampaignInput is a Campaign workflow's input. Template is the task each
// unit runs, without repositories; children get Template with their unit's
// repositories. Progress is empty on the first run and carries the state
// across continue-as-new.
type CampaignInput struct {
	ID        string
	Template  TaskInput
	Units     []Unit
	BatchSize int
	// StrictBatches starts BatchSize units together and the next batch
	// once all of them have finished. Otherwise units run as a sliding
	// window: MaxParallel at once, the next starting as soon as one
	// finishes, the failure threshold checked as each finishes.
	StrictBatches bool
	MaxParallel   int
	// ThresholdPercent: when more than this share of finished units
	// failed, the campaign pauses (FailureAction "pause") or stops
	// starting units ("abort").
	ThresholdPercent int
	FailureAction    string
	// MaxCostUSD, when above zero, pauses the campaign once its units'
	// model calls cost that many US dollars, or their cost cannot be
	// counted (max_cost_per_campaign).
	MaxCostUSD float64 `json:",omitempty"`
	// PullRequestsPerHour and Burst bound how fast units that may open a
	// pull request start (transform mode).
	PullRequestsPerHour int
	Burst               int
	// MaxPendingChecks, when above zero, holds units that may open a
	// pull request back while that many of the campaign's open pull
	// requests have checks pending (max_pending_checks).
	MaxPendingChecks int `json:",omitempty"`
	// HistoryLimit is the history length after which the campaign
	// continues as new at the next batch boundary (default 8,000: well
	// under Temporal's 10,000-event warning).
	HistoryLimit int
	// UnitsPerRun is how many units one run starts before it continues as
	// new at the next batch boundary (default 500: each unit adds a few
	// events to the campaign's history).
	UnitsPerRun int
	// Suspend starts the campaign suspended (the spec's suspend).
	Suspend bool
	// Generation is the generation of the spec the run carries out (the
	// memo's MemoGeneration; an update in place brings the next one). A
	// continue, abort or retry-failed naming another generation is
	// ignored. Zero (a run started before generations were passed in)
	// takes every signal.
	Generation int64
	// PageSize is how many units a page of a campaign holds (default
	// 500; see pages.go): a campaign of more runs them in pages.
	PageSize int `json:",omitempty"`
	// Page is set when the input is a page of a campaign (CampaignPage).
	Page *PageOf `json:",omitempty"`
	// Previous lists the pages of the run of a paged campaign that this
	// one starts again (fleetlift retry): Units hold their units in
	// their order, each page's first, and each page reads what its units
	// did there and runs the failed ones again, or, when Regenerate is
	// set, those it names.
	Previous []status.PageRef `json:",omitempty"`
	// Regenerate names the units whose changes the pages of a campaign
	// started again (Previous) make anew (keep_current, a reopen),
	// instead of running the failed ones again.
	Regenerate []string `json:",omitempty"`
	// RegenerateOnly says that the run starts pages again to make
	// changes anew, not to run failed units again, even on a page none
	// of whose units Regenerate names (Split sends each page its own).
	RegenerateOnly bool `json:",omitempty"`
	// Pieces, when above one, is how many pages of units the campaign
	// has in all: Units (and Previous, Regenerate) hold the first
	// page's, and SignalUnits brings the others (Split).
	Pieces int `json:",omitempty"`
	// PieceDigests are the digests of pieces 1 to Pieces-1 (Split): a
	// piece sent again, by a starter that stopped before it had sent
	// them all (ResendPieces), is taken only if it is the same.
	PieceDigests []string `json:",omitempty"`
	Progress     *CampaignProgress
}

// CampaignProgress is what a campaign has done so far.
type CampaignProgress struct {
	Next    int                          `json:"next"`
	Results map[string]status.UnitResult `json:"results"`
	Phase   status.CampaignPhase         `json:"phase"`
	// Tokens and Refilled are the pull-request budget's bucket.
	Tokens   float64   `json:"tokens"`
	Refilled time.Time `json:"refilled"`
	// Retry lists units to run again (retry-failed).
	Retry []string `json:"retry,omitempty"`
	// Stop is set by abort and continue --skip-remaining: no more units
	// start.
	Stop bool `json:"stop,omitempty"`
	// Runs counts continue-as-new generations.
	Runs int `json:"runs"`
	// Started counts units started in this run.
	Started int `json:"started"`
	// Acknowledged is the number of failures a human has seen and
	// continued past: the campaign pauses again only on new ones.
	Acknowledged int `json:"acknowledged,omitempty"`
	// CostContinued is the max_cost_per_campaign a human continued past:
	// the campaign pauses for its cost again only at a higher one.
	CostContinued float64 `json:"cost_continued,omitempty"`
	// Suspended: no unit starts until resumed.
	Suspended bool `json:"suspended,omitempty"`
	// Applied lists the approval records carried out, so that a record
	// still in Git is never carried out twice.
	Applied []string `json:"applied,omitempty"`
	// Stopped says why no more units start (abort, the failure
	// threshold's abort, continue --skip-remaining), for the final
	// message.
	Stopped string `json:"stopped,omitempty"`
	// Requeued lists units a run of units gave back before starting
	// them: they start first, as if never taken.
	Requeued []string `json:"requeued,omitempty"`
	// UnitTime is the time the UnitsTimed units that ran in runs of
	// units worked in all: how many more a run takes (runLength).
	UnitTime   time.Duration `json:"unit_time,omitempty"`
	UnitsTimed int           `json:"units_timed,omitempty"`
}

// Campaign runs a campaign's units, those that need no decision on their
// way as activities of its own (directUnit; in runs of several in the
// sliding window, runs.go) and the others as child Task workflows:
// MaxParallel at once, the next starting as soon as one finishes, or,
// with StrictBatches, in batches of BatchSize that each wait for their
// slowest unit.
func Campaign(ctx workflow.Context, in CampaignInput) (status.CampaignState, error) {
	if paged(in) {
		return runPages(ctx, in)
	}
	c, st, err := runCampaign(ctx, in, Campaign)
	if c != nil && c.repage && err == nil {
		return c.inPages().run()
	}
	return st, err
}

// runCampaign runs the units of in, a campaign or one of its pages,
// whose workflow is self (what it continues as new as). It returns the
// run and its final state, or no run when it continues as new.
func runCampaign(ctx workflow.Context, in CampaignInput, self any) (*campaignRun, status.CampaignState, error) {
	c := newCampaignRun(ctx, in)
	if err := workflow.SetQueryHandler(ctx, status.QueryStatus, func() (status.CampaignState, error) { return c.state(), nil }); err != nil {
		return nil, status.CampaignState{}, err
	}
	// The unit at work in a cancelled run of units goes on, unless the
	// campaign itself was cancelled.
	if err := workflow.SetQueryHandler(ctx, activity.QueryUnitGoesOn, func() (bool, error) { return ctx.Err() == nil, nil }); err != nil {
		return nil, status.CampaignState{}, err
	}
	if c.p.Runs == 0 && opensPullRequests(in.Template) {
		// What becomes of its pull requests is followed beside it, and
		// after it.
		follow(ctx)
	}
	for {
		c.drainSignals()
		if c.repage {
			// No unit is at work: the campaign goes on in pages
			// (Campaign).
			return c, status.CampaignState{}, nil
		}
		// A spec that makes it pages is not held back by a suspension:
		// the campaign goes on in pages, suspended.
		c.waitWhileSuspended(func() bool { return c.repage })
		if ctx.Err() != nil {
			return c, c.finish(), ctx.Err()
		}
		ended := c.p.Stop || len(c.p.Retry) == 0 && c.p.Next >= len(c.in.Units) && (!c.sliding() || len(c.p.Requeued) == 0)
		if ended && c.incoming != nil && !c.p.Stop {
			// An update on its way may bring units to run.
			c.awaitUpdate()
			continue
		}
		if c.sliding() {
			if ended {
				return c, c.finish(), nil
			}
			c.runWindow()
		} else {
			switch {
			case len(c.p.Retry) > 0:
				keys := c.p.Retry
				c.p.Retry = nil
				c.runBatch(keys)
			case ended:
				return c, c.finish(), nil
			default:
				end := min(c.p.Next+c.batchSize(), len(c.in.Units))
				var keys []string
				for _, u := range c.in.Units[c.p.Next:end] {
					keys = append(keys, u.Key)
				}
				c.p.Next = end
				c.runBatch(keys)
			}
		}
		if ctx.Err() != nil {
			return c, c.finish(), ctx.Err()
		}
		c.checkThreshold()
		c.checkBudget()
		pending := c.p.Next < len(c.in.Units)
		if c.sliding() {
			pending = (pending || len(c.p.Retry) > 0 || len(c.p.Requeued) > 0) && !c.p.Stop
		}
		if pending && c.shouldContinueAsNew() {
			// An update whose pieces are still arriving is taken
			// before the run continues as new, which would drop it.
			c.awaitUpdate()
			if c.repage {
				continue
			}
			c.p.Runs++
			c.p.Started = 0
			next := c.in
			next.Progress = c.p
			return nil, status.CampaignState{}, workflow.NewContinueAsNewError(ctx, self, next)
		}
	}
}

// awaitUpdate waits for the pieces of the update being gathered, if any,
// up to piecesWait; an update still missing some then is dropped, and
// says so.
func (c *campaignRun) awaitUpdate() {
	for c.incoming != nil && c.awaitPiece(func() int {
		if c.incoming == nil {
			return -1
		}
		return len(c.incoming.pieces)
	}) {
	}
	if a := c.incoming; a != nil {
		c.incoming = nil
		c.message = fmt.Sprintf("the spec update of generation %d was dropped: %d of its %d pages of units reached the campaign", a.update.Input.Generation, len(a.pieces)+1, a.update.Input.Pieces)
		workflow.GetLogger(c.ctx).Error(c.message)
	}
}

// root is the workflow id and first run id of the campaign: its own, or,
// for a page, its campaign's. Its units' tasks and sandboxes are named
// after them.
func (c *campaignRun) root() (workflowID, firstRunID string) {
	if c.in.Page != nil {
		return c.in.Page.WorkflowID, c.in.Page.FirstRunID
	}
	info := workflow.GetInfo(c.ctx)
	return info.WorkflowExecution.ID, info.FirstRunID
}

// loop is what a campaign's run and a paged campaign's share: its
// context, its progress, the message status shows, its search attributes
// and its signal handlers, with what waits on them.
type loop struct {
	ctx     workflow.Context
	p       *CampaignProgress
	message string
	// search keeps the run's search attributes current.
	search *searchAttributes
	// handlers adds the run's signal handlers to a selector.
	handlers func(workflow.Selector)
	// incoming is a spec update whose pieces are still arriving.
	incoming *assembly
}

// drainSignals handles the signals that arrived while nothing took them.
func (l *loop) drainSignals() {
	for {
		sel := workflow.NewSelector(l.ctx)
		l.handlers(sel)
		if !sel.HasPending() {
			return
		}
		sel.Select(l.ctx)
	}
}

// waitWhileSuspended blocks, handling signals, until the campaign is
// resumed, stopped or cancelled, or leave (when set) reports true.
func (l *loop) waitWhileSuspended(leave func() bool) {
	if !l.p.Suspended {
		return
	}
	l.message = suspendedMessage
	sel := workflow.NewSelector(l.ctx)
	l.handlers(sel)
	sel.AddReceive(l.ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	for l.p.Suspended && !l.p.Stop && l.ctx.Err() == nil && (leave == nil || !leave()) {
		sel.Select(l.ctx)
	}
	if l.message == suspendedMessage {
		l.message = ""
	}
}

// upsertPhase records the phase in the memo and search attributes.
func (l *loop) upsertPhase() {
	_ = workflow.UpsertMemo(l.ctx, map[string]any{status.MemoPhase: string(l.p.Phase)})
	l.search.setPhase(l.ctx, string(l.p.Phase))
}

type campaignRun struct {
	loop
	in    CampaignInput
	units map[string]Unit
	// running says, for each unit running, whether it runs as an
	// activity (directUnit) rather than a child workflow.
	running map[string]bool
	// runsInFlight counts the runs of units working; gates are their
	// gates, in the order they started.
	runsInFlight int
	gates        []*runGate
	// queued holds, for each unit taken into a run of units and not
	// heard of since, its result before: what it is again should the
	// run give it back unstarted.
	queued map[string]*status.UnitResult
	// rev counts the spec's updates in place during this run of the
	// workflow: a run of units made before one starts no further unit.
	rev int
	// pendingChecks is the count of open pull requests with checks
	// pending read at checksRead (max_pending_checks); holdMessage says
	// why units are held back, "" while they are not.
	pendingChecks int
	checksRead    time.Time
	holdMessage   string
	// repage: a spec taken in place gave the campaign more units than
	// a page holds. No unit starts; once none is at work the campaign
	// goes on in pages (inPages), so that what it carries stays the
	// size of a page.
	repage bool
}

func newCampaignRun(ctx workflow.Context, in CampaignInput) *campaignRun {
	p := in.Progress
	if p == nil {
		p = &CampaignProgress{Results: map[string]status.UnitResult{}, Phase: status.CampaignRunning, Tokens: float64(max(in.Burst, 1)), Refilled: workflow.Now(ctx), Suspended: in.Suspend}
	}
	if p.Results == nil {
		p.Results = map[string]status.UnitResult{}
	}
	in.Progress = nil
	units := make(map[string]Unit, len(in.Units))
	for _, u := range in.Units {
		units[u.Key] = u
	}
	c := &campaignRun{loop: loop{ctx: ctx, p: p, search: newSearchAttributes(ctx)}, in: in, units: units, running: map[string]bool{},
		queued: map[string]*status.UnitResult{}}
	c.handlers = c.addSignalHandlers
	return c
}

// sliding reports whether units start as others finish, unless the
// campaign asks for strict batches.
func (c *campaignRun) sliding() bool {
	return !c.in.StrictBatches
}

// runWindow starts units, retried ones first, keeping MaxParallel
// running, until none is left to start or starting must stop (stop,
// suspend, the failure threshold, continue-as-new); it returns once none
// is running.
func (c *campaignRun) runWindow() {
	sel := workflow.NewSelector(c.ctx)
	// A stop or a suspension closes the gates of the runs of units in
	// flight as it comes (closeGates), not once a unit has finished.
	c.addSignalHandlers(sel)
	inFlight := 0
	// waking is set while a timer is on sel to read the checks again.
	waking := false
	for {
		for inFlight < max(c.in.MaxParallel, 1) && c.mayStart() {
			key, ok := c.startableKey()
			if !ok {
				break
			}
			if c.holdForChecks() {
				c.wakeToCheck(sel, &waking)
				break
			}
			c.waitForBudget()
			if !c.mayStart() {
				break
			}
			c.takeKey(key)
			inFlight++
			if directUnit(c.in.Template.Manifest) {
				keys := c.takeRun(key)
				c.runsInFlight++
				sel.AddFuture(c.startRun(keys), func(f workflow.Future) {
					inFlight--
					c.runsInFlight--
					c.recordRun(keys, f)
				})
				continue
			}
			f := c.startUnit(key)
			sel.AddFuture(f, func(f workflow.Future) {
				inFlight--
				c.record(key, f)
			})
		}
		if inFlight == 0 && (!waking || !c.mayStart()) {
			return
		}
		sel.Select(c.ctx)
		c.drainSignals()
		c.closeGates()
	}
}

// checksRoom is how many more units may start before max_pending_checks
// holds them back, as last counted; without it, as many as there are.
func (c *campaignRun) checksRoom() int {
	if c.in.MaxPendingChecks <= 0 || !opensPullRequests(c.in.Template) {
		return len(c.in.Units)
	}
	return c.in.MaxPendingChecks - c.pendingChecks - len(c.running)
}

// wakeToCheck puts a timer on sel that wakes the held start loop to read
// the checks again in checksEvery, unless one is on it (*waking).
func (c *campaignRun) wakeToCheck(sel workflow.Selector, waking *bool) {
	if *waking {
		return
	}
	*waking = true
	sel.AddFuture(workflow.NewTimer(c.ctx, checksEvery), func(workflow.Future) { *waking = false })
}

// checksEvery is how often a campaign with max_pending_checks reads its
// pull requests' checks while it starts units or holds them back.
const checksEvery = time.Minute

// holdForChecks reports whether units that may open a pull request are
// held back now (max_pending_checks): as many of the campaign's open
// pull requests have checks pending, counting the units at work, which
// may open more. It reads the count (PendingChecksActivity) at most
// every checksEvery; a count that cannot be read holds nothing more
// than the last one did.
func (c *campaignRun) holdForChecks() bool {
	if c.in.MaxPendingChecks <= 0 || !opensPullRequests(c.in.Template) {
		return false
	}
	now := workflow.Now(c.ctx)
	if c.checksRead.IsZero() || now.Sub(c.checksRead) >= checksEvery {
		c.checksRead = now
		in := PendingChecksInput{Source: workflow.GetInfo(c.ctx).WorkflowExecution.ID}
		for _, r := range c.p.Results {
			in.Opened += len(r.PRs)
		}
		if c.in.Page != nil {
			in.Campaign = c.in.Page.WorkflowID
		}
		actx := workflow.WithActivityOptions(c.ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		var n int
		if err := workflow.ExecuteActivity(actx, PendingChecksActivity, in).Get(c.ctx, &n); err != nil {
			workflow.GetLogger(c.ctx).Warn("could not count the pull requests whose checks are pending; going by the last count", "error", err)
		} else {
			c.pendingChecks = n
		}
	}
	atWork := len(c.running)
	if c.checksRoom() > 0 {
		if c.message == c.holdMessage {
			c.message = ""
		}
		c.holdMessage = ""
		return false
	}
	c.holdMessage = fmt.Sprintf("holding new pull requests: %d open have checks running and %d tasks are at work (max_pending_checks %d)",
		c.pendingChecks, atWork, c.in.MaxPendingChecks)
	c.message = c.holdMessage
	return true
}

// mayStart reports whether another unit may start now.
func (c *campaignRun) mayStart() bool {
	return !c.p.Stop && !c.p.Suspended && c.ctx.Err() == nil && !c.shouldContinueAsNew() && !c.repage
}

// nextKey is the unit to start next: the first a run of units gave
// back, else the first to retry, else the next not started.
func (c *campaignRun) nextKey() (string, bool) {
	if len(c.p.Requeued) > 0 {
		return c.p.Requeued[0], true
	}
	if len(c.p.Retry) > 0 {
		return c.p.Retry[0], true
	}
	if c.p.Next < len(c.in.Units) {
		return c.in.Units[c.p.Next].Key, true
	}
	return "", false
}

// startableKey is nextKey, unless the failure threshold is passed: then
// only units asked to run again start.
func (c *campaignRun) startableKey() (string, bool) {
	key, ok := c.nextKey()
	if !ok || len(c.p.Retry) == 0 && (c.overThreshold() || c.overBudget() != "") {
		return "", false
	}
	return key, true
}

// takeKey marks key, which nextKey returned, as started.
func (c *campaignRun) takeKey(key string) {
	if len(c.p.Requeued) > 0 && c.p.Requeued[0] == key {
		c.p.Requeued = c.p.Requeued[1:]
		return
	}
	if len(c.p.Retry) > 0 && c.p.Retry[0] == key {
		c.p.Retry = c.p.Retry[1:]
		return
	}
	c.p.Next++
}

func (c *campaignRun) batchSize() int {
	if c.in.BatchSize > 0 {
		return c.in.BatchSize
	}
	return 10
}

func (c *campaignRun) shouldContinueAsNew() bool {
	limit := c.in.HistoryLimit
	if limit <= 0 {
		limit = 8000
	}
	info := workflow.GetInfo(c.ctx)
	return c.p.Started >= c.unitsPerRun() || info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() > limit
}

// unitsPerRun is UnitsPerRun, 500 when unset.
func (c *campaignRun) unitsPerRun() int {
	if c.in.UnitsPerRun > 0 {
		return c.in.UnitsPerRun
	}
	return 500
}

// runBatch runs the units with at most MaxParallel children at once.
func (c *campaignRun) runBatch(keys []string) {
	parallel := max(c.in.MaxParallel, 1)
	sel := workflow.NewSelector(c.ctx)
	inFlight := 0
	next := 0
	// waking is set while a timer is on sel to read the checks again.
	waking := false
	for next < len(keys) || inFlight > 0 {
		for inFlight < parallel && next < len(keys) && !c.p.Stop && !c.p.Suspended && c.ctx.Err() == nil {
			if c.holdForChecks() {
				c.wakeToCheck(sel, &waking)
				break
			}
			key := keys[next]
			next++
			c.waitForBudget()
			if c.p.Stop || c.ctx.Err() != nil {
				break
			}
			f := c.startUnit(key)
			inFlight++
			sel.AddFuture(f, func(f workflow.Future) {
				inFlight--
				c.record(key, f)
			})
		}
		if inFlight == 0 {
			if c.p.Suspended && next < len(keys) && !c.p.Stop && c.ctx.Err() == nil {
				// Suspended mid-batch: wait, then start the rest.
				c.waitWhileSuspended(nil)
				continue
			}
			if !waking || c.p.Stop || c.ctx.Err() != nil {
				break
			}
		}
		sel.Select(c.ctx)
		c.drainSignals()
	}
}

// suspendedMessage is a suspended campaign's message.
const suspendedMessage = "suspended: no new repository starts until resumed"

// startUnit starts unit key: as one activity when the unit needs no
// approval (directUnit), else as a child Task workflow.
func (c *campaignRun) startUnit(key string) workflow.Future {
	r := c.p.Results[key]
	r.Key = key
	r.Phase = status.TaskRunning
	r.Attempts++
	c.p.Results[key] = r
	c.p.Started++
	direct := directUnit(c.in.Template.Manifest)
	c.running[key] = direct

	in := c.in.Template
	in.ID = c.in.ID + "/" + key
	m := in.Manifest
	m.TaskID = c.in.ID
	m.Repositories = slices.Clone(c.units[key].Repositories)
	m.Parallel = c.units[key].Parallel
	in.Manifest = m
	in.Open = r.PRs

	// Child ids, and direct units' sandboxes, are deterministic within a
	// run of the campaign (a replay or a retried workflow task never
	// starts a second one) and new for each new run of the same campaign
	// id (whose earlier children have finished and keep their ids) and
	// each retry of the unit.
	wid, firstRunID := c.root()
	retry := ""
	if r.Attempts > 1 {
		retry = fmt.Sprintf("/retry-%d", r.Attempts-1)
	}
	if direct {
		return c.startDirect(sandboxID(wid+"/"+key+retry, firstRunID), in)
	}
	id := fmt.Sprintf("%s/%s@%s%s", wid, key, shortRunID(firstRunID), retry)
	r.WorkflowID = id
	c.p.Results[key] = r
	cctx := workflow.WithChildOptions(c.ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            id,
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		RetryPolicy:           &temporal.RetryPolicy{MaximumAttempts: 1},
		// What a child is, for Temporal's UI and CLI: the memo and
		// search attributes of a task of this campaign. (A child's start
		// is matched on replay by its type, not by these.)
		Memo:                  childMemo(c.ctx, in.ID, c.in.ID, c.in.Generation),
		TypedSearchAttributes: c.search.child(c.ctx, in.ID, c.in.ID),
	})
	return workflow.ExecuteChildWorkflow(cctx, Task, in)
}

// directUnit reports whether a unit of manifest m can run as one
// activity of its campaign: it opens pull requests without an approval,
// so nothing can stop it on its way, and what the campaign keeps of its
// result (the pull requests, each repository's status) is all there is to
// keep. A report's body stays in a child's result, read when it is asked
// for.
func directUnit(m protocol.Manifest) bool {
	return m.Mode == protocol.ModeTransform && !m.RequireApproval
}

// startDirect runs a unit's task as one activity (RunSandboxed) on any
// worker, in sandbox sandboxID (and those that replace it).
func (c *campaignRun) startDirect(sandboxID string, in TaskInput) workflow.Future {
	timeout := in.agentTimeout()
	actx := workflow.WithActivityOptions(c.ctx, directOptions(in, 1))
	return workflow.ExecuteActivity(actx, a.RunSandboxed, activity.RunInput{
		Provision: in.provision(sandboxID),
		Manifest:  in.Manifest, Timeout: timeout, MaxSandboxes: maxSandboxes,
	})
}

// directOptions are the options of an activity that runs units of
// template in (RunSandboxed, RunUnits).
func directOptions(in TaskInput, units int) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		// Each sandbox's agent has the timeout; provisioning and removal
		// take a little more.
		StartToCloseTimeout: time.Duration(units*maxSandboxes) * (in.agentTimeout() + 2*shortTimeout),
		HeartbeatTimeout:    in.heartbeatTimeout(),
		// Any worker takes a unit, not the one that runs the campaign
		// (eagerly, for as many as it has slots): the sandboxes spread
		// over the worker hosts.
		DisableEagerExecution: true,
		// An attempt ends early only with its worker: the next takes up
		// its sandbox. The sandboxes lost on the way count against
		// maxSandboxes inside the activity.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: maxSandboxes, NonRetryableErrorTypes: activity.NonRetryable},
	}
}

// result is unit key's outcome from f, the future startUnit returned.
func (c *campaignRun) result(key string, f workflow.Future) (status.TaskResult, error) {
	var tr status.TaskResult
	if !c.running[key] {
		err := f.Get(c.ctx, &tr)
		return tr, err
	}
	var out status.RunOutcome
	if err := f.Get(c.ctx, &out); err != nil {
		return tr, err
	}
	return status.OutcomeResult(out), nil
}

func (c *campaignRun) record(key string, f workflow.Future) {
	tr, err := c.result(key, f)
	delete(c.running, key)
	if err != nil {
		c.recordError(key, errText(err), c.ctx.Err() != nil)
		return
	}
	c.recordResult(key, tr)
}

// recordError records that unit key failed with message, or was
// cancelled.
func (c *campaignRun) recordError(key, message string, cancelled bool) {
	c.p.Results[key] = status.WithError(c.p.Results[key], message, cancelled)
}

// recordResult records unit key's task result.
func (c *campaignRun) recordResult(key string, tr status.TaskResult) {
	c.p.Results[key] = status.WithResult(c.p.Results[key], tr, len(c.units[key].Repositories) > 1)
}

// shortRunID keeps the random tail of a run id: run ids are UUIDv7,
// whose leading characters are a timestamp shared by runs started close
// together.
func shortRunID(runID string) string {
	if len(runID) > 12 {
		return runID[len(runID)-12:]
	}
	return runID
}

// waitForBudget takes a token from the pull-request budget before a unit
// that may open pull requests starts, sleeping (on workflow time) until
// one is free.
func (c *campaignRun) waitForBudget() {
	for !c.takeToken() {
		perSecond := float64(c.in.PullRequestsPerHour) / 3600
		wait := time.Duration((1 - c.p.Tokens) / perSecond * float64(time.Second))
		c.message = fmt.Sprintf("pull request budget: next start in %s", wait.Round(time.Second))
		if err := workflow.Sleep(c.ctx, wait); err != nil {
			return
		}
		c.message = ""
	}
}

// takeToken takes a token from the pull-request budget, refilled up to
// now, if one is there (or none is needed); it reports whether it did.
func (c *campaignRun) takeToken() bool {
	if c.in.Template.Manifest.Mode != protocol.ModeTransform || c.in.PullRequestsPerHour <= 0 {
		return true
	}
	perSecond := float64(c.in.PullRequestsPerHour) / 3600
	now := workflow.Now(c.ctx)
	c.p.Tokens = min(float64(max(c.in.Burst, 1)), c.p.Tokens+now.Sub(c.p.Refilled).Seconds()*perSecond)
	c.p.Refilled = now
	if c.p.Tokens < 1 {
		return false
	}
	c.p.Tokens--
	return true
}

// overThreshold reports whether more of the finished units failed than
// the threshold allows (failures a human continued past aside).
func (c *campaignRun) overThreshold() bool {
	s := c.unitCounts()
	finished := s.Completed + s.Failed
	return finished > 0 && c.in.ThresholdPercent < 100 && s.Failed*100 > c.in.ThresholdPercent*finished && s.Failed > c.p.Acknowledged
}

// checkThreshold pauses or aborts when too many finished units failed.
func (c *campaignRun) checkThreshold() {
	if !c.overThreshold() {
		return
	}
	s := c.unitCounts()
	finished := s.Completed + s.Failed
	c.message = fmt.Sprintf("%d of %d finished units failed, over the %d%% threshold", s.Failed, finished, c.in.ThresholdPercent)
	if c.in.FailureAction == "abort" {
		c.p.Stop = true
		c.p.Phase = status.CampaignAborted
		c.p.Stopped = "aborted: " + c.message
		return
	}
	c.pause()
}

// overBudget says why the campaign's cost stops it, "" when it does not
// (costOver on what it spent).
func (c *campaignRun) overBudget() string {
	return costOver(c.in.MaxCostUSD, c.p.CostContinued, c.spend)
}

// costOver says why a campaign whose max_cost_per_campaign is limit,
// and which a human continued past the budget continued, stops for its
// cost, "" when it does not: its units' model calls (spent) cost limit
// or more, or a cost could not be counted.
func costOver(limit, continued float64, spent func() *protocol.ModelUsage) string {
	if limit <= 0 || continued >= limit {
		return ""
	}
	u := spent()
	switch {
	case u == nil:
		return ""
	case u.Unpriced != "":
		return fmt.Sprintf("the campaign's cost cannot be counted: the worker's price table (--model-prices) has no price for %s, and max_cost_per_campaign is %s", u.Unpriced, protocol.USD(limit))
	case u.CostUSD >= limit:
		return fmt.Sprintf("the campaign's model calls cost %s, reaching max_cost_per_campaign %s", protocol.USD(u.CostUSD), protocol.USD(limit))
	}
	return ""
}

// spend is what the campaign's model calls used so far: its units' and,
// for a page, those of the pages before it.
func (c *campaignRun) spend() *protocol.ModelUsage {
	var s status.Summary
	if c.in.Page != nil {
		s.Use(c.in.Page.Before.ModelUsage, 1)
	}
	for _, u := range c.in.Units {
		s.Use(c.p.Results[u.Key].ModelUsage, 1)
	}
	return s.ModelUsage
}

// checkBudget pauses when the campaign's cost reached its budget.
func (c *campaignRun) checkBudget() {
	why := c.overBudget()
	if why == "" {
		return
	}
	c.message = why + ": paused until `fleetlift continue` or `abort`"
	c.pause()
}

// pause pauses the campaign (at the failure threshold or its budget)
// until a human continues, aborts or asks for a retry; a campaign with
// nothing left to start ends instead.
func (c *campaignRun) pause() {
	if c.p.Next >= len(c.in.Units) && len(c.p.Retry) == 0 && len(c.p.Requeued) == 0 && (c.in.Page == nil || !c.in.Page.More) {
		// Nothing left to pause before.
		return
	}
	c.p.Phase = status.CampaignPaused
	c.upsertPhase()
	c.tellCampaign()
	sel := workflow.NewSelector(c.ctx)
	c.addSignalHandlers(sel)
	sel.AddReceive(c.ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	for c.p.Phase == status.CampaignPaused && c.ctx.Err() == nil {
		sel.Select(c.ctx)
		if len(c.p.Retry) > 0 && c.p.Phase == status.CampaignPaused {
			c.p.Phase = status.CampaignRunning
		}
	}
	c.upsertPhase()
	c.tellCampaign()
}

// tellCampaign tells the campaign of a page the page's phase and message
// (signalPagePhase): a page paused at the failure threshold pauses its
// campaign.
func (c *campaignRun) tellCampaign() {
	if c.in.Page == nil {
		return
	}
	parent := workflow.GetInfo(c.ctx).ParentWorkflowExecution
	if parent == nil {
		return
	}
	f := workflow.SignalExternalWorkflow(c.ctx, parent.ID, parent.RunID, signalPagePhase, pagePhase{Phase: c.p.Phase, Message: c.message})
	workflow.Go(c.ctx, func(ctx workflow.Context) {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("tell the campaign the page's phase", "phase", c.p.Phase, "error", err)
		}
	})
}

// forThisRun reports whether a continue, abort or retry-failed naming
// generation is about a run of generation run: it names none, or this
// run's. One naming another generation was decided about an earlier (or
// later) run of the campaign and is ignored.
func forThisRun(ctx workflow.Context, run int64, signal string, generation int64) bool {
	if generation == 0 || run == 0 || generation == run {
		return true
	}
	workflow.GetLogger(ctx).Info("signal for another generation ignored", "signal", signal,
		"generation", generation, "run_generation", run)
	return false
}

// applyOnce reports whether the approval record (if any) has not been
// carried out yet, and remembers it in p.
func applyOnce(ctx workflow.Context, p *CampaignProgress, record string) bool {
	if record == "" {
		return true
	}
	if slices.Contains(p.Applied, record) {
		workflow.GetLogger(ctx).Info("approval record already carried out", "record", record)
		return false
	}
	p.Applied = append(p.Applied, record)
	return true
}

// addSignalHandlers handles continue, abort, retry-failed, suspend,
// resume and update.
func (c *campaignRun) addSignalHandlers(sel workflow.Selector) {
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalContinue), func(ch workflow.ReceiveChannel, _ bool) {
		var s ContinueSignal
		ch.Receive(c.ctx, &s)
		if !forThisRun(c.ctx, c.in.Generation, SignalContinue, s.Generation) || !applyOnce(c.ctx, c.p, s.Record) {
			return
		}
		if s.SkipRemaining {
			c.p.Stop = true
			c.message = "continued with --skip-remaining"
			c.p.Stopped = c.message
		} else {
			c.message = ""
		}
		c.p.Acknowledged = c.unitCounts().Failed
		if c.overBudget() != "" {
			c.p.CostContinued = c.in.MaxCostUSD
		}
		if c.p.Phase == status.CampaignPaused {
			c.p.Phase = status.CampaignRunning
		}
	})
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalAbort), func(ch workflow.ReceiveChannel, _ bool) {
		var s RecordSignal
		ch.Receive(c.ctx, &s)
		if !forThisRun(c.ctx, c.in.Generation, SignalAbort, s.Generation) || !applyOnce(c.ctx, c.p, s.Record) {
			return
		}
		c.p.Stop = true
		c.p.Phase = status.CampaignAborted
		c.message = "aborted"
		if s.Record != "" {
			c.message += " by " + s.Record
		}
		c.p.Stopped = c.message
	})
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalRetryFailed), func(ch workflow.ReceiveChannel, _ bool) {
		var s RecordSignal
		ch.Receive(c.ctx, &s)
		if !forThisRun(c.ctx, c.in.Generation, SignalRetryFailed, s.Generation) || !applyOnce(c.ctx, c.p, s.Record) {
			return
		}
		for _, u := range c.in.Units {
			if s.Unit != "" && u.Key != s.Unit {
				continue
			}
			if r, ok := c.p.Results[u.Key]; ok && r.HasFailures() && !slices.Contains(c.p.Retry, u.Key) {
				c.p.Retry = append(c.p.Retry, u.Key)
			}
		}
	})
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalRegenerate), func(ch workflow.ReceiveChannel, _ bool) {
		var s RegenerateSignal
		ch.Receive(c.ctx, &s)
		c.p.Retry = append(c.p.Retry, regenerable(c.p, c.running, s.Units)...)
	})
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalSuspend), func(ch workflow.ReceiveChannel, _ bool) {
		ch.Receive(c.ctx, nil)
		c.p.Suspended = true
	})
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalResume), func(ch workflow.ReceiveChannel, _ bool) {
		ch.Receive(c.ctx, nil)
		c.p.Suspended = false
	})
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalUpdate), func(ch workflow.ReceiveChannel, _ bool) {
		var u UpdateSignal
		ch.Receive(c.ctx, &u)
		c.takeUpdate(u, c.update)
	})
	sel.AddReceive(workflow.GetSignalChannel(c.ctx, SignalUnits), func(ch workflow.ReceiveChannel, _ bool) {
		var pc UnitsPiece
		ch.Receive(c.ctx, &pc)
		if !c.takeUpdatePiece(pc, c.update) {
			workflow.GetLogger(c.ctx).Warn("a piece of units no update awaits", "generation", pc.Generation, "index", pc.Index)
		}
	})
}

// regenerable are those of keys whose units have finished in p, are not
// running and are not queued to run again already.
func regenerable(p *CampaignProgress, running map[string]bool, keys []string) []string {
	var out []string
	for _, k := range keys {
		r, ok := p.Results[k]
		if _, busy := running[k]; !ok || busy || !r.Phase.Done() || slices.Contains(p.Retry, k) || slices.Contains(out, k) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// update takes a new spec in place: the template and unit list are
// replaced; units already started keep their results (and a unit removed
// from the spec after it started stays in the results); units not yet
// started run the new template. The memo is updated so that the recorded
// state shows the spec now applied.
func (c *campaignRun) update(u UpdateSignal) {
	in := u.Input
	started := map[string]bool{}
	for k := range c.p.Results {
		started[k] = true
	}
	// Keep the started units first, in their order, then the rest of the
	// new units in the spec's order: Next counts started units.
	var units []Unit
	seen := map[string]bool{}
	for _, old := range c.in.Units[:min(c.p.Next, len(c.in.Units))] {
		if nu, ok := findUnit(in.Units, old.Key); ok {
			units = append(units, nu)
		} else {
			units = append(units, old)
		}
		seen[old.Key] = true
	}
	next := len(units)
	for _, nu := range in.Units {
		if !seen[nu.Key] {
			units = append(units, nu)
		}
	}
	c.in.Units = units
	c.p.Next = next
	c.in.takeSettings(in)
	c.units = make(map[string]Unit, len(units))
	for _, un := range units {
		c.units[un.Key] = un
	}
	c.rev++
	if c.in.Page == nil && len(units) > in.pageSize() {
		c.in.PageSize = in.PageSize
		c.repage = true
	}
	if len(u.Memo) > 0 {
		if err := workflow.UpsertMemo(c.ctx, u.Memo); err != nil {
			workflow.GetLogger(c.ctx).Error("record updated spec", "error", err)
		}
		digest, _ := u.Memo[status.MemoDigest].(string)
		c.search.setDigest(c.ctx, digest)
	}
}

func findUnit(units []Unit, key string) (Unit, bool) {
	for _, u := range units {
		if u.Key == key {
			return u, true
		}
	}
	return Unit{}, false
}

// unitCounts counts the units (tasks) by phase: what the failure
// threshold is about.
// A page counts from what the campaign's pages before it did.
func (c *campaignRun) unitCounts() status.Summary {
	s := status.Summary{Total: len(c.in.Units)}
	if c.in.Page != nil {
		s.Add(c.in.Page.Before)
	}
	for _, u := range c.in.Units {
		r, ok := c.p.Results[u.Key]
		if !ok {
			continue
		}
		countUnit(&s, r.Phase)
	}
	return s
}

// countUnit counts one unit in phase p, as the failure threshold does:
// a unit not ended yet counts as running.
func countUnit(s *status.Summary, p status.TaskPhase) {
	switch p {
	case status.TaskCompleted:
		s.Completed++
	case status.TaskFailed:
		s.Failed++
	case status.TaskCancelled:
		s.Cancelled++
	case status.Skipped:
		s.Skipped++
	default:
		s.Running++
	}
}

// summary counts the repositories of the campaign's units by what
// happened to them, and the pull requests and reports.
func (c *campaignRun) summary() status.Summary {
	var s status.Summary
	for _, u := range c.in.Units {
		n := max(len(u.Repositories), 1)
		s.Total += n
		if r, ok := c.p.Results[u.Key]; ok {
			s.Count(r, n, 1)
		}
	}
	return s
}

func (c *campaignRun) state() status.CampaignState {
	st := status.CampaignState{ID: c.in.ID, Phase: c.p.Phase, Summary: c.summary(), Message: c.message,
		Suspended: c.p.Suspended, Applied: slices.Clone(c.p.Applied), Merge: c.in.Template.Merge,
		KeepCurrent: c.in.Template.KeepCurrent, Done: c.in.Template.Done}
	for _, u := range c.in.Units {
		r, ok := c.p.Results[u.Key]
		if !ok {
			r = status.UnitResult{Key: u.Key, Phase: "pending"}
		}
		if len(u.Repositories) > 1 && len(r.Repos) == 0 {
			// A group not finished yet: its repositories, without a
			// verdict.
			for _, repo := range u.Repositories {
				r.Repos = append(r.Repos, status.UnitRepo{Name: repo.Name})
			}
		}
		st.Units = append(st.Units, r)
	}
	return st
}

// finish marks the units never started skipped and settles the final
// phase and message, which the memo and search attributes record.
func (c *campaignRun) finish() status.CampaignState {
	for _, u := range c.in.Units {
		if _, ok := c.p.Results[u.Key]; !ok {
			c.p.Results[u.Key] = status.UnitResult{Key: u.Key, Phase: status.Skipped}
		}
	}
	s := c.summary()
	c.p.Phase = status.FinalPhase(c.p.Phase, s)
	c.message = status.FinalMessage(s, c.p.Stopped)
	c.upsertPhase()
	return c.state()
}
