package plan

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// Compute pairs desired with recorded, by id, and returns the plan. It is
// pure and deterministic. recorded holds unique ids (if not, the first
// wins).
func Compute(desired Desired, recorded []state.Campaign, policy Policy) Plan {
	defs := make(map[string]*spec.Definition, len(desired.Definitions))
	for i := range desired.Definitions {
		d := &desired.Definitions[i]
		if _, dup := defs[d.ID]; !dup {
			defs[d.ID] = d
		}
	}
	recs := make(map[string]*state.Campaign, len(recorded))
	for i := range recorded {
		r := &recorded[i]
		if _, dup := recs[r.ID]; !dup {
			recs[r.ID] = r
		}
	}
	ids := make([]string, 0, len(defs)+len(recs))
	for id := range defs {
		ids = append(ids, id)
	}
	for id := range recs {
		if _, ok := defs[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)

	invalid := invalidFiles(desired.Errors)
	pooled := pooledCost(recorded)
	df := newDiffer()
	p := Plan{Changes: make([]Change, 0, len(ids))}
	for _, id := range ids {
		d, r := defs[id], recs[id]
		var c Change
		switch {
		case r == nil:
			c = create(d)
		case d == nil:
			c = missing(r, invalid, policy)
		default:
			c = compare(df, d, r)
			if c.Action == Unchanged {
				if units := regressed(r); len(units) > 0 {
					c.Action, c.Reopen = Reopen, units
				}
			}
		}
		c.Cost = project(c, d, r, pooled)
		if pr := declaredPullRequest(c, d); pr != nil {
			c.Merge = pr.Merge
			if pr.KeepCurrent != spec.KeepCurrentNever {
				c.KeepCurrent = pr.KeepCurrent
			}
		}
		p.Changes = append(p.Changes, c)
	}
	p.Approvals = decideApprovals(desired.Approvals, desired.Refused, recs, p.Changes)
	for _, e := range desired.Errors {
		if e != nil {
			p.Errors = append(p.Errors, e)
		}
	}
	slices.SortStableFunc(p.Errors, func(a, b *spec.Error) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Field, b.Field), cmp.Compare(a.Msg, b.Msg))
	})
	return p
}

// regressed are the units of campaign run r with a repository whose
// pull request merged and whose done_when no longer passes: the work a
// Reopen makes again. Only a run that is going, or that finished, is
// reopened: not one paused, suspended, aborted or cancelled, nor a
// task's (it is run again as a whole).
func regressed(r *state.Campaign) []string {
	switch {
	case r.Kind != state.KindCampaign:
		return nil
	case r.Phase == state.PhaseRunning, r.Phase == state.PhaseAwaitingApproval,
		r.Phase == state.PhaseCompleted, r.Phase == state.PhaseCompletedWithFailures:
	default:
		return nil
	}
	var units []string
	for _, repo := range r.Repos {
		if repo.PullRequestState != state.PullRequestMerged || repo.PullRequest == nil || repo.PullRequest.Done != state.DoneRegressed || repo.PullRequest.Reopened {
			continue
		}
		unit, _, _ := strings.Cut(repo.Name, "/") // a group's repository is group/name
		units = append(units, unit)
	}
	slices.Sort(units)
	return slices.Compact(units)
}

func create(d *spec.Definition) Change {
	return Change{
		ID:           d.ID,
		Kind:         d.Kind,
		Action:       Create,
		File:         d.File,
		NewDigest:    d.Digest,
		Suspend:      suspended(d),
		Repositories: RepoDiff{Added: unitsOfDefinition(d)},
	}
}

func compare(df *differ, d *spec.Definition, r *state.Campaign) Change {
	recorded := r.SpecDigest
	// PreviousDigests never holds d.Digest: an unchanged definition,
	// most of a revision's, needs none of them.
	if recorded != d.Digest && slices.Contains(d.PreviousDigests(), recorded) {
		// Recorded by an earlier release, whose schema gave the
		// definition a default this one does not: the same spec.
		recorded = d.Digest
	}
	c := Change{
		ID:        d.ID,
		Kind:      d.Kind,
		Action:    Unchanged,
		File:      d.File,
		OldDigest: recorded,
		NewDigest: d.Digest,
		Suspend:   suspended(d),
		Phase:     r.Phase,
	}
	if r.File != "" && r.File != d.File {
		c.PreviousFile = r.File
	}
	changed := d.Digest != recorded
	switch {
	case c.Suspend && !r.Suspended:
		c.Action = Suspend
	case !c.Suspend && r.Suspended:
		c.Action = Resume
	case changed:
		c.Action = Update
	}
	if changed {
		c.Strategy = strategy(d)
		if string(r.Kind) != string(d.Kind) {
			// A Task's run cannot take a Campaign's spec, nor the reverse.
			c.Strategy = spec.UpdateRestart
		}
		df.diffSpecs(&c, r, d)
		if c.FieldsKnown && onlySuspend(c.Fields) {
			// Suspending or resuming is not a new spec to restart with:
			// the run stops or goes on starting tasks, as it is. A
			// finished run has nothing to suspend.
			c.Strategy = spec.UpdateInPlace
			if r.Phase.Done() {
				c.Action = Unchanged
			}
		}
	}
	return c
}

// onlySuspend reports whether the only field that changed is suspend.
func onlySuspend(fields []FieldDiff) bool {
	return len(fields) == 1 && fields[0].Path == "suspend"
}

