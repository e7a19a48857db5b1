package status

import (
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/state"
)

// QueryPullRequests is the query a PullRequests workflow answers with
// its PullRequests.
const QueryPullRequests = "pull-requests"

// UpdateRefresh is the update that has a PullRequests workflow read its
// pull requests from their forges now; it returns once it has.
const UpdateRefresh = "refresh"

// FollowerID is the workflow id of the PullRequests workflow that
// follows the pull requests of workflow source.
func FollowerID(source string) string { return source + "/pull-requests" }

// SignalHint tells a PullRequests workflow that something happened in
// repositories where it may follow pull requests (a webhook: a push, a
// review, a commit status or check): a PullRequestHint. It reads the
// pull requests it follows there soon rather than at its next pass.
const SignalHint = "hint"

// PullRequestHint names repositories as host/owner/name in lower case
// (webhook.PullRequestKey of a pull request's page), and the branches
// pushed to in them: a push to the base of a merged pull request has
// done_when run there again soon.
type PullRequestHint struct {
	Repositories []string   `json:"repositories"`
	Pushed       []PushHint `json:"pushed,omitempty"`
}

// PushHint is a push to Branch of Repository (host/owner/name).
type PushHint struct {
	Repository string `json:"repository"`
	Branch     string `json:"branch"`
}

// PullRequests is what a PullRequests workflow knows of the pull requests
// of the run it follows (Source): what became of each on its forge.
type PullRequests struct {
	// Source is the workflow whose pull requests these are: a campaign,
	// a page of one, or a task.
	Source string `json:"source"`
	// CheckedAt is when they were last read from their forges.
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// Passes counts the reads of them all; PartialReads the reads of
	// only some: those a webhook hinted at (SignalHint), or merged.
	Passes       int          `json:"passes,omitempty"`
	PartialReads int          `json:"partial_reads,omitempty"`
	PRs          []FollowedPR `json:"prs,omitempty"`
	// Ended: the source has ended and none of its pull requests is
	// open, or SupersededBy follows them; nothing is followed any more.
	Ended bool `json:"ended,omitempty"`
	// SupersededBy, for a page of a campaign, is the later run of the
	// page that follows its units' pull requests in its place.
	SupersededBy string `json:"superseded_by,omitempty"`
}

// Find is the followed pull request at url, if any.
func (p *PullRequests) Find(url string) (FollowedPR, bool) {
	for _, f := range p.PRs {
		if f.URL == url {
			return f, true
		}
	}
	return FollowedPR{}, false
}

// ChecksPending counts the open pull requests whose checks are still
// running, and those not read from their forge yet (just opened: their
// checks have most likely only begun), as max_pending_checks counts them.
func (p *PullRequests) ChecksPending() int {
	n := 0
	for _, f := range p.PRs {
		if f.CheckedAt.IsZero() || f.State == forge.StateOpen && f.Checks == forge.StatusPending {
			n++
		}
	}
	return n
}

// FollowedPR is one pull request a run opened and what became of it.
type FollowedPR struct {
	// Unit is the campaign unit (repository or group) that opened it;
	// empty for a task's.
	Unit string `json:"unit,omitempty"`
	// Repo is the repository's name in the definition.
	Repo string `json:"repo,omitempty"`
	protocol.PullRequestInfo
	// Status is what the forge said when last asked (zero until then).
	forge.PullRequestStatus
	// Foreign: the branch's head is no longer the commit fleetlift
	// pushed: someone else pushed to it (or had the forge update it).
	Foreign bool `json:"foreign,omitempty"`
	// CheckedAt is when the forge was last asked about it.
	CheckedAt time.Time `json:"checked_at,omitzero"`
	// Error is why the last read failed; Status is from the read
	// before it.
	Error string `json:"error,omitempty"`
	// ReadySince is when the follower first read it ready to merge as
	// its run's merge policy says (MergeBlocker), zero while it is not.
	ReadySince time.Time `json:"ready_since,omitzero"`
	// MergeError is why the forge refused the last merge the policy
	// asked for, at head MergeHead, at MergeTriedAt.
	MergeError   string    `json:"merge_error,omitempty"`
	MergeHead    string    `json:"merge_head,omitempty"`
	MergeTriedAt time.Time `json:"merge_tried_at,omitzero"`
	// KeptFor is the base commit (BaseSHA) for which keep_current last
	// had the change made again, and KeepNote why it was not, or how
	// asking for it failed.
	KeptFor  string `json:"kept_for,omitempty"`
	KeepNote string `json:"keep_note,omitempty"`
	// Done is what the definition's done_when last said of the
	// repository's default branch once the pull request merged: DoneYes,
	// DoneNo or DoneRegressed; "" until it ran. DoneAt is when it was
	// last asked, DoneBase the commit it ran on, DoneNote what a failing
	// check said, or why the check could not run (Done then keeps what
	// it said before).
	Done     string    `json:"done,omitempty"`
	DoneAt   time.Time `json:"done_at,omitzero"`
	DoneBase string    `json:"done_base,omitempty"`
	DoneNote string    `json:"done_note,omitempty"`
	// ReopenedFor is the DoneBase of the regression for which the
	// reconciler last had the unit make its change again.
	ReopenedFor string `json:"reopened_for,omitempty"`
}

