package render

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/visible"
)

// PRStates are the states `fleetlift prs --state` selects by: a pull
// request's state on its forge, draft for an open draft, and unread for
// one its follower has not read yet.
var PRStates = []string{forge.StateOpen, "draft", forge.StateMerged, forge.StateClosed, "unread"}

// PRState is the state p is selected by (PRStates).
func PRState(p status.FollowedPR) string {
	switch {
	case p.CheckedAt.IsZero() || p.State == "":
		return "unread"
	case p.State == forge.StateOpen && p.Draft:
		return "draft"
	}
	return p.State
}

// jsonPR is one pull request as `fleetlift prs -o json` and `status -o
// json` show it.
type jsonPR struct {
	Run        string `json:"run,omitempty"`
	Unit       string `json:"unit,omitempty"`
	Repository string `json:"repository"`
	URL        string `json:"url"`
	Number     int    `json:"number,omitempty"`
	Branch     string `json:"branch"`
	// State is open, draft, merged, closed, or unread (not read from
	// its forge yet).
	State          string    `json:"state"`
	Head           string    `json:"head,omitempty"`
	Base           string    `json:"base,omitempty"`
	Mergeable      string    `json:"mergeable,omitempty"`
	Review         string    `json:"review,omitempty"`
	Checks         string    `json:"checks,omitempty"`
	FailedChecks   []string  `json:"failed_checks,omitempty"`
	Labels         []string  `json:"labels,omitempty"`
	PushedByOthers bool      `json:"pushed_by_others,omitempty"`
	CheckedAt      time.Time `json:"checked_at,omitzero"`
	Error          string    `json:"error,omitempty"`
	// ReadySince is when it was first read ready to merge as the
	// definition's pull_request.merge says; MergeError why the forge
	// refused the merge that asked for.
	ReadySince time.Time `json:"ready_since,omitzero"`
	MergeError string    `json:"merge_error,omitempty"`
	// KeepCurrent says when keep_current last had its change made again
	// on its base, or why it was not.
	KeepCurrent string `json:"keep_current,omitempty"`
	// Done is what done_when said of a merged one's repository: done,
	// not_done or regressed; DoneAt when it last ran, DoneNote what a
	// failing check said or why it did not run.
	Done     string    `json:"done,omitempty"`
	DoneAt   time.Time `json:"done_at,omitzero"`
	DoneNote string    `json:"done_note,omitempty"`
}

func prJSON(run string, p status.FollowedPR) jsonPR {
	out := jsonPR{Run: run, Unit: p.Unit, Repository: p.Repo, URL: git.Redact(p.URL), Number: p.Number, Branch: p.Branch,
		State: PRState(p), Head: p.Head, Base: p.Base, Mergeable: p.Mergeable, Review: p.Review, Checks: p.Checks,
		FailedChecks: p.FailedChecks, Labels: p.Labels, PushedByOthers: p.Foreign, CheckedAt: p.CheckedAt, Error: p.Error}
	if out.State == forge.StateOpen || out.State == "draft" {
		out.ReadySince, out.MergeError, out.KeepCurrent = p.ReadySince, p.MergeError, p.KeepNote
	}
	if out.State == forge.StateMerged {
		out.Done, out.DoneAt, out.DoneNote = p.Done, p.DoneAt, p.DoneNote
	}
	if out.State != forge.StateOpen && out.State != "draft" {
		// What no longer decides anything.
		out.Mergeable, out.Review, out.Checks, out.FailedChecks, out.PushedByOthers = "", "", "", nil, false
	}
	return out
}

// RunPRs are the pull requests of one run.
type RunPRs struct {
	Run string
	PRs []status.FollowedPR
}

// jsonPRList is `fleetlift prs -o json`.
type jsonPRList struct {
	FormatVersion int      `json:"format_version"`
	PullRequests  []jsonPR `json:"pull_requests"`
	// Counts are the pull requests listed, by state; Done counts the
	// merged ones by what done_when said (none without done_when).
	Counts map[string]int `json:"counts"`
	Done   map[string]int `json:"done,omitempty"`
}

// PRsJSON writes the pull requests of runs as `fleetlift prs -o json`
// does: {"format_version", "pull_requests": [...], "counts": {state: n}}.
func PRsJSON(w io.Writer, runs []RunPRs) error {
	out := jsonPRList{FormatVersion: FormatVersion, PullRequests: []jsonPR{}, Counts: map[string]int{}}
	for _, r := range runs {
		for _, p := range r.PRs {
			j := prJSON(r.Run, p)
			out.PullRequests = append(out.PullRequests, j)
			out.Counts[j.State]++
			if j.Done != "" {
				if out.Done == nil {
					out.Done = map[string]int{}
				}
				out.Done[j.Done]++
			}
		}
	}
	return writeJSON(w, out)
}

