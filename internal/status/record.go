package status

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// Memo keys every run records when it starts; a campaign updated in
// place records the new spec's under the same keys. The state reader
// (package state/temporal) reads them.
const (
	MemoKind       = "fleetlift.kind"
	MemoID         = "fleetlift.id"
	MemoDigest     = "fleetlift.digest"
	MemoFile       = "fleetlift.file"
	MemoSpec       = "fleetlift.spec"
	MemoGeneration = "fleetlift.generation"
	MemoRevision   = "fleetlift.revision"
	MemoPhase      = "fleetlift.phase"
)

// SearchPhase is the name of the search attribute (a Keyword) that
// keeps a run's phase current: a TaskPhase or a CampaignPhase.
const SearchPhase = "FleetliftPhase"

// QueryStatus is the query both workflows answer with their state.
const QueryStatus = "status"

// TaskPhase is where a Task workflow is.
type TaskPhase string

const (
	TaskProvisioning     TaskPhase = "provisioning"
	TaskRunning          TaskPhase = "running"
	TaskAwaitingApproval TaskPhase = "awaiting_approval"
	TaskCreatingPRs      TaskPhase = "creating_prs"
	TaskCompleted        TaskPhase = "completed"
	TaskFailed           TaskPhase = "failed"
	TaskCancelled        TaskPhase = "cancelled"
	// TaskQueued: the unit is in a run of units that one activity works
	// through in turn (RunUnits), behind the one running; it starts once
	// those before it have ended, unless the campaign has stopped by
	// then.
	TaskQueued TaskPhase = "queued"
)

func (p TaskPhase) String() string { return string(p) }

// Done reports whether the phase is final.
func (p TaskPhase) Done() bool {
	return p == TaskCompleted || p == TaskFailed || p == TaskCancelled
}

// RepoResult is the outcome in one repository.
type RepoResult struct {
	Name          string                    `json:"name"`
	Status        string                    `json:"status"`
	FilesModified []string                  `json:"files_modified,omitempty"`
	PullRequest   *protocol.PullRequestInfo `json:"pull_request,omitempty"`
	Report        *protocol.Report          `json:"report,omitempty"`
	ForEach       []protocol.ForEachResult  `json:"for_each,omitempty"`
	Error         string                    `json:"error,omitempty"`
	// ErrorKind says how a report failed (protocol.ReportMissing,
	// ReportFrontmatterInvalid, ReportSchemaInvalid); empty otherwise.
	ErrorKind string `json:"error_kind,omitempty"`
}

// TaskResult is a Task workflow's result.
type TaskResult struct {
	ID           string       `json:"id"`
	Phase        TaskPhase    `json:"phase"`
	Repositories []RepoResult `json:"repositories"`
	Error        string       `json:"error,omitempty"`
	// Steers counts the steering rounds.
	Steers int `json:"steers,omitempty"`
	// Applied lists the approval records the task carried out (approve,
	// steer or reject), in order; an approval counts only when the task
	// completed.
	Applied []string `json:"applied,omitempty"`
	// SandboxesLost counts the sandboxes lost to crashes and replaced.
	SandboxesLost int `json:"sandboxes_lost,omitempty"`
	// Notes say what of the definition the task's sandboxes could not
	// apply, and what they did instead (each once).
	Notes []string `json:"notes,omitempty"`
	// ModelUsage is what the task's agent used of its model, as the
	// worker's gateway counted it; nil when it made no model call
	// through one.
	ModelUsage *protocol.ModelUsage `json:"model_usage,omitempty"`
	// Merge is as CampaignState.Merge.
	Merge *MergePolicy `json:"merge,omitempty"`
	// KeepCurrent is as CampaignState.KeepCurrent.
	KeepCurrent string `json:"keep_current,omitempty"`
	// Done is as CampaignState.Done.
	Done *DoneCheck `json:"done,omitempty"`
}

