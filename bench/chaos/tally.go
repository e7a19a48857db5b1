package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Refs is what one target repository holds at the end of a round, as
// inspect reads it.
type Refs struct {
	// Name is the repository's name in the campaign (its unit key).
	Name string
	// Branches are its branches other than the base branch.
	Branches []string
	// Correct says the expected branch holds exactly the expected change
	// on the current base, and its pull request record names that commit;
	// Why says what is wrong when it does not.
	Correct bool
	Why     string
	// Recorded is when the expected branch's pull request record was
	// made; zero without one.
	Recorded time.Time
}

// Run is one Temporal execution of the round's campaign or of one of its
// tasks, as visibility lists it.
type Run struct {
	WorkflowID string
	RunID      string
	// Status is the execution's status: running, completed, failed,
	// canceled, terminated, continued-as-new or timed-out.
	Status string
	// Phase is a completed task's phase (status.TaskResult.Phase):
	// completed, failed or cancelled.
	Phase string
	Start time.Time
	// Close is zero while the execution runs.
	Close time.Time
}

// Unit is where one unit of the campaign ended, from the campaign's state.
type Unit struct {
	Key   string
	Phase string
	Error string
	// Lost counts the sandboxes the unit's latest run lost to crashes
	// and replaced (the campaign's sandboxes_lost).
	Lost int
	// Applied lists the approval records the unit's tasks report carried
	// out.
	Applied []string
}

// finalUnit reports whether a unit's phase is one nothing follows.
func finalUnit(phase string) bool {
	switch phase {
	case "completed", "failed", "cancelled", "skipped":
		return true
	}
	return false
}

// Observation is everything a round's figures are computed from.
type Observation struct {
	// CampaignID is the campaign's id; its workflow is "campaign/<id>"
	// and its tasks' are "campaign/<id>/<unit>@<run>[/retry-<n>]".
	CampaignID string
	Repos      []Refs
	Runs       []Run
	// Units is the campaign's units as its state reports them; nil when
	// the state could not be read.
	Units []Unit
	// CampaignStatus is the campaign workflow's status (running,
	// completed, ...) and CampaignPhase its state's phase (running,
	// paused, completed, aborted); empty when unknown.
	CampaignStatus string
	CampaignPhase  string
	CampaignNote   string
	// Approved lists the units whose results the round approved.
	Approved []string
	// RestartsFailed counts starts of `up` that exited or never served.
	RestartsFailed int
	// GaveUp: `up` could not be brought back at all.
	GaveUp bool
}

// Figures are a round's results, measured against the goal.
type Figures struct {
	Repos   int
	Correct int
	// ExtraBranches counts fleetlift branches beyond one per repository;
	// ExtraCampaignRuns campaign executions beyond one (continue-as-new
	// excluded); DuplicateTaskRuns task executions that did a
	// repository's work again (see duplicateTaskRuns).
	ExtraBranches     int
	ExtraCampaignRuns int
	DuplicateTaskRuns int
	// TaskRuns counts every task execution, duplicate or not, and
	// RanAgain the repositories with more than one, or, for a unit the
	// campaign ran itself (no task execution of its own), with a sandbox
	// lost and replaced; SandboxesLost counts those sandboxes.
	TaskRuns       int
	RanAgain       int
	SandboxesLost  int
	ApprovalsLost  int
	Stuck          int
	RestartsFailed int
	// Human: the campaign did not finish by itself; HumanWhy says why.
	Human    bool
	HumanWhy string
}

// Duplicates is the "duplicate branches or runs" figure.
func (f Figures) Duplicates() int {
	return f.ExtraBranches + f.ExtraCampaignRuns + f.DuplicateTaskRuns
}

// MeetsGoal reports whether the round reached the goal: every repository
// with exactly one correct branch, no duplicate, no approval lost, no unit
// stuck, no failed restart, and no human action.
func (f Figures) MeetsGoal() bool {
	return f.Correct == f.Repos && f.Duplicates() == 0 && f.ApprovalsLost == 0 &&
		f.Stuck == 0 && f.RestartsFailed == 0 && !f.Human
}

