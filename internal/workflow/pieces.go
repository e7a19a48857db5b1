package workflow

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/status"
)

// Pieces. Every payload of a campaign stays the size of a page (pages.go),
// its start and its spec updates too: the units of a campaign run in
// pages reach it a page at a time. What starts it (Split) carries the
// first page's units; the starter then signals it each further page's
// (SignalUnits, a UnitsPiece each), in order, at once. A spec update in
// place goes the same way: the update carries the first page's units of
// the new spec, and pieces of its generation the rest; the campaign takes
// the update once it holds them all.
//
// A campaign never waits on a piece while it has units to run: a page
// runs while the next arrives. One that has run every unit it holds and
// still misses pieces waits for them up to piecesWait, then ends failed,
// naming the pages that never came (its starter stopped between its
// start and its last signal). While it waits, its state says which page
// it waits for (CampaignState.AwaitingPieces), and a starter may send
// the missing pieces again (dispatch.ResendPieces): each is taken only
// if it is the one the start announced (PieceDigests).

// SignalUnits hands a campaign the next page of its units (UnitsPiece).
const SignalUnits = "units"

// piecesWait is how long a campaign that has run every unit it holds
// waits for pieces its start has not delivered yet: a starter sends them
// within seconds of the start.
const piecesWait = 10 * time.Minute

// UnitsPiece is one page's units of a campaign run in pages, or of a
// spec update to it.
type UnitsPiece struct {
	// Generation is the generation of the run, or of the update, the
	// piece belongs to.
	Generation int64 `json:"generation"`
	// Index is the piece's place, from 0 (the start or the update
	// carries piece 0).
	Index int    `json:"index"`
	Units []Unit `json:"units"`
	// Previous is the page of the earlier run whose units these are
	// (fleetlift retry); Regenerate the keys among them whose change is
	// made anew.
	Previous   string   `json:"previous,omitempty"`
	Regenerate []string `json:"regenerate,omitempty"`
	// Digest is the digest of the piece's content (pieceDigest), which
	// the start's PieceDigests list.
	Digest string `json:"digest,omitempty"`
}