// TaskState answers QueryStatus on a Task workflow.
type TaskState struct {
	ID         string         `json:"id"`
	Phase      TaskPhase      `json:"phase"`
	AgentPhase protocol.Phase `json:"agent_phase,omitempty"`
	Message    string         `json:"message,omitempty"`
	Iteration  int            `json:"iteration"`
	// Result is the agent's latest result, with the diffs awaiting
	// approval.
	Result *protocol.Result `json:"result,omitempty"`
	// ResultDigest identifies the result awaiting approval (set while
	// Phase is awaiting_approval): a decision naming another digest is
	// about a result that has since changed, and is ignored.
	ResultDigest string `json:"result_digest,omitempty"`
	// AwaitingSince is when the result awaiting approval began to wait
	// (workflow time); zero when none waits.
	AwaitingSince time.Time   `json:"awaiting_since,omitzero"`
	Final         *TaskResult `json:"final,omitempty"`
	// Ignored lists the decisions ignored because they named a result
	// that was no longer the one awaiting approval (the latest 20).
	Ignored []string `json:"ignored,omitempty"`
	// Applied lists the approval records carried out so far.
	Applied []string `json:"applied,omitempty"`
	// Sandbox is the sandbox the task runs in now.
	Sandbox string `json:"sandbox,omitempty"`
	// Lost says, for each sandbox lost to a crash and replaced, what
	// happened.
	Lost []string `json:"lost,omitempty"`
	// LostUsage is what the lost sandboxes' model calls used: the
	// task's result counts it, and the sandboxes after them spend their
	// budgets on from it.
	LostUsage *protocol.ModelUsage `json:"lost_usage,omitempty"`
	// Notes are TaskResult.Notes so far.
	Notes []string `json:"notes,omitempty"`
	// Merge is as CampaignState.Merge.
	Merge *MergePolicy `json:"merge,omitempty"`
	// KeepCurrent is as CampaignState.KeepCurrent.
	KeepCurrent string `json:"keep_current,omitempty"`
	// Done is as CampaignState.Done.
	Done *DoneCheck `json:"done,omitempty"`
}

// UnitResult is the compact outcome of one unit, kept in the campaign's
// state (it must stay small for 10,000-repository campaigns).
type UnitResult struct {
	Key     string                     `json:"key"`
	Phase   TaskPhase                  `json:"phase"`
	PRs     []protocol.PullRequestInfo `json:"prs,omitempty"`
	Reports int                        `json:"reports,omitempty"`
	Error   string                     `json:"error,omitempty"`
	// Attempts counts runs of the unit (retries add one).
	Attempts int `json:"attempts"`
	// WorkflowID is the unit's latest Task workflow.
	WorkflowID string `json:"workflow_id,omitempty"`
	// Applied lists the approval records the unit's tasks carried out.
	Applied []string `json:"applied,omitempty"`
	// Repos is what happened in each repository of a unit of several
	// (a group), once it ran: its PRs and Reports count them together.
	Repos []UnitRepo `json:"repos,omitempty"`
	// SandboxesLost counts the sandboxes the unit's latest run lost to
	// crashes (an agent killed, a sandbox gone) and replaced: the work
	// ran again that many times.
	SandboxesLost int `json:"sandboxes_lost,omitempty"`
	// ModelUsage is what the unit's tasks used of their model, every
	// run (retries too) together.
	ModelUsage *protocol.ModelUsage `json:"model_usage,omitempty"`
}

// HasFailures reports whether the unit failed, or completed with a
// repository that failed: what retry-failed runs again.
func (u UnitResult) HasFailures() bool {
	if u.Phase == TaskFailed {
		return true
	}
	if u.Phase != TaskCompleted {
		return false
	}
	for _, r := range u.Repos {
		if r.Status == "failed" {
			return true
		}
	}
	return false
}

// UnitRepo is one repository of a group: its name, the agent's status
// (success, failed, skipped) and its pull request's URL.
type UnitRepo struct {
	Name        string `json:"name"`
	Status      string `json:"status"`
	PullRequest string `json:"pull_request,omitempty"`
}

// Skipped is the phase of units the campaign never started.
const Skipped TaskPhase = "skipped"

// CampaignPhase is where a campaign is: running or paused while it
// works, then one of the final phases, which say how it ended
// (FinalPhase).
type CampaignPhase string

const (
	CampaignRunning CampaignPhase = "running"
	CampaignPaused  CampaignPhase = "paused"
	// CampaignCompleted: every repository completed (those never started
	// after continue --skip-remaining aside).
	CampaignCompleted CampaignPhase = "completed"
	// CampaignCompletedWithFailures: some repositories completed, others
	// failed or were cancelled.
	CampaignCompletedWithFailures CampaignPhase = "completed_with_failures"
	// CampaignFailed: no repository completed; those that ran failed or
	// were cancelled.
	CampaignFailed CampaignPhase = "failed"
	// CampaignAborted: abort, or the failure threshold with the abort
	// action, stopped the campaign before every repository ran.
	CampaignAborted CampaignPhase = "aborted"
)

func (p CampaignPhase) String() string { return string(p) }

