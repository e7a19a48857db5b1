package status

import (
	"slices"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// RunOutcome is how the agent of a task run as one activity
// (RunSandboxed) finished: its last
// status and result, and what happened on the way.
type RunOutcome struct {
	Status protocol.Status
	Result protocol.Result
	// Lost says, for each sandbox lost to a crash and replaced, what
	// happened.
	Lost []string `json:",omitempty"`
	// LostUsage is what the lost sandboxes' model calls used (counted in
	// Result.ModelUsage too).
	LostUsage *protocol.ModelUsage `json:",omitempty"`
	// Notes say what of the definition the sandboxes could not apply
	// (each once).
	Notes []string `json:",omitempty"`
}

// UnitOutcome is how one unit of a run ended: the agent's outcome, with
// only what the campaign keeps of its result (no diffs, no output), or
// the error that ended it. Took is how long it worked.
type UnitOutcome struct {
	Key     string     `json:"key"`
	Outcome RunOutcome `json:"outcome"`
	Error   string     `json:"error,omitempty"`
	// Cancelled: the run was cancelled while the unit worked.
	Cancelled bool          `json:"cancelled,omitempty"`
	Took      time.Duration `json:"took"`
	// Attempt is the unit's attempt in the campaign (UnitRef's).
	Attempt int `json:"attempt,omitempty"`
}

// Failed reports whether the unit did not complete.
func (u UnitOutcome) Failed() bool {
	return u.Error != "" || u.Outcome.Status.Phase != protocol.PhaseComplete
}

// UnitRef names a unit of a run: its key, and its attempt
// (the activity's UnitSpec.Attempt).
type UnitRef struct {
	Key     string `json:"key"`
	Attempt int    `json:"attempt,omitempty"`
}

// RunsProgress is what runs of units in flight have told of units their
// campaign takes in only once the run reports: those done, and those at
// work.
type RunsProgress struct {
	Done   []UnitOutcome
	AtWork []UnitRef
}

// RunUnitsName is the name the activity that runs units one after
// another (RunUnits) is registered under; its heartbeats hold a
// UnitsBeat.
const RunUnitsName = "RunUnits"

// UnitsBeat is what the heartbeats of a run of units (the activity
// registered as RunUnitsName) tell of its units: those done, and the
// one at work. The heartbeat holds more, which only the run reads.
type UnitsBeat struct {
	Done   []UnitOutcome `json:"done,omitempty"`
	AtWork *UnitRef      `json:"at_work,omitempty"`
}

// WithUnitDone is r once its unit ended in a run of units as u says;
// grouped says whether the unit is a group of repositories.
func WithUnitDone(r UnitResult, u UnitOutcome, grouped bool) UnitResult {
	if u.Error != "" {
		return WithError(r, u.Error, u.Cancelled)
	}
	return WithResult(r, OutcomeResult(u.Outcome), grouped)
}

// WithRunsProgress is st with what runs of units in flight told of
// their units (p, from their heartbeats or from the worker that runs
// them): each unit done shown as it ended, and each at work as running.
// A campaign takes a run's units in once the run reports, and until then
// shows those after its first as queued. What p says counts only for a
// unit that still waits or works in the attempt it is of; the campaign's
// own record, once it has one, is left as it is.
func WithRunsProgress(st CampaignState, p RunsProgress) CampaignState {
	if len(p.Done) == 0 && len(p.AtWork) == 0 {
		return st
	}
	at := make(map[string]int, len(st.Units))
	for i, u := range st.Units {
		at[u.Key] = i
	}
	st.Units = slices.Clone(st.Units)
	// set shows unit key of attempt in phases as next makes it.
	set := func(key string, attempt int, phases []TaskPhase, next func(UnitResult, bool) UnitResult) {
		i, ok := at[key]
		if !ok || attempt == 0 {
			return
		}
		r := st.Units[i]
		if !slices.Contains(phases, r.Phase) || r.Attempts != attempt {
			return
		}
		// A group's units show its repositories before it ends.
		n := max(len(r.Repos), 1)
		nr := next(r, n > 1)
		st.Summary.Count(r, n, -1)
		st.Summary.Count(nr, n, 1)
		st.Units[i] = nr
	}
	for _, d := range p.Done {
		set(d.Key, d.Attempt, []TaskPhase{TaskQueued, TaskRunning}, func(r UnitResult, grouped bool) UnitResult {
			return WithUnitDone(r, d, grouped)
		})
	}
	for _, u := range p.AtWork {
		set(u.Key, u.Attempt, []TaskPhase{TaskQueued}, func(r UnitResult, _ bool) UnitResult {
			r.Phase = TaskRunning
			return r
		})
	}
	return st
}

// OutcomeResult is the task result of a unit run as one activity.
func OutcomeResult(out RunOutcome) TaskResult {
	var tr TaskResult
	tr.Phase = TaskFailed
	switch out.Status.Phase {
	case protocol.PhaseComplete:
		tr.Phase = TaskCompleted
	case protocol.PhaseCancelled:
		tr.Phase = TaskCancelled
	}
	tr.Repositories = RepoResults(out.Result)
	tr.Error = out.Result.Error
	tr.SandboxesLost = len(out.Lost)
	tr.Notes = out.Notes
	tr.ModelUsage = out.Result.ModelUsage
	return tr
}

// WithError is r once its unit failed with message, or was cancelled.
func WithError(r UnitResult, message string, cancelled bool) UnitResult {
	r.Phase = TaskFailed
	r.Error = message
	if cancelled {
		r.Phase = TaskCancelled
	}
	return r
}

// WithResult is r once its unit's task ended with tr; grouped says
// whether the unit is a group of repositories.
func WithResult(r UnitResult, tr TaskResult, grouped bool) UnitResult {
	r.Phase = tr.Phase
	r.Error = tr.Error
	r.SandboxesLost = tr.SandboxesLost
	r.ModelUsage = r.ModelUsage.Plus(tr.ModelUsage)
	r.Applied = append(r.Applied, tr.Applied...)
	earlier := r.PRs
	r.PRs, r.Reports, r.Repos = nil, 0, nil
	for _, rr := range tr.Repositories {
		if grouped {
			ur := UnitRepo{Name: rr.Name, Status: rr.Status}
			if rr.PullRequest != nil {
				ur.PullRequest = rr.PullRequest.URL
			}
			r.Repos = append(r.Repos, ur)
		}
		if rr.PullRequest != nil {
			r.PRs = append(r.PRs, *rr.PullRequest)
		}
		if rr.Report != nil {
			r.Reports++
		}
		for _, fe := range rr.ForEach {
			if fe.Report != nil {
				r.Reports++
			}
		}
	}
	// A pull request an earlier run of the unit opened is still the
	// unit's when this one proposed nothing in its place (it failed, or
	// ran again to bring it up to date and could not).
	for _, pr := range earlier {
		if !slices.ContainsFunc(r.PRs, func(n protocol.PullRequestInfo) bool { return n.URL == pr.URL }) {
			r.PRs = append(r.PRs, pr)
		}
	}
	return r
}

func RepoResults(r protocol.Result) []RepoResult {
	out := make([]RepoResult, 0, len(r.Repositories))
	for _, rr := range r.Repositories {
		out = append(out, RepoResult{
			Name: rr.Name, Status: rr.Status, FilesModified: rr.FilesModified,
			PullRequest: rr.PullRequest, Report: rr.Report, ForEach: rr.ForEach, Error: rr.Error, ErrorKind: rr.ErrorKind,
		})
	}
	return out
}