// PRs prints the pull requests of runs as a table, and their counts by
// state.
func PRs(w io.Writer, runs []RunPRs) {
	tabs := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	tw := visible.Writer(tabs)
	fmt.Fprintln(tw, "RUN\tREPOSITORY\tSTATE\tREVIEW\tCHECKS\tMERGEABLE\tPULL REQUEST\tNOTE")
	counts, done := map[string]int{}, map[string]int{}
	for _, r := range runs {
		for _, p := range r.PRs {
			j := prJSON(r.Run, p)
			counts[j.State]++
			done[j.Done]++
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Run, j.Repository, stateCell(j), dash(j.Review), checksCell(j),
				dash(j.Mergeable), j.URL, prNote(j))
		}
	}
	tabs.Flush()
	var parts []string
	for _, s := range PRStates {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	line := "pull requests: " + strings.Join(parts, ", ")
	var ds []string
	for _, s := range state.DoneStates {
		if done[s] > 0 {
			ds = append(ds, fmt.Sprintf("%d %s", done[s], doneWords(s)))
		}
	}
	if len(ds) > 0 {
		line += "; of the merged, " + strings.Join(ds, ", ") + " (done_when)"
	}
	fmt.Fprintln(visible.Writer(w), line)
}

// stateCell is j's state as the table shows it: a merged one's with
// what done_when said.
func stateCell(j jsonPR) string {
	if j.Done == "" {
		return j.State
	}
	return j.State + ", " + doneWords(j.Done)
}

// doneWords is a Done state for people.
func doneWords(s string) string { return strings.ReplaceAll(s, "_", " ") }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func checksCell(j jsonPR) string {
	if j.Checks == forge.StatusFailure && len(j.FailedChecks) > 0 {
		return "failure (" + strings.Join(j.FailedChecks, ", ") + ")"
	}
	return dash(j.Checks)
}

// prNote says what a person should know of j beyond its state.
func prNote(j jsonPR) string {
	var notes []string
	if j.PushedByOthers {
		notes = append(notes, "someone else pushed to "+j.Branch)
	}
	switch {
	case j.KeepCurrent == "":
	case j.PushedByOthers:
		notes[0] += ": not made again"
	default:
		notes = append(notes, OneLine(j.KeepCurrent))
	}
	if j.MergeError != "" {
		notes = append(notes, "merge refused: "+OneLine(j.MergeError))
	}
	if j.Error != "" {
		notes = append(notes, "not read: "+OneLine(j.Error))
	}
	if j.DoneNote != "" {
		notes = append(notes, "done_when: "+OneLine(j.DoneNote))
	}
	return strings.Join(notes, "; ")
}

// prSummary is the state of the pull request at url among prs, as the
// status table shows it beside its URL; "" when unknown.
func prSummary(prs []status.FollowedPR, url string) string {
	i := slices.IndexFunc(prs, func(p status.FollowedPR) bool { return p.URL == url })
	if i < 0 {
		return ""
	}
	j := prJSON("", prs[i])
	if j.State == "unread" {
		return ""
	}
	parts := []string{j.State}
	if j.Done != "" {
		parts = append(parts, doneWords(j.Done))
	}
	if j.State == forge.StateOpen || j.State == "draft" {
		if j.Review != "" && j.Review != forge.DecisionNone {
			parts = append(parts, strings.ReplaceAll(j.Review, "_", " "))
		}
		if j.Checks != "" {
			parts = append(parts, "checks "+j.Checks)
		}
		if j.Mergeable == forge.MergeableConflict || j.Mergeable == forge.MergeableBehind {
			parts = append(parts, j.Mergeable)
		}
		if j.PushedByOthers {
			parts = append(parts, "pushed by others")
		}
	}
	return strings.Join(parts, ", ")
}

// jsonAct is `fleetlift prs merge|close -o json`.
type jsonAct struct {
	FormatVersion int                 `json:"format_version"`
	Run           string              `json:"run"`
	Action        string              `json:"action"`
	PullRequests  []status.ActOutcome `json:"pull_requests"`
	Counts        map[string]int      `json:"counts"`
}

// ActJSON writes what became of each pull request an action on run
// named: {"format_version", "run", "action", "pull_requests":
// [{"repo", "url", "outcome", "reason"}], "counts": {outcome: n}}.
func ActJSON(w io.Writer, run, action string, outcomes []status.ActOutcome) error {
	out := jsonAct{FormatVersion: FormatVersion, Run: run, Action: action, PullRequests: []status.ActOutcome{}, Counts: map[string]int{}}
	for _, o := range outcomes {
		o.URL = git.Redact(o.URL)
		out.PullRequests = append(out.PullRequests, o)
		out.Counts[o.Outcome]++
	}
	return writeJSON(w, out)
}

// Act prints what became of each pull request an action named, and the
// counts.
func Act(w io.Writer, action string, outcomes []status.ActOutcome) {
	tabs := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	tw := visible.Writer(tabs)
	fmt.Fprintln(tw, "REPOSITORY\tOUTCOME\tPULL REQUEST\tREASON")
	done := map[string]string{status.ActMerge: "merged", status.ActClose: "closed", status.ActUpdate: "queued", status.ActRetry: "queued"}[action]
	counts := map[string]int{}
	for _, o := range outcomes {
		outcome := o.Outcome
		if outcome == status.ActDone {
			outcome = done
		}
		counts[outcome]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", o.Repo, outcome, git.Redact(o.URL), OneLine(o.Reason))
	}
	tabs.Flush()
	var parts []string
	for _, s := range []string{done, status.ActSkipped, status.ActFailed} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no pull requests"}
	}
	fmt.Fprintf(visible.Writer(w), "%s: %s\n", action, strings.Join(parts, ", "))
}