// FinalPhase is the phase a campaign that was in phase p ends in, given
// what its units did: aborted stays aborted; otherwise completed when no
// unit failed or was cancelled, failed when none completed, and
// completed_with_failures in between. Units never started (continue
// --skip-remaining) count neither way.
func FinalPhase(p CampaignPhase, s Summary) CampaignPhase {
	switch {
	case p == CampaignAborted:
		return CampaignAborted
	case s.Failed+s.Cancelled == 0:
		return CampaignCompleted
	case s.Completed == 0:
		return CampaignFailed
	}
	return CampaignCompletedWithFailures
}

// Summary counts a campaign's repositories: a group counts as the
// repositories it holds, each as the agent reported it (a repository that
// failed in a group that completed counts failed).
type Summary struct {
	Total            int `json:"total"`
	Completed        int `json:"completed"`
	Failed           int `json:"failed"`
	Skipped          int `json:"skipped"`
	Cancelled        int `json:"cancelled"`
	Running          int `json:"running"`
	PRsCreated       int `json:"prs_created"`
	ReportsCollected int `json:"reports_collected"`
	// ModelUsage is what the units' model calls used and cost, every
	// task and retry together; nil when none called a model.
	ModelUsage *protocol.ModelUsage `json:"model_usage,omitempty"`
}

// Add adds the counts and usage of o to s, Total included.
func (s *Summary) Add(o Summary) {
	s.Total += o.Total
	s.Completed += o.Completed
	s.Failed += o.Failed
	s.Skipped += o.Skipped
	s.Cancelled += o.Cancelled
	s.Running += o.Running
	s.PRsCreated += o.PRsCreated
	s.ReportsCollected += o.ReportsCollected
	s.Use(o.ModelUsage, 1)
}

// Use adds (sign 1) or takes away (sign -1) model usage u. A summary
// keeps no refusal: those are each task's.
func (s *Summary) Use(u *protocol.ModelUsage, sign int) {
	if u == nil {
		return
	}
	o := *u
	if sign < 0 {
		o = protocol.ModelUsage{Requests: -u.Requests, InputTokens: -u.InputTokens, OutputTokens: -u.OutputTokens,
			CacheCreationInputTokens: -u.CacheCreationInputTokens, CacheReadInputTokens: -u.CacheReadInputTokens,
			CostUSD: -u.CostUSD}
	}
	s.ModelUsage = s.ModelUsage.Plus(&o)
	s.ModelUsage.Refused = ""
}

