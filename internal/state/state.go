package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrNotFound is returned (wrapped) by Reader.Get for an id with no
// recorded state.
var ErrNotFound = errors.New("no recorded state")

// Reader reads recorded state. It is all the plan needs.
type Reader interface {
	// Get returns the state recorded for id, or an error wrapping
	// ErrNotFound.
	Get(ctx context.Context, id string) (Campaign, error)
	// List returns every recorded campaign, sorted by ID.
	List(ctx context.Context) ([]Campaign, error)
}

// Writer records state. Both methods are idempotent: putting the same
// value twice, or deleting an id that is not there, is not an error.
type Writer interface {
	// Put records c, replacing what was recorded for c.ID. It refuses a
	// campaign that does not Validate.
	Put(ctx context.Context, c Campaign) error
	// Delete forgets id.
	Delete(ctx context.Context, id string) error
}

// Store reads and writes recorded state.
type Store interface {
	Reader
	Writer
}

// Kind says whether a definition is a Task or a Campaign. Its values are
// those of spec.Kind.
type Kind string

const (
	KindTask     Kind = "Task"
	KindCampaign Kind = "Campaign"
)

func (k Kind) String() string { return string(k) }

// Phase is where a run is.
type Phase string

const (
	// PhasePending: recorded, not started yet.
	PhasePending Phase = "pending"
	// PhaseRunning: tasks are running or about to start.
	PhaseRunning Phase = "running"
	// PhaseAwaitingApproval: a result waits for an approval.
	PhaseAwaitingApproval Phase = "awaiting_approval"
	// PhasePaused: a campaign passed its failure threshold and waits for
	// continue, abort or retry.
	PhasePaused Phase = "paused"
	// PhaseSuspended: the spec says suspend; no new task starts.
	PhaseSuspended Phase = "suspended"
	// PhaseCompleted: the run finished and every repository completed.
	PhaseCompleted Phase = "completed"
	// PhaseCompletedWithFailures: the run finished; some repositories
	// completed, others failed or were cancelled.
	PhaseCompletedWithFailures Phase = "completed_with_failures"
	// PhaseFailed: the run failed, or finished with no repository
	// completed.
	PhaseFailed Phase = "failed"
	// PhaseAborted: a campaign was stopped by abort or its threshold.
	PhaseAborted Phase = "aborted"
	// PhaseCancelled: the run was cancelled (pruned, or restarted).
	PhaseCancelled Phase = "cancelled"
)

func (p Phase) String() string { return string(p) }

// Done reports whether the run has finished: nothing more happens in it.
func (p Phase) Done() bool {
	switch p {
	case PhaseCompleted, PhaseCompletedWithFailures, PhaseFailed, PhaseAborted, PhaseCancelled:
		return true
	}
	return false
}

// Known reports whether p is one of the phases above.
func (p Phase) Known() bool {
	switch p {
	case PhasePending, PhaseRunning, PhaseAwaitingApproval, PhasePaused, PhaseSuspended,
		PhaseCompleted, PhaseCompletedWithFailures, PhaseFailed, PhaseAborted, PhaseCancelled:
		return true
	}
	return false
}

// RepoStatus is where one repository of a run is.
type RepoStatus string

const (
	RepoPending          RepoStatus = "pending"
	RepoRunning          RepoStatus = "running"
	RepoAwaitingApproval RepoStatus = "awaiting_approval"
	RepoCompleted        RepoStatus = "completed"
	RepoFailed           RepoStatus = "failed"
	RepoSkipped          RepoStatus = "skipped"
	RepoCancelled        RepoStatus = "cancelled"
)

func (s RepoStatus) String() string { return string(s) }

// PullRequestState is the state of a pull request on its forge.
type PullRequestState string

const (
	PullRequestOpen   PullRequestState = "open"
	PullRequestMerged PullRequestState = "merged"
	PullRequestClosed PullRequestState = "closed"
)

func (s PullRequestState) String() string { return string(s) }