// DoneCheck is a definition's done_when as the follower runs it on a
// merged pull request's repository: Manifest is the check's (mode
// check, its command, without repositories), Image what it runs in,
// Every how often it runs again. Its sandbox takes the definition's
// sandbox resources and placement (Namespace, RuntimeClass,
// NodeSelector), as the work's sandboxes do.
type DoneCheck struct {
	Manifest     protocol.Manifest `json:"manifest"`
	Image        string            `json:"image,omitempty"`
	Every        time.Duration     `json:"every"`
	Resources    sandbox.Resources `json:"resources,omitzero"`
	Namespace    string            `json:"namespace,omitempty"`
	RuntimeClass string            `json:"runtime_class,omitempty"`
	NodeSelector map[string]string `json:"node_selector,omitempty"`
}

// Settled reports whether p's pull request will not change any more:
// merged. A closed one may be reopened.
func (p FollowedPR) Settled() bool { return p.State == forge.StateMerged }

// Open reports whether p's pull request is open, or not read yet.
func (p FollowedPR) Open() bool { return p.State == "" || p.State == forge.StateOpen }

// Reopened reports whether p's done_when regressed and the reconciler
// had its change made again for the commit it regressed at
// (UpdateReopened): that regression is not reopened again.
func (p FollowedPR) Reopened() bool {
	return p.Done == state.DoneRegressed && p.ReopenedFor != "" && p.ReopenedFor == p.DoneBase
}

// UnitPRs are the pull requests campaign units opened, each with the
// unit and the repository (of a group: the one whose pull request it
// is).
func UnitPRs(units []UnitResult) []FollowedPR {
	var out []FollowedPR
	for _, u := range units {
		for _, pr := range u.PRs {
			repo := u.Key
			for _, ur := range u.Repos {
				if ur.PullRequest == pr.URL {
					repo = u.Key + "/" + ur.Name
				}
			}
			out = append(out, FollowedPR{Unit: u.Key, Repo: repo, PullRequestInfo: pr})
		}
	}
	return out
}

// RepoPRs are the pull requests a task opened in repos.
func RepoPRs(repos []RepoResult) []FollowedPR {
	var out []FollowedPR
	for _, rr := range repos {
		if rr.PullRequest != nil {
			out = append(out, FollowedPR{Repo: rr.Name, PullRequestInfo: *rr.PullRequest})
		}
	}
	return out
}

// Opened are the pull requests run opened, as it opened them.
func (run *Run) Opened() []FollowedPR {
	switch {
	case run.Campaign != nil:
		return UnitPRs(run.Campaign.Units)
	case run.Task == nil:
		return nil
	case run.Task.Final != nil:
		return RepoPRs(run.Task.Final.Repositories)
	case run.Task.Result != nil:
		var out []FollowedPR
		for _, rr := range run.Task.Result.Repositories {
			if rr.PullRequest != nil {
				out = append(out, FollowedPR{Repo: rr.Name, PullRequestInfo: *rr.PullRequest})
			}
		}
		return out
	}
	return nil
}

// Followers are the workflows whose pull requests' followers follow
// run's: the run's own, or, for a campaign run in pages, its pages'.
func (run *Run) Followers() []string {
	if run.Campaign == nil || len(run.Campaign.Pages) == 0 {
		return []string{run.ID}
	}
	var out []string
	for _, p := range run.Campaign.Pages {
		if p.WorkflowID != "" {
			out = append(out, p.WorkflowID)
		}
	}
	return out
}

// UpdateAct is the update that has a PullRequests workflow act on the
// pull requests it follows (ActRequest); it returns an ActResult.
const UpdateAct = "act"

// UpdateReopened tells a follower that the units named (a []string of
// unit keys) were asked to make their change again because their
// done_when regressed: each of their regressed pull requests records
// the commit it regressed at (ReopenedFor), so that one regression is
// reopened once. It returns how many it marked.
const UpdateReopened = "reopened"

// Actions on pull requests, as ActRequest.Action holds them.
const (
	ActMerge = "merge"
	ActClose = "close"
)