// missing plans a recorded campaign that is not among the desired
// definitions.
func missing(r *state.Campaign, invalid map[string]bool, policy Policy) Change {
	c := Change{
		ID:        r.ID,
		Kind:      spec.Kind(r.Kind),
		File:      r.File,
		OldDigest: r.SpecDigest,
		Phase:     r.Phase,
	}
	switch {
	case r.File != "" && invalid[r.File]:
		c.Action = Unknown
		c.Reason = fmt.Sprintf("its definition file %s is invalid; the run is left as it is", r.File)
		return c
	case r.File == "" && len(invalid) > 0:
		c.Action = Unknown
		c.Reason = fmt.Sprintf("not among the loaded definitions, but %s invalid and may define it; the run is left as it is", countFiles(len(invalid)))
		return c
	}
	var why []string
	if !policy.Prune {
		why = append(why, "the repository config does not allow pruning")
	}
	if !r.Prune {
		if r.Kind == state.KindTask {
			why = append(why, "a Task is never pruned")
		} else {
			why = append(why, "it was applied with sync_policy.prune false")
		}
	}
	if len(invalid) > 0 {
		why = append(why, fmt.Sprintf("%s invalid and may hold it, renamed", countFiles(len(invalid))))
	}
	if len(why) == 0 {
		c.Action = Prune
		if cl, ok := CloseOnRemoval(*r); ok {
			c.Closes = &cl
		}
		return c
	}
	c.Action = Orphaned
	c.Reason = "removed from Git; not pruned: " + strings.Join(why, "; ")
	return c
}

func countFiles(n int) string {
	if n == 1 {
		return "1 definition file is"
	}
	return fmt.Sprintf("%d definition files are", n)
}

func invalidFiles(errs []*spec.Error) map[string]bool {
	m := make(map[string]bool, len(errs))
	for _, e := range errs {
		if e != nil {
			m[e.File] = true
		}
	}
	return m
}

func suspended(d *spec.Definition) bool {
	return d.Campaign != nil && d.Campaign.Suspend
}

func strategy(d *spec.Definition) spec.UpdateStrategy {
	if d.Campaign == nil {
		return spec.UpdateRestart
	}
	if d.Campaign.SyncPolicy.Update == "" {
		return spec.UpdateInPlace
	}
	return d.Campaign.SyncPolicy.Update
}

// pooled is the recorded runs' cost per repository, every run that
// priced its calls together.
type pooled struct {
	cost  float64
	repos int
	runs  int
}

func pooledCost(recorded []state.Campaign) pooled {
	var p pooled
	for _, r := range recorded {
		if _, ok := r.Usage.CostPerRepository(); ok {
			p.cost += r.Usage.CostUSD
			p.repos += r.Usage.Repositories
			p.runs++
		}
	}
	return p
}

// project is the cost projection of change c of agentic definition d,
// recorded as r (nil for a new one); nil for a change that starts no
// agent's work.
func project(c Change, d *spec.Definition, r *state.Campaign, all pooled) *Cost {
	if d == nil || c.Action != Create && !c.SpecChanged() || c.Action == Suspend {
		return nil
	}
	var w spec.Work
	var budget float64
	switch {
	case d.Campaign != nil:
		w, budget = d.Campaign.Template, d.Campaign.MaxCostPerCampaign
	case d.Task != nil:
		w = d.Task.Work
	default:
		return nil
	}
	ag := w.Execution.Agentic
	if ag == nil {
		return nil
	}
	cost := &Cost{Repositories: len(unitsOfDefinition(d)), Budget: budget, PerTask: ag.Limits.MaxCostPerTask}
	if c.Action == Update && c.Strategy == spec.UpdateInPlace && r != nil && !r.Phase.Done() {
		// The run goes on: what it has not started yet, and what the
		// change adds, take the new spec.
		cost.Repositories = len(c.Repositories.Added)
		for _, repo := range r.Repos {
			if repo.Status == state.RepoPending {
				cost.Repositories++
			}
		}
	}
	var own *state.Usage
	if r != nil {
		own = r.Usage
	}
	if per, ok := own.CostPerRepository(); ok {
		cost.PerRepository, cost.From = per, "this campaign's last run"
	} else if all.runs > 0 {
		cost.PerRepository = all.cost / float64(all.repos)
		cost.From = fmt.Sprintf("%d recorded runs", all.runs)
		if all.runs == 1 {
			cost.From = "1 recorded run"
		}
	}
	return cost
}

// declaredPullRequest is d's pull_request when c creates or changes d;
// nil otherwise.
func declaredPullRequest(c Change, d *spec.Definition) *spec.PullRequest {
	if d == nil || c.Action != Create && !c.SpecChanged() || c.Action == Suspend {
		return nil
	}
	var w spec.Work
	switch {
	case d.Campaign != nil:
		w = d.Campaign.Template
	case d.Task != nil:
		w = d.Task.Work
	}
	return w.PullRequest
}

// CloseOnRemoval is how the open pull requests of rec, a run whose
// definition was removed, close when it is pruned: as its recorded
// spec's pull_request.close says. ok is false when it declares no
// closing, or none of its pull requests is open as recorded.
func CloseOnRemoval(rec state.Campaign) (Close, bool) {
	open := 0
	for _, r := range rec.Repos {
		if r.PullRequestURL != "" && r.PullRequestState == state.PullRequestOpen {
			open++
		}
	}
	if open == 0 {
		return Close{}, false
	}
	var s struct {
		PullRequest *spec.PullRequest `json:"pull_request"`
		Template    *struct {
			PullRequest *spec.PullRequest `json:"pull_request"`
		} `json:"template"`
	}
	if json.Unmarshal(rec.Spec, &s) != nil {
		return Close{}, false
	}
	pr := s.PullRequest
	if s.Template != nil {
		pr = s.Template.PullRequest
	}
	if pr == nil || pr.Close == nil {
		return Close{}, false
	}
	return Close{Open: open, Comment: pr.Close.Comment, DeleteBranch: pr.Close.DeleteBranch}, true
}