// Repo is what happened in one repository of a run.
type Repo struct {
	// Name identifies the repository within the definition: its name, or
	// "group/name" for a repository in a group.
	Name             string           `json:"name"`
	Status           RepoStatus       `json:"status"`
	Branch           string           `json:"branch,omitempty"`
	PullRequestURL   string           `json:"pull_request_url,omitempty"`
	PullRequestState PullRequestState `json:"pull_request_state,omitempty"`
	// PullRequest is what the forge said of the pull request when it
	// was last read; nil until then (PullRequestState is then open, as
	// opened).
	PullRequest *PullRequestStatus `json:"pull_request,omitempty"`
}

// PullRequestStatus is a pull request as its forge had it when last
// read.
type PullRequestStatus struct {
	Number int  `json:"number,omitempty"`
	Draft  bool `json:"draft,omitempty"`
	// Head is the commit at its head; Base the branch it targets.
	Head string `json:"head,omitempty"`
	Base string `json:"base,omitempty"`
	// Mergeable is mergeable, conflicting, behind, or empty while the
	// forge has not worked it out.
	Mergeable string `json:"mergeable,omitempty"`
	// Review is approved, changes_requested or none.
	Review string `json:"review,omitempty"`
	// Checks is success, pending or failure, empty when it has none;
	// FailedChecks names those that failed.
	Checks       string   `json:"checks,omitempty"`
	FailedChecks []string `json:"failed_checks,omitempty"`
	Labels       []string `json:"labels,omitempty"`
	// Foreign: someone other than fleetlift pushed to its branch.
	Foreign   bool      `json:"pushed_by_others,omitempty"`
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// Error is why the last read failed; the rest is from the read
	// before.
	Error string `json:"error,omitempty"`
	// Done is what the definition's done_when said of the repository's
	// default branch once the pull request merged: one of DoneStates;
	// empty until it ran (or without done_when). DoneNote is what a
	// failing check said, or why it could not run.
	Done     string `json:"done,omitempty"`
	DoneNote string `json:"done_note,omitempty"`
	// Reopened: the reconciler had the change made again for the
	// regression Done says (the unit runs, or ran, again).
	Reopened bool `json:"reopened,omitempty"`
}

// What done_when says of a merged pull request's repository, as
// PullRequestStatus.Done holds it.
const (
	// DoneYes: the check passes on the default branch.
	DoneYes = "done"
	// DoneNo: merged, and the check does not pass yet.
	DoneNo = "not_done"
	// DoneRegressed: the check passed once, and no longer does.
	DoneRegressed = "regressed"
)

// DoneStates are the Done states, in the order people read them.
var DoneStates = []string{DoneYes, DoneNo, DoneRegressed}

// PendingApproval is a result waiting for an approval.
type PendingApproval struct {
	// Target names the task waiting: the task id, or the campaign id and
	// the repository or group ("slog-rollout/payments").
	Target string `json:"target"`
	// ResultDigest identifies the result waiting; an approval applies only
	// when it names this digest.
	ResultDigest string    `json:"result_digest"`
	Since        time.Time `json:"since,omitzero"`
	// WorkflowID is the task workflow waiting, to send the decision to.
	WorkflowID string `json:"workflow_id,omitempty"`
	// Repos summarises the result per repository: the files changed and
	// lines added and removed.
	Repos []PendingRepo `json:"repos,omitempty"`
}

// PendingRepo is one repository's part of a result awaiting approval.
type PendingRepo struct {
	Name  string        `json:"name"`
	Files []PendingFile `json:"files,omitempty"`
	// Report says the repository produced a report (report mode).
	Report bool `json:"report,omitempty"`
}