// pieceDigest is the digest of what pc carries: its place, units,
// page and keys made anew. Two starters that split the same input make
// pieces of the same digests.
func pieceDigest(pc UnitsPiece) string {
	pc.Digest = ""
	b, err := json.Marshal(pc)
	if err != nil {
		// Units are plain data: this does not happen; a piece without
		// a digest is then never taken in place of another.
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// pagePlan is the units of one page, and the page of an earlier run they
// were in (a retry).
type pagePlan struct {
	units    []Unit
	previous string
}

// planPages cuts units into pages: first as many as previous (the pages of
// the run started again), each holding as many units as that page did,
// then pages of size units.
func planPages(units []Unit, previous []status.PageRef, size int) []pagePlan {
	var out []pagePlan
	for _, ref := range previous {
		n := min(ref.Units, len(units))
		if n == 0 {
			continue
		}
		out = append(out, pagePlan{units: units[:n], previous: ref.WorkflowID})
		units = units[n:]
	}
	for start := 0; start < len(units); start += size {
		out = append(out, pagePlan{units: units[start:min(start+size, len(units))]})
	}
	return out
}

// Split is what starts the campaign in (or updates it in place), and the
// pieces to signal it after, in order: for a campaign of one page, in
// itself and none; for one run in pages, in with its first page's units
// and Pieces set, and a piece for each other page.
func Split(in CampaignInput) (CampaignInput, []UnitsPiece) {
	if in.Page != nil || in.Progress != nil {
		return in, nil
	}
	plans := planPages(in.Units, in.Previous, in.pageSize())
	if len(plans) <= 1 {
		return in, nil
	}
	regenerate := keySet(in.Regenerate)
	pieces := make([]UnitsPiece, len(plans))
	for i, pl := range plans {
		pc := UnitsPiece{Generation: in.Generation, Index: i, Units: pl.units, Previous: pl.previous}
		for _, u := range pl.units {
			if regenerate[u.Key] {
				pc.Regenerate = append(pc.Regenerate, u.Key)
			}
		}
		pc.Digest = pieceDigest(pc)
		pieces[i] = pc
	}
	head := in
	head.Pieces = len(pieces)
	head.PieceDigests = nil
	for _, pc := range pieces[1:] {
		head.PieceDigests = append(head.PieceDigests, pc.Digest)
	}
	head.RegenerateOnly = in.RegenerateOnly || len(in.Regenerate) > 0
	head.Units, head.Regenerate, head.Previous = pieces[0].Units, pieces[0].Regenerate, nil
	if pieces[0].Previous != "" {
		head.Previous = []status.PageRef{{WorkflowID: pieces[0].Previous, Units: len(pieces[0].Units)}}
	}
	return head, pieces[1:]
}

// keySet is keys as a set: a unit's membership is then one lookup, not a
// scan of keys, which may name every unit of the campaign.
func keySet(keys []string) map[string]bool {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	return set
}

// Join is the input Split cut into head and pieces, whole again: the
// input of a run as its starter meant it.
func Join(head CampaignInput, pieces []UnitsPiece) (CampaignInput, error) {
	in := head
	in.Units = slices.Clone(head.Units)
	in.Regenerate = slices.Clone(head.Regenerate)
	in.Previous = slices.Clone(head.Previous)
	got := 1
	for _, pc := range pieces {
		if pc.Generation != head.Generation || pc.Index != got {
			continue
		}
		got++
		in.Units = append(in.Units, pc.Units...)
		in.Regenerate = append(in.Regenerate, pc.Regenerate...)
		if pc.Previous != "" {
			in.Previous = append(in.Previous, status.PageRef{WorkflowID: pc.Previous, Units: len(pc.Units)})
		}
	}
	if head.Pieces > 0 && got < head.Pieces {
		return in, fmt.Errorf("%d of its %d pages of units reached it", got, head.Pieces)
	}
	in.Pieces, in.PieceDigests = 0, nil
	if len(in.Regenerate) > 0 {
		in.RegenerateOnly = false
	}
	return in, nil
}

// assembly gathers a spec update's pieces until it holds them all.
type assembly struct {
	update UpdateSignal
	pieces []UnitsPiece
}

// done reports whether every piece of the update is there.
func (a *assembly) done() bool { return len(a.pieces)+1 >= a.update.Input.Pieces }

// whole is the update with all its units.
func (a *assembly) whole() UpdateSignal {
	u := a.update
	u.Input, _ = Join(a.update.Input, a.pieces)
	return u
}

// takeUpdate starts gathering update u, or, when it came whole, hands it
// to apply at once.
func (l *loop) takeUpdate(u UpdateSignal, apply func(UpdateSignal)) {
	l.incoming = &assembly{update: u}
	l.settleUpdate(apply)
}

// takeUpdatePiece adds pc to the update being gathered, if it is one of
// its pieces, and reports whether it was.
func (l *loop) takeUpdatePiece(pc UnitsPiece, apply func(UpdateSignal)) bool {
	a := l.incoming
	if a == nil || pc.Generation != a.update.Input.Generation || pc.Index != len(a.pieces)+1 {
		return false
	}
	a.pieces = append(a.pieces, pc)
	l.settleUpdate(apply)
	return true
}

func (l *loop) settleUpdate(apply func(UpdateSignal)) {
	if l.incoming != nil && l.incoming.done() {
		u := l.incoming.whole()
		l.incoming = nil
		apply(u)
	}
}

// awaitPiece waits, taking signals, until got() changes or piecesWait
// has passed since the wait began, and reports whether it changed.
func (l *loop) awaitPiece(got func() int) bool {
	before := got()
	timedOut := false
	tctx, cancel := workflow.WithCancel(l.ctx)
	defer cancel()
	sel := workflow.NewSelector(l.ctx)
	l.handlers(sel)
	sel.AddFuture(workflow.NewTimer(tctx, piecesWait), func(workflow.Future) { timedOut = true })
	sel.AddReceive(l.ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	for got() == before && !timedOut && l.ctx.Err() == nil {
		sel.Select(l.ctx)
	}
	return got() != before
}

// takeSettings takes the template and settings of next, a spec taken in
// place, and its generation.
func (in *CampaignInput) takeSettings(next CampaignInput) {
	in.Template = next.Template
	in.BatchSize, in.StrictBatches, in.MaxParallel = next.BatchSize, next.StrictBatches, next.MaxParallel
	in.ThresholdPercent, in.FailureAction = next.ThresholdPercent, next.FailureAction
	in.MaxCostUSD = next.MaxCostUSD
	in.PullRequestsPerHour, in.Burst = next.PullRequestsPerHour, next.Burst
	in.MaxPendingChecks = next.MaxPendingChecks
	if next.Generation != 0 {
		in.Generation = next.Generation
	}
}
