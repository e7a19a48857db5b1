package render

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/visible"
)

// FormatVersion is the version of status -o json's format.
const FormatVersion = 1

// ListJSON writes the list of runs as status -o json without ID does:
// {"format_version", "runs": [...]}.
func ListJSON(w io.Writer, runs []status.Entry) error {
	out := jsonRunList{FormatVersion: FormatVersion}
	for _, r := range runs {
		out.Runs = append(out.Runs, jsonRunEntry{ID: r.ID, RunID: r.RunID, Workflow: r.Workflow, Kind: r.Kind, Definition: r.Definition,
			Status: r.Status, Phase: r.Phase, Digest: r.Digest, Generation: r.Generation, Started: r.Started, Closed: r.Closed})
	}
	return writeJSON(w, out)
}

// JSON writes the run's state as status ID -o json does, with the
// results awaiting approval (waiting), and their patches with diff.
func JSON(w io.Writer, s *status.Run, waiting []*status.TaskState, diff bool) error {
	return writeJSON(w, runJSON(s, waiting, diff))
}

// jsonRunList is status -o json without ID.
type jsonRunList struct {
	FormatVersion int            `json:"format_version"`
	Runs          []jsonRunEntry `json:"runs"`
}

// jsonRunEntry is one run in the list.
type jsonRunEntry struct {
	ID         string `json:"id"`
	RunID      string `json:"run_id"`
	Workflow   string `json:"workflow"`
	Kind       string `json:"kind,omitempty"`
	Definition string `json:"definition,omitempty"`
	Status     string `json:"status"`
	Phase      string `json:"phase"`
	Digest     string `json:"digest,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	Started    string `json:"started"`
	Closed     string `json:"closed,omitempty"`
}

// jsonRun is status ID -o json.
type jsonRun struct {
	FormatVersion int    `json:"format_version"`
	ID            string `json:"id"`
	Workflow      string `json:"workflow"`
	Closed        bool   `json:"closed"`
	Phase         string `json:"phase"`
	Message       string `json:"message,omitempty"`
	Error         string `json:"error,omitempty"`
	// Notes say what of the definition the task's sandboxes could not
	// apply (a credentials secret_ref in a local sandbox).
	Notes     []string     `json:"notes,omitempty"`
	Suspended bool         `json:"suspended,omitempty"`
	Summary   *jsonSummary `json:"summary,omitempty"`
	// ModelUsage is what the run's agents used of their models, as the
	// worker's gateway counted it.
	ModelUsage       *protocol.ModelUsage `json:"model_usage,omitempty"`
	Repositories     []jsonRepo           `json:"repositories"`
	AwaitingApproval []jsonAwaiting       `json:"awaiting_approval"`
	// PullRequests are those the run opened, with what became of each
	// (as `fleetlift prs -o json` lists them).
	PullRequests []jsonPR `json:"pull_requests,omitempty"`
}

type jsonSummary struct {
	Total        int `json:"total"`
	Completed    int `json:"completed"`
	Failed       int `json:"failed"`
	Skipped      int `json:"skipped"`
	Cancelled    int `json:"cancelled"`
	Running      int `json:"running"`
	PullRequests int `json:"pull_requests"`
	Reports      int `json:"reports"`
}

type jsonRepo struct {
	Name         string   `json:"name"`
	Status       string   `json:"status"`
	PullRequests []string `json:"pull_requests"`
	Files        []string `json:"files,omitempty"`
	Error        string   `json:"error,omitempty"`
	WorkflowID   string   `json:"workflow_id,omitempty"`
	Attempts     int      `json:"attempts,omitempty"`
	// SandboxesLost: a campaign's unit's sandboxes lost to crashes and
	// replaced in its latest run.
	SandboxesLost int                  `json:"sandboxes_lost,omitempty"`
	ModelUsage    *protocol.ModelUsage `json:"model_usage,omitempty"`
}

type jsonAwaiting struct {
	Task         string       `json:"task"`
	ResultDigest string       `json:"result_digest"`
	Changes      []jsonChange `json:"changes"`
}

type jsonChange struct {
	Repository string `json:"repository"`
	Path       string `json:"path"`
	Status     string `json:"status"`
	Additions  int    `json:"additions"`
	Deletions  int    `json:"deletions"`
	Truncated  bool   `json:"truncated,omitempty"`
	Diff       string `json:"diff,omitempty"`
}

// runJSON is the run's state as status -o json shows it, with the results
// awaiting approval (their patches too, with diff).
func runJSON(s *status.Run, waiting []*status.TaskState, diff bool) jsonRun {
	out := jsonRun{FormatVersion: FormatVersion, ID: s.ID, Closed: s.Closed, Repositories: []jsonRepo{}, AwaitingApproval: []jsonAwaiting{}}
	if c := s.Campaign; c != nil {
		out.Workflow, out.Phase, out.Message, out.Suspended = "Campaign", string(c.Phase), c.Message, c.Suspended
		sm := c.Summary
		out.ModelUsage = campaignUsage(c)
		out.Summary = &jsonSummary{Total: sm.Total, Completed: sm.Completed, Failed: sm.Failed, Skipped: sm.Skipped,
			Cancelled: sm.Cancelled, Running: sm.Running, PullRequests: sm.PRsCreated, Reports: sm.ReportsCollected}
		for _, u := range c.Units {
			r := jsonRepo{Name: u.Key, Status: string(u.Phase), PullRequests: []string{}, Error: u.Error, WorkflowID: u.WorkflowID,
				Attempts: u.Attempts, SandboxesLost: u.SandboxesLost, ModelUsage: u.ModelUsage}
			for _, pr := range u.PRs {
				r.PullRequests = append(r.PullRequests, pr.URL)
			}
			out.Repositories = append(out.Repositories, r)
		}
	} else if t := s.Task; t != nil {
		out.Workflow, out.Phase, out.Message = "Task", string(t.Phase), t.Message
		out.ModelUsage = taskUsage(t)
		out.Notes = taskNotes(t)
		switch {
		case t.Final != nil:
			out.Error = t.Final.Error
			for _, rr := range t.Final.Repositories {
				r := jsonRepo{Name: rr.Name, Status: rr.Status, PullRequests: []string{}, Files: rr.FilesModified, Error: rr.Error}
				if rr.PullRequest != nil {
					r.PullRequests = append(r.PullRequests, rr.PullRequest.URL)
				}
				out.Repositories = append(out.Repositories, r)
			}
		case t.Result != nil:
			for _, rr := range t.Result.Repositories {
				out.Repositories = append(out.Repositories, jsonRepo{Name: rr.Name, Status: rr.Status, PullRequests: []string{}, Files: rr.FilesModified, Error: rr.Error})
			}
		}
	}
	for _, p := range s.PullRequests {
		out.PullRequests = append(out.PullRequests, prJSON("", p))
	}
	for _, t := range waiting {
		a := jsonAwaiting{Task: t.ID, ResultDigest: t.ResultDigest, Changes: []jsonChange{}}
		for _, r := range t.Result.Repositories {
			for _, d := range r.Diffs {
				ch := jsonChange{Repository: r.Name, Path: d.Path, Status: d.Status, Additions: d.Additions, Deletions: d.Deletions, Truncated: d.Truncated}
				if diff {
					ch.Diff = d.Diff
				}
				a.Changes = append(a.Changes, ch)
			}
		}
		out.AwaitingApproval = append(out.AwaitingApproval, a)
	}
	return out
}

// writeJSON writes v indented, with a trailing newline. Text from runs
// keeps its value, with every character a terminal would act on escaped.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(visible.JSON(b.Bytes()))
	return err
}