// PendingFile is one changed file of a result awaiting approval.
type PendingFile struct {
	Path      string `json:"path"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
}

// ReportStatus is how one report of a report-mode run came out.
type ReportStatus string

const (
	// ReportValid: collected, and its frontmatter matches the output
	// schema (or there is none).
	ReportValid ReportStatus = "valid"
	// ReportEmpty: collected but empty, or with neither data nor text:
	// not a failure, flagged for a person to look at.
	ReportEmpty ReportStatus = "empty"
	// ReportInvalid: the frontmatter does not parse, or fails the schema.
	ReportInvalid ReportStatus = "invalid"
	// ReportMissing: no report was written.
	ReportMissing ReportStatus = "missing"
	// ReportFailed: the repository failed before it could report (clone,
	// setup, the agent's exit status), or its task did.
	ReportFailed ReportStatus = "failed"
	// ReportPending: not collected yet; the repository runs or waits.
	ReportPending ReportStatus = "pending"
	// ReportSkipped: the run ended without running the repository.
	ReportSkipped ReportStatus = "skipped"
)

func (s ReportStatus) String() string { return string(s) }

// Report is one report of a report-mode run: a repository's, or one of
// its for_each targets'.
type Report struct {
	// Unit is the campaign's unit (a repository or a group) the report
	// comes from; empty for a Task.
	Unit string `json:"unit,omitempty"`
	// Repository is the repository reported on, or the transformation
	// repository for a report over targets; the unit's name while its
	// repositories are not known yet.
	Repository string `json:"repository"`
	// Target is the for_each target; empty without for_each.
	Target string       `json:"target,omitempty"`
	Status ReportStatus `json:"status"`
	// Frontmatter is the report's structured data, a JSON object, when
	// it parsed.
	Frontmatter json.RawMessage `json:"frontmatter,omitempty"`
	// Body is the report's markdown after the frontmatter.
	Body string `json:"body,omitempty"`
	// Raw is the report as written, kept when it failed.
	Raw string `json:"raw,omitempty"`
	// Error says why the report, or the repository, failed; ErrorKind is
	// the agent's kind of report failure (report_missing,
	// frontmatter_invalid, schema_invalid).
	Error     string `json:"error,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"`
	// ValidationErrors lists every way the frontmatter fails the schema.
	ValidationErrors []string `json:"validation_errors,omitempty"`
	// Warning flags a collected report for a person to look at.
	Warning string `json:"warning,omitempty"`
}

// Campaign is the recorded state of one Task or Campaign definition.
type Campaign struct {
	// ID is the definition's id.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// File is the definition file the spec was applied from, relative to
	// the campaigns root. The plan uses it to tell a file that became
	// invalid from a definition removed from Git. Optional.
	File string `json:"file,omitempty"`
	// SpecDigest is spec.Definition.Digest of the spec as applied.
	SpecDigest string `json:"spec_digest"`
	// Spec is the normalised spec as applied (the JSON of spec.Task or
	// spec.Campaign), for per-field diffs. Optional: without it the plan
	// can only say that the digest changed.
	Spec json.RawMessage `json:"spec,omitempty"`
	// SourceRevision is the campaigns repository commit it was applied from.
	SourceRevision string `json:"source_revision,omitempty"`
	// Generation counts the specs applied to this id; it grows by one with
	// each new spec.
	Generation int64  `json:"generation"`
	WorkflowID string `json:"workflow_id,omitempty"`
	RunID      string `json:"run_id,omitempty"`
	Phase      Phase  `json:"phase"`
	// Message says why the run is paused, or how it ended: "2 of 6
	// repositories failed, 4 completed". Optional.
	Message string `json:"message,omitempty"`
	// AwaitingPieces, above 0, is the page of its units (from 1) that a
	// running campaign run in pages waits for, having run every unit it
	// holds: what started it stopped before it had sent them all. The
	// reconciler sends them again.
	AwaitingPieces int `json:"awaiting_pieces,omitempty"`
	// Prune is the spec's sync_policy.prune as applied: whether removing
	// the definition from Git may cancel the run.
	Prune bool `json:"prune,omitempty"`
	// Suspended is the spec's suspend as applied.
	Suspended bool `json:"suspended,omitempty"`
	// Repos lists every repository of the run, started or not, sorted by
	// Name.
	Repos []Repo `json:"repos,omitempty"`
	// PendingApprovals lists the results waiting for approval, sorted by
	// Target.
	PendingApprovals []PendingApproval `json:"pending_approvals,omitempty"`
	// AppliedApprovals lists the approval records (approval.Record.ID)
	// the run has carried out; such a record is never carried out again.
	AppliedApprovals []string `json:"applied_approvals,omitempty"`
	// Reports lists the reports of a report-mode run, unit by unit and
	// repository by repository, for_each targets in their order; none
	// for a transform.
	Reports []Report `json:"reports,omitempty"`
	// Usage is what the run's agents' model calls used and cost so far;
	// nil when none called a model.
	Usage *Usage `json:"usage,omitempty"`
}

// Usage is what a run's model calls used and cost, as the workers'
// gateways counted them from the models' responses.
type Usage struct {
	Requests int64 `json:"requests"`
	Tokens   int64 `json:"tokens"`
	// CostUSD is what the calls cost, in US dollars at the workers'
	// price tables.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Unpriced names the models no price table priced, separated by
	// ", ": CostUSD leaves their calls out.
	Unpriced string `json:"unpriced_models,omitempty"`
	// Repositories counts the repositories whose tasks called a model
	// (a group's each): what a cost per repository divides by.
	Repositories int `json:"repositories"`
}

// CostPerRepository is CostUSD per repository that called a model, and
// whether there is one: a run that priced every call of at least one
// repository.
func (u *Usage) CostPerRepository() (float64, bool) {
	if u == nil || u.Repositories == 0 || u.Unpriced != "" || u.CostUSD <= 0 {
		return 0, false
	}
	return u.CostUSD / float64(u.Repositories), true
}

// Validate reports what makes c unfit to record: no id, an unknown kind or
// phase, or a spec that is not JSON.
func (c Campaign) Validate() error {
	if c.ID == "" {
		return errors.New("campaign has no id")
	}
	if c.Kind != KindTask && c.Kind != KindCampaign {
		return fmt.Errorf("campaign %s: kind %q is neither Task nor Campaign", c.ID, string(c.Kind))
	}
	if c.Phase != "" && !c.Phase.Known() {
		return fmt.Errorf("campaign %s: unknown phase %q", c.ID, string(c.Phase))
	}
	if len(c.Spec) > 0 && !json.Valid(c.Spec) {
		return fmt.Errorf("campaign %s: spec is not valid JSON", c.ID)
	}
	for _, r := range c.Reports {
		if len(r.Frontmatter) > 0 && !json.Valid(r.Frontmatter) {
			return fmt.Errorf("campaign %s: the frontmatter of the report on %s is not valid JSON", c.ID, r.Repository)
		}
	}
	return nil
}

// Clone returns a deep copy of c: changing one never changes the other.
func (c Campaign) Clone() Campaign {
	c.Spec = slices.Clone(c.Spec)
	c.Repos = slices.Clone(c.Repos)
	for i, r := range c.Repos {
		if r.PullRequest != nil {
			p := *r.PullRequest
			p.FailedChecks, p.Labels = slices.Clone(p.FailedChecks), slices.Clone(p.Labels)
			c.Repos[i].PullRequest = &p
		}
	}
	c.PendingApprovals = slices.Clone(c.PendingApprovals)
	c.AppliedApprovals = slices.Clone(c.AppliedApprovals)
	c.Reports = slices.Clone(c.Reports)
	for i := range c.Reports {
		c.Reports[i].Frontmatter = slices.Clone(c.Reports[i].Frontmatter)
		c.Reports[i].ValidationErrors = slices.Clone(c.Reports[i].ValidationErrors)
	}
	return c
}

// Pending returns the approval pending for target, if any.
func (c Campaign) Pending(target string) (PendingApproval, bool) {
	for _, p := range c.PendingApprovals {
		if p.Target == target {
			return p, true
		}
	}
	return PendingApproval{}, false
}

// IsReport reports whether a normalised spec (Campaign.Spec: the JSON
// of a spec.Task or spec.Campaign) runs in report mode: a Task's mode,
// or a Campaign's template's.
func IsReport(spec json.RawMessage) bool {
	var s struct {
		Mode     string `json:"mode"`
		Template *struct {
			Mode string `json:"mode"`
		} `json:"template"`
	}
	if json.Unmarshal(spec, &s) != nil {
		return false
	}
	if s.Template != nil {
		return s.Template.Mode == "report"
	}
	return s.Mode == "report"
}