// Describe says what the units did, the most telling count first: "2 of
// 6 repositories failed, 3 completed, 1 skipped", "5 repositories
// completed".
func (s Summary) Describe() string {
	if s.Total == 0 {
		return "no repositories"
	}
	if s.Completed == s.Total {
		return countRepos(s.Total) + " completed"
	}
	pending := s.Total - s.Completed - s.Failed - s.Cancelled - s.Skipped - s.Running
	counts := []struct {
		n    int
		what string
	}{{s.Failed, "failed"}, {s.Cancelled, "cancelled"}, {s.Completed, "completed"}, {s.Skipped, "skipped"},
		{s.Running, "running"}, {pending, "not started"}}
	var parts []string
	for _, c := range counts {
		switch {
		case c.n <= 0:
		case parts == nil:
			parts = append(parts, fmt.Sprintf("%d of %s %s", c.n, countRepos(s.Total), c.what))
		default:
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return strings.Join(parts, ", ")
}

func countRepos(n int) string {
	if n == 1 {
		return "1 repository"
	}
	return fmt.Sprintf("%d repositories", n)
}

// CampaignState answers QueryStatus on a Campaign workflow and is its
// result.
type CampaignState struct {
	ID      string        `json:"id"`
	Phase   CampaignPhase `json:"phase"`
	Summary Summary       `json:"summary"`
	Units   []UnitResult  `json:"units"`
	// Message says why a campaign paused or stopped; once it has ended,
	// what its units did ("2 of 6 repositories failed, 4 completed") and
	// why it stopped, if it did.
	Message string `json:"message,omitempty"`
	// Suspended: no new unit starts until the campaign is resumed.
	Suspended bool `json:"suspended,omitempty"`
	// Applied lists the approval records the campaign carried out.
	Applied []string `json:"applied,omitempty"`
	// Merge is the definition's pull_request.merge, which the follower
	// of its pull requests carries out; nil when it has none.
	Merge *MergePolicy `json:"merge,omitempty"`
	// KeepCurrent is the definition's pull_request.keep_current
	// (conflicted, behind; empty: never), which the follower of its
	// pull requests carries out.
	KeepCurrent string `json:"keep_current,omitempty"`
	// Done is the definition's done_when, which the follower of its pull
	// requests runs on each merged repository; nil when it has none.
	Done *DoneCheck `json:"done,omitempty"`
	// Pages: a campaign of more units than one page holds runs them a
	// page at a time, each page a workflow of its own that holds its
	// units' state, so that nothing the campaign carries grows with its
	// repositories. The campaign's own state then lists no Units, and
	// its Summary counts the pages that finished, with every
	// repository in Total; MergePages makes the whole from the pages'
	// states.
	Pages []PageRef `json:"pages,omitempty"`
	// AwaitingPieces, above 0, is the piece of its units (from 1) that a
	// campaign run in pages waits for, having run every unit it holds:
	// what started it stopped before it sent them all, and may send
	// them again (dispatch.ResendPieces).
	AwaitingPieces int `json:"awaiting_pieces,omitempty"`
}

// PageRef is one page of a campaign's units (CampaignState.Pages).
type PageRef struct {
	// WorkflowID is the page's latest run; empty while it has not
	// started.
	WorkflowID string `json:"workflow_id,omitempty"`
	// Units and Repositories count what the page holds.
	Units        int `json:"units"`
	Repositories int `json:"repositories"`
	// Done: the page's run has ended, and its result holds its units'
	// state for good (until a retry-failed runs it again).
	Done bool `json:"done,omitempty"`
}

// PageID is the workflow id of the run-th run (from 1) of page i (from
// 0) of the campaign whose workflow id is campaign and whose first run's
// id ends in firstRun: <campaign>/page-<i+1>@<firstRun>[/run-<run>].
func PageID(campaign string, i int, firstRun string, run int) string {
	id := fmt.Sprintf("%s/page-%d@%s", campaign, i+1, firstRun)
	if run > 1 {
		id += fmt.Sprintf("/run-%d", run)
	}
	return id
}

// PageIndex is the index (from 0) of the page a PageID names, and
// whether id is one.
func PageIndex(id string) (int, bool) {
	i := strings.LastIndex(id, "/page-")
	if i < 0 {
		return 0, false
	}
	n, rest, ok := strings.Cut(id[i+len("/page-"):], "@")
	k, err := strconv.Atoi(n)
	if !ok || err != nil || k < 1 || rest == "" {
		return 0, false
	}
	return k - 1, true
}

// MergePages is campaign c, whose units run in pages (c.Pages), with
// the units of pages, the states of those of its pages that started, in
// the order of c.Pages: their units in turn, and their counts, with the
// repositories of pages not started yet as not started. A page's message
// (its pull-request budget's wait, say) is the campaign's while the
// campaign has none of its own.
func MergePages(c CampaignState, pages []CampaignState) CampaignState {
	out := c
	out.Units = nil
	var sum Summary
	for _, p := range pages {
		out.Units = append(out.Units, p.Units...)
		sum.Add(p.Summary)
		if out.Message == "" && !isFinal(p.Phase) {
			out.Message = p.Message
		}
	}
	sum.Total = c.Summary.Total
	out.Summary = sum
	return out
}

// isFinal reports whether p is a phase a campaign ends in.
func isFinal(p CampaignPhase) bool {
	return p != CampaignRunning && p != CampaignPaused
}

// Count adds (sign 1) or takes away (sign -1) unit r of n repositories
// from the counts of what happened; Total is left alone.
func (s *Summary) Count(r UnitResult, n, sign int) {
	switch r.Phase {
	case TaskCompleted:
		failed := 0
		for _, rr := range r.Repos {
			if rr.Status == "failed" {
				failed++
			}
		}
		s.Completed += sign * (n - failed)
		s.Failed += sign * failed
	case TaskFailed:
		s.Failed += sign * n
	case TaskCancelled:
		s.Cancelled += sign * n
	case Skipped:
		s.Skipped += sign * n
	case TaskQueued:
		// Not started yet.
	default:
		s.Running += sign * n
	}
	s.PRsCreated += sign * len(r.PRs)
	s.ReportsCollected += sign * r.Reports
	s.Use(r.ModelUsage, sign)
}

// FinalMessage is the message of a campaign that ended with s, and
// stopped early as stopped says (empty: it did not).
func FinalMessage(s Summary, stopped string) string {
	if stopped == "" {
		return s.Describe()
	}
	return s.Describe() + "; " + stopped
}

// Final returns st, the result of a finished campaign, as this version
// reports it. Runs that finished before campaigns told their endings
// apart report "completed" whatever their units did, without counts.
func Final(st CampaignState) CampaignState {
	st.Phase = FinalPhase(st.Phase, st.Summary)
	if d := st.Summary.Describe(); !strings.HasPrefix(st.Message, d) {
		st.Message = FinalMessage(st.Summary, st.Message)
	}
	return st
}