// ActRequest asks a PullRequests workflow to merge or close the pull
// requests it follows: those of Repos (the definition's names, as
// FollowedPR.Repo; none means every one) that may be.
type ActRequest struct {
	Action string   `json:"action"`
	Repos  []string `json:"repos,omitempty"`
	// Method is the merge method (forge.MergeMethods; empty: merge).
	Method string `json:"method,omitempty"`
	// Unapproved merges pull requests no reviewer approved (still
	// never one with changes requested).
	Unapproved bool `json:"unapproved,omitempty"`
	// Comment is left on each pull request closed.
	Comment      string `json:"comment,omitempty"`
	DeleteBranch bool   `json:"delete_branch,omitempty"`
}

// ActUpdate and ActRetry are `fleetlift prs update` and `prs retry`:
// the change of each pull request named is made again, on its base as
// it is now, by running its campaign unit again (not by the follower).
const (
	ActUpdate = "update"
	ActRetry  = "retry"
)

// Outcomes of an action on one pull request.
const (
	ActDone    = "done"
	ActSkipped = "skipped"
	ActFailed  = "failed"
)

// ActOutcome is what became of one pull request an ActRequest named.
type ActOutcome struct {
	Repo    string `json:"repo"`
	URL     string `json:"url"`
	Outcome string `json:"outcome"`
	// Reason says why it was skipped or failed.
	Reason string `json:"reason,omitempty"`
}

// ActResult answers UpdateAct.
type ActResult struct {
	Outcomes []ActOutcome `json:"outcomes"`
}

// MergeBlocker says why p may not be merged now, "" when it may: it
// must be open and no draft, merge cleanly (behind its base is fine),
// have no failed or running checks, and be approved by a reviewer
// (unless unapproved) with no changes requested.
func MergeBlocker(p FollowedPR, unapproved bool) string {
	switch {
	case p.CheckedAt.IsZero() || p.State == "":
		return "not read from its forge yet"
	case p.State != forge.StateOpen:
		return "it is " + p.State
	case p.Draft:
		return "it is a draft"
	case p.Mergeable == forge.MergeableConflict:
		return "it conflicts with its base"
	case p.Mergeable == "":
		return "the forge has not worked out whether it merges"
	case p.Checks == forge.StatusFailure:
		if len(p.FailedChecks) > 0 {
			return "checks failed: " + strings.Join(p.FailedChecks, ", ")
		}
		return "checks failed"
	case p.Checks == forge.StatusPending:
		return "checks are still running"
	case p.Review == forge.DecisionChangesRequested:
		return "a reviewer requested changes"
	case p.Review != forge.DecisionApproved && !unapproved:
		return "no reviewer approved it"
	}
	return ""
}

// Keep-current modes (pull_request.keep_current), and the states `prs
// update` and `prs retry` make again by default.
const (
	KeepConflicted = "conflicted"
	KeepBehind     = "behind"
	KeepFailing    = "failing"
)

// RegenerateBlocker says why p's change may not be made again to bring
// it up to date as mode says, "" when it is due: it is open, out of date
// as mode says (conflicted: conflicting with its base; behind: that, or
// behind it; failing: its checks failed) unless named (a person named
// it), nobody else pushed to its branch (their commits would be lost),
// and a campaign unit opened it. same is true when p is not out of date
// (or not open): nothing is amiss, whatever else holds.
func RegenerateBlocker(p FollowedPR, mode string, named bool) (why string, same bool) {
	stale := named
	switch mode {
	case KeepConflicted:
		stale = stale || p.Mergeable == forge.MergeableConflict
	case KeepBehind:
		stale = stale || p.Mergeable == forge.MergeableConflict || p.Mergeable == forge.MergeableBehind
	case KeepFailing:
		stale = stale || p.Checks == forge.StatusFailure
	}
	switch {
	case p.CheckedAt.IsZero() || p.State == "":
		return "not read from its forge yet", false
	case p.State != forge.StateOpen:
		return "it is " + p.State, true
	case p.Foreign:
		return "someone else pushed to its branch: fleetlift does not overwrite their commits", !stale
	case p.Unit == "":
		return "a single task's pull requests are made again by running the task again", !stale
	case !stale:
		return "it is not " + mode, true
	}
	return "", false
}

// CloseBlocker says why p may not be closed, "" when it may: it must
// be open.
func CloseBlocker(p FollowedPR) string {
	switch {
	case p.CheckedAt.IsZero() || p.State == "":
		return "not read from its forge yet"
	case p.State != forge.StateOpen:
		return "it is " + p.State
	}
	return ""
}

// MergePolicy is a definition's pull_request.merge: when and how its
// pull requests are merged by themselves.
type MergePolicy struct {
	Method string `json:"method,omitempty"`
	// Unapproved: no review is required (require_review: false).
	Unapproved bool `json:"unapproved,omitempty"`
	// After is how long a pull request must have been ready first.
	After        time.Duration `json:"after,omitempty"`
	DeleteBranch bool          `json:"delete_branch,omitempty"`
}
