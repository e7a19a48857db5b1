package workflow

import (
	"slices"

	"github.com/fleetlift/fleetlift/internal/status"
)

// A campaign that started as one page and took, in place, a spec of more
// units than a page holds (a pilot of a few repositories grown to the
// whole organisation) goes on in pages: held as one page, its input,
// status answers, continue-as-new and result would grow with every
// repository and pass Temporal's 2 MiB limit past a few thousand. Once
// none of its units is at work (campaignRun.repage stops new starts), the
// same run of the workflow becomes a paged campaign (inPages): its units
// that started, with those that follow up to a page, make its first page,
// which goes on from what they did there (page.seed) without running them
// again; the others make the pages after it. The campaign's own progress
// (phase, stop, suspension, acknowledged failures, records carried out,
// the pull-request budget) goes on as the paged campaign's.

// inPages is campaign c as a paged campaign, going on from where it is.
// No unit of c is at work.
func (c *campaignRun) inPages() *pagedRun {
	p := c.p
	in := c.in
	in.Pieces, in.PieceDigests = 0, nil
	r := newPagedRun(c.ctx, in, &CampaignProgress{Phase: p.Phase, Tokens: p.Tokens, Refilled: p.Refilled,
		Suspended: p.Suspended, Acknowledged: p.Acknowledged, CostContinued: p.CostContinued,
		Applied: p.Applied, Stop: p.Stop, Stopped: p.Stopped, UnitTime: p.UnitTime, UnitsTimed: p.UnitsTimed})
	r.search, r.message = c.search, c.message
	units := c.in.Units
	first := max(p.Next, min(c.in.pageSize(), len(units)))
	r.addPage(pagePlan{units: units[:first]})
	// Runs is 0: the page follows its units' pull requests, which the
	// campaign's follower stops following once its state lists none.
	r.pages[0].seed = &CampaignProgress{Next: p.Next, Results: p.Results, Retry: p.Retry, Requeued: p.Requeued}
	for _, pl := range planPages(units[first:], nil, c.in.pageSize()) {
		r.addPage(pl)
	}
	r.in.Units, r.in.Previous = nil, nil
	return r
}

// fixed is how many pages stay as they are when a spec taken in place
// makes the pages again: those that started, and then those whose units
// started before the campaign went on in pages.
func (r *pagedRun) fixed() int {
	n := r.next
	for n < len(r.pages) && r.pages[n].seed != nil {
		n++
	}
	return n
}

// seeded is what the units of a page not started yet did before the
// campaign went on in pages; nil for other pages.
func (pg *page) seeded() []status.UnitResult {
	if pg.seed == nil {
		return nil
	}
	var out []status.UnitResult
	for _, k := range pg.keys {
		if u, ok := pg.seed.Results[k]; ok {
			out = append(out, u)
		}
	}
	return out
}

// dropUnstarted is the keys of a seeded page without those of its units
// that never started there and that a new spec (inSpec) no longer lists,
// as a campaign of one page drops them.
func (pg *page) dropUnstarted(inSpec map[string]bool) []string {
	out := slices.Clone(pg.keys[:min(pg.seed.Next, len(pg.keys))])
	for _, k := range pg.keys[len(out):] {
		if inSpec[k] {
			out = append(out, k)
		}
	}
	return out
}

// retrySeeded queues again, in the seeded pages not started yet, the
// units whose result pick chooses.
func (r *pagedRun) retrySeeded(pick func(status.UnitResult) bool) {
	for _, pg := range r.pages[r.next:r.fixed()] {
		for _, u := range pg.seeded() {
			if pick(u) && !slices.Contains(pg.seed.Retry, u.Key) {
				pg.seed.Retry = append(pg.seed.Retry, u.Key)
			}
		}
	}
}