// Tally computes a round's figures from what it observed.
func Tally(o Observation) Figures {
	f := Figures{Repos: len(o.Repos), RestartsFailed: o.RestartsFailed}
	correct := map[string]bool{}
	for _, r := range o.Repos {
		if r.Correct && len(r.Branches) == 1 {
			f.Correct++
			correct[r.Name] = true
		}
		if len(r.Branches) > 1 {
			f.ExtraBranches += len(r.Branches) - 1
		}
	}
	campaign, tasks := splitRuns(o.CampaignID, o.Runs)
	if n := countedCampaignRuns(campaign); n > 1 {
		f.ExtraCampaignRuns = n - 1
	}
	for _, runs := range tasks {
		f.TaskRuns += len(runs)
		if len(runs) > 1 {
			f.RanAgain++
		}
		f.DuplicateTaskRuns += duplicateTaskRuns(runs)
	}
	for _, u := range o.Units {
		if u.Lost > 0 && len(tasks[u.Key]) == 0 {
			f.SandboxesLost += u.Lost
			f.RanAgain++
		}
	}
	for _, key := range dedupe(o.Approved) {
		if !correct[key] {
			f.ApprovalsLost++
		}
	}
	var why []string
	switch {
	case o.Units == nil:
		f.Stuck = len(o.Repos)
		why = append(why, "the campaign's state could not be read")
	default:
		phases := map[string]int{}
		for _, u := range o.Units {
			phases[u.Phase]++
			if !finalUnit(u.Phase) {
				f.Stuck++
			}
		}
		if n := len(o.Units) - phases["completed"]; n > 0 {
			why = append(why, fmt.Sprintf("%d of %d units did not complete (%s)", n, len(o.Units), phaseCounts(phases, "completed")))
		}
	}
	if o.GaveUp {
		why = append(why, "`up` could not be started again")
	}
	if o.CampaignStatus != "completed" {
		s := o.CampaignStatus
		if s == "" {
			s = "unknown"
		}
		if o.CampaignPhase != "" {
			s += ", phase " + o.CampaignPhase
		}
		if o.CampaignNote != "" {
			s += ": " + o.CampaignNote
		}
		why = append(why, "the campaign did not finish ("+s+")")
	}
	if f.Correct < f.Repos && len(why) == 0 {
		why = append(why, fmt.Sprintf("%d repositories lack their correct branch", f.Repos-f.Correct))
	}
	f.Human = len(why) > 0
	f.HumanWhy = strings.Join(why, "; ")
	return f
}

// splitRuns separates the campaign's executions from its tasks', the
// latter by unit key. Executions of other workflows are dropped.
func splitRuns(campaignID string, runs []Run) (campaign []Run, tasks map[string][]Run) {
	tasks = map[string][]Run{}
	wid := "campaign/" + campaignID
	for _, r := range runs {
		switch {
		case r.WorkflowID == wid:
			campaign = append(campaign, r)
		case strings.HasPrefix(r.WorkflowID, wid+"/"):
			if key := unitKey(campaignID, r.WorkflowID); key != "" {
				tasks[key] = append(tasks[key], r)
			}
		}
	}
	return campaign, tasks
}

// unitKey is the unit a task workflow id belongs to:
// "campaign/<id>/<unit>@<run>[/retry-<n>]" gives <unit>; "" for an id of
// another shape.
func unitKey(campaignID, workflowID string) string {
	rest, ok := strings.CutPrefix(workflowID, "campaign/"+campaignID+"/")
	if !ok {
		return ""
	}
	key, _, ok := strings.Cut(rest, "@")
	if !ok {
		return ""
	}
	return key
}

// countedCampaignRuns counts a campaign's executions, leaving out those
// that continued as new: a chain of continue-as-new is one run.
func countedCampaignRuns(runs []Run) int {
	n := 0
	for _, r := range runs {
		if r.Status != "continued-as-new" {
			n++
		}
	}
	return n
}

// duplicateTaskRuns counts the executions of one repository's task that
// did its work again: one that started while an earlier one was still
// open (two sandboxes on the same repository at once), or one that
// completed after an earlier one had already completed (the change made
// twice). An execution started after an earlier one failed is a retry,
// not a duplicate; Figures.RanAgain shows those.
func duplicateTaskRuns(runs []Run) int {
	runs = slices.Clone(runs)
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Start.Before(runs[j].Start) })
	dup := 0
	completed := false
	for i, r := range runs {
		overlaps := false
		for _, e := range runs[:i] {
			if e.Close.IsZero() || e.Close.After(r.Start) {
				overlaps = true
				break
			}
		}
		done := r.Status == "completed" && r.Phase == "completed"
		if overlaps || (done && completed) {
			dup++
		}
		completed = completed || done
	}
	return dup
}

func dedupe(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// phaseCounts renders counts by phase, leaving out skip, largest first.
func phaseCounts(phases map[string]int, skip string) string {
	type pc struct {
		phase string
		n     int
	}
	var list []pc
	for p, n := range phases {
		if p != skip {
			list = append(list, pc{p, n})
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].n != list[j].n {
			return list[i].n > list[j].n
		}
		return list[i].phase < list[j].phase
	})
	var parts []string
	for _, e := range list {
		parts = append(parts, fmt.Sprintf("%d %s", e.n, e.phase))
	}
	return strings.Join(parts, ", ")
}
