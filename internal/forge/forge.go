package forge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Forge opens pull requests. CreatePullRequest must be idempotent: called
// again for the same repository and branch it returns the pull request it
// already made (the branch name is deterministic), so a retried activity
// never opens two.
type Forge interface {
	CreatePullRequest(ctx context.Context, req PullRequestRequest) (*PullRequest, error)
	Name() string
}

// PullRequestRequest asks for the branch Head, already pushed or pushed by
// the forge from Dir, to be proposed against Base in Repository.
type PullRequestRequest struct {
	// Repository is the clone URL of the target repository.
	Repository string
	// Dir is the local clone holding Head.
	Dir  string
	Base string
	// Head is the branch to propose, in Dir and in Repository.
	Head string
	// Commit, when set, is the commit to propose (an object id in Dir),
	// which need not be Head in Dir; otherwise Head's commit in Dir is.
	Commit    string
	Title     string
	Body      string
	Labels    []string
	Reviewers []string
	Draft     bool
	// Committer, when set, is the email fleetlift commits as: a Head
	// that exists at a commit someone else committed is never moved
	// (ErrForeignBranch). A branch fleetlift left earlier, in this run
	// or another, is moved; so is one at the very commit proposed.
	Committer string
}

// ErrForeignBranch is returned (wrapped, in a *ForeignBranchError) when
// the branch to propose exists at a commit someone other than
// PullRequestRequest.Committer made: a person pushed to it, the forge
// updated it for someone, or another tool made it. The branch is left
// as it is.
var ErrForeignBranch = errors.New("the branch has a commit fleetlift did not make")

// ForeignBranchError says whose commit stopped a push.
type ForeignBranchError struct {
	Branch string
	// Head is the commit at the branch's tip, Committer who made it.
	Head      string
	Committer string
	// Fleetlift is the email fleetlift commits as.
	Fleetlift string
}

func (e *ForeignBranchError) Error() string {
	return fmt.Sprintf("branch %s is at %s, committed by %s, not by fleetlift (%s): not overwritten", e.Branch, shortSHA(e.Head), e.Committer, e.Fleetlift)
}

func (e *ForeignBranchError) Unwrap() error { return ErrForeignBranch }

// OwnBranch returns a *ForeignBranchError when req.Committer is set and
// the commit at tip, the tip of req.Head where it is proposed, was made
// by anyone else, as committer (asked only then) says, by email.
func OwnBranch(req PullRequestRequest, tip string, committer func() (string, error)) error {
	if req.Committer == "" {
		return nil
	}
	who, err := committer()
	if err != nil {
		return fmt.Errorf("push branch %s: %w", req.Head, err)
	}
	if !strings.EqualFold(who, req.Committer) {
		return &ForeignBranchError{Branch: req.Head, Head: tip, Committer: who, Fleetlift: req.Committer}
	}
	return nil
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// PullRequest is an opened pull request, or for the local forge, a pushed
// branch and its record.
type PullRequest struct {
	URL    string
	Number int
	Branch string
	Commit string
	// State is open, merged or closed.
	State string
	// Base is the branch the pull request targets; HeadSHA the commit at
	// its head; Author who opened it. Filled by Hub methods.
	Base    string
	HeadSHA string
	Author  string
	Title   string
	Body    string
	Labels  []string
}

// Pull request states, as PullRequest.State holds them.
const (
	StateOpen   = "open"
	StateMerged = "merged"
	StateClosed = "closed"
)

// Hub is a forge with pull requests people review: what the reconciler
// needs on the campaigns repository (approval pull requests, plan
// comments, the status mirror's commit statuses) and to follow the pull
// requests it opened on targets. GitHub and Gitea implement it; the local
// forge does not (approvals there come as commits).
//
// Every repository argument is a clone URL, as in PullRequestRequest;
// adapters derive owner and name from it and refuse a URL that is not on
// their host. Errors never carry the token.
type Hub interface {
	Forge
	// FindPullRequest returns the most recent pull request from head in
	// repository (open first, then merged or closed), or nil, nil when
	// there is none.
	FindPullRequest(ctx context.Context, repository, head string) (*PullRequest, error)
	// GetPullRequest returns pull request number of repository, with its
	// state, head commit and author.
	GetPullRequest(ctx context.Context, repository string, number int) (*PullRequest, error)
	// UpdatePullRequest sets the title and body of an open pull request.
	UpdatePullRequest(ctx context.Context, repository string, number int, title, body string) error
	// ClosePullRequest closes an open pull request without merging it.
	ClosePullRequest(ctx context.Context, repository string, number int) error
	// ListReviews returns every review of a pull request, oldest first,
	// with states normalised to the Review* constants.
	ListReviews(ctx context.Context, repository string, number int) ([]Review, error)
	// ClosedBy returns the login of who closed a pull request, or ""
	// while it is open or when the forge does not say. Ask about pull
	// requests closed without merging: about merged ones forges differ.
	ClosedBy(ctx context.Context, repository string, number int) (string, error)
	// MergedPullRequest returns the merged pull request of repository
	// whose merge commit is sha (the merge commit, the squashed commit,
	// or the last commit a rebase merge made), with its reviews as
	// ListReviews returns them; nil, nil, nil when sha did not come from
	// a merged pull request (it was pushed directly, or only belongs to
	// one).
	MergedPullRequest(ctx context.Context, repository, sha string) (*PullRequest, []Review, error)
	// UpsertComment keeps one comment per marker on a pull request: the
	// comment whose body starts with marker is edited to body (which
	// must start with marker), or a new one is made. A comment that only
	// quotes the marker further down is left alone.
	UpsertComment(ctx context.Context, repository string, number int, marker, body string) error
	// SetCommitStatus sets the status named s.Context on commit s.SHA.
	SetCommitStatus(ctx context.Context, repository string, s CommitStatus) error
	// IsMember reports whether user belongs to team ("org/team").
	IsMember(ctx context.Context, team, user string) (bool, error)
}

// Review states, normalised across forges (GitHub's names).
const (
	ReviewApproved         = "APPROVED"
	ReviewChangesRequested = "CHANGES_REQUESTED"
	ReviewCommented        = "COMMENTED"
	ReviewDismissed        = "DISMISSED"
	ReviewPending          = "PENDING"
)

// Review is one review of a pull request.
type Review struct {
	ID int64
	// User is the reviewer's login.
	User  string
	State string
	Body  string
	// CommitID is the head commit the review was given on; a review on
	// an older commit is stale.
	CommitID    string
	SubmittedAt time.Time
}

// Commit status states.
const (
	StatusPending = "pending"
	StatusSuccess = "success"
	StatusFailure = "failure"
	StatusError   = "error"
)

// CommitStatus is a status check on a commit.
type CommitStatus struct {
	SHA         string
	Context     string
	State       string
	Description string
	TargetURL   string
}

// Follower is a forge that says what became of a pull request it opened:
// every forge fleetlift opens pull requests on implements it (GitHub,
// Gitea and the local forge), so a campaign is followed from open to
// merged wherever it runs.
type Follower interface {
	// PullRequestStatus reads pull request number (0 on a forge that
	// numbers none: the local forge names it by branch) of repository,
	// proposed from branch.
	PullRequestStatus(ctx context.Context, repository string, number int, branch string) (*PullRequestStatus, error)
}

// Stamper is a Follower that can tell, for much less than a read,
// whether a pull request may have changed since it was read: its stamp
// changes whenever what PullRequestStatus says of it may. A follower
// reads a pull request whose stamp is the one it read it at no further.
// The local forge is one (a read there fetches both branches and merges
// them; a stamp lists three refs); GitHub's and Gitea's reads cost one
// request each already.
type Stamper interface {
	// PullRequestStamp is the stamp of pull request number of
	// repository, from branch into base.
	PullRequestStamp(ctx context.Context, repository string, number int, branch, base string) (string, error)
}

// Mergeability, as PullRequestStatus.Mergeable holds it.
const (
	MergeableYes      = "mergeable"
	MergeableConflict = "conflicting"
	// MergeableBehind: it merges cleanly, but its base moved past the
	// commit it started from.
	MergeableBehind = "behind"
)

// Review decisions, as PullRequestStatus.Review holds them: the latest
// review of each reviewer together (comments do not count).
const (
	DecisionApproved         = "approved"
	DecisionChangesRequested = "changes_requested"
	DecisionNone             = "none"
)

// PullRequestStatus is a pull request as the forge has it now: what it
// became and what decides whether it may merge. Empty fields are what
// the forge does not say (the local forge has no reviews or checks).
type PullRequestStatus struct {
	// State is StateOpen, StateMerged or StateClosed.
	State string `json:"state"`
	// Stamp is, on a forge with stamps (Stamper), the stamp of what was
	// read: a later stamp equal to it says the pull request did not
	// move since. Empty on other forges.
	Stamp string `json:"stamp,omitempty"`
	Draft bool   `json:"draft,omitempty"`
	// Head is the commit at the head of the pull request (for a merged
	// one, the commit it was merged at when the forge says).
	Head string `json:"head,omitempty"`
	// Base is the branch it targets and BaseSHA that branch's commit.
	Base    string `json:"base,omitempty"`
	BaseSHA string `json:"base_sha,omitempty"`
	// Mergeable is one of the Mergeable* constants, or "" while the
	// forge has not worked it out.
	Mergeable string `json:"mergeable,omitempty"`
	// Review is one of the Decision* constants.
	Review string `json:"review,omitempty"`
	// Checks is the head commit's checks together: StatusSuccess,
	// StatusPending or StatusFailure; "" when it has none.
	Checks string `json:"checks,omitempty"`
	// FailedChecks names the checks that failed (at most a few).
	FailedChecks []string `json:"failed_checks,omitempty"`
	Labels       []string `json:"labels,omitempty"`
}

// CombineChecks is the state of several checks together: failure when
// one failed or errored, else pending when one has not finished, else
// success; "" for none.
func CombineChecks(states ...string) string {
	out := ""
	for _, s := range states {
		switch s {
		case StatusFailure, StatusError:
			return StatusFailure
		case StatusPending:
			out = StatusPending
		case StatusSuccess:
			if out == "" {
				out = StatusSuccess
			}
		}
	}
	return out
}

// Decide is the review decision of reviews (oldest first): each
// reviewer's latest approval or request for changes counts, a dismissal
// takes theirs back, and comments count for nothing.
func Decide(reviews []Review) string {
	latest := map[string]string{}
	for _, r := range reviews {
		switch r.State {
		case ReviewApproved, ReviewChangesRequested, ReviewDismissed:
			latest[r.User] = r.State
		}
	}
	out := DecisionNone
	for _, s := range latest {
		switch s {
		case ReviewChangesRequested:
			return DecisionChangesRequested
		case ReviewApproved:
			out = DecisionApproved
		}
	}
	return out
}

// Merge methods, as MergeOptions.Method holds them.
const (
	MergeCommit = "merge"
	MergeSquash = "squash"
	MergeRebase = "rebase"
)

// MergeMethods are the merge methods, in the order forges list them.
var MergeMethods = []string{MergeCommit, MergeSquash, MergeRebase}

// PullRequestRef names one pull request fleetlift opened: its
// repository's clone URL, its number (0 on the local forge) and its
// branch.
type PullRequestRef struct {
	Repository string
	Number     int
	Branch     string
}

// MergeOptions say how to merge a pull request.
type MergeOptions struct {
	// Method is one of MergeMethods; empty means MergeCommit.
	Method string
	// Head is the commit the pull request must still have at its head:
	// the forge refuses the merge when someone pushed since it was read.
	Head string
	// DeleteBranch deletes the branch once merged.
	DeleteBranch bool
}

// Lander is a forge that merges and closes the pull requests it opened:
// GitHub, Gitea and the local forge. Both are writes, within the forge's
// budget like every other.
type Lander interface {
	// MergePullRequest merges pr as o says, or says why the forge
	// refused (ErrNotMergeable: conflicts, branch protection, checks;
	// ErrHeadMoved: its head is no longer o.Head).
	MergePullRequest(ctx context.Context, pr PullRequestRef, o MergeOptions) error
	// ClosePullRequestAs closes pr without merging it, after commenting
	// comment on it when the forge has comments and comment is not
	// empty, and deletes its branch when deleteBranch is set.
	ClosePullRequestAs(ctx context.Context, pr PullRequestRef, comment string, deleteBranch bool) error
}

// ErrNotMergeable is returned (wrapped) when a forge refuses to merge a
// pull request: it conflicts, or branch protection, required checks or
// reviews stop it.
var ErrNotMergeable = errors.New("the forge refuses to merge it")

// ErrHeadMoved is returned (wrapped) when a pull request's head is no
// longer the commit a merge named.
var ErrHeadMoved = errors.New("its head moved since it was read")

// Repository is a repository as a forge lists it.
type Repository struct {
	Owner string
	Name  string
	// CloneURL is its https (or loopback http) clone URL.
	CloneURL      string
	DefaultBranch string
	// Language is its primary language, "" when the forge names none.
	Language string
	Topics   []string
	Archived bool
	Fork     bool
}

// Lister is a forge that lists repositories, for repositories_from:
// GitHub and Gitea.
type Lister interface {
	// ListRepositories lists every repository of owner the token can
	// see, and says whether owner is an organisation (else a user).
	ListRepositories(ctx context.Context, owner string) (repos []Repository, org bool, err error)
	// SearchCode returns the names of owner's repositories (org says
	// which kind of owner) holding code that query finds, or
	// ErrNoCodeSearch.
	SearchCode(ctx context.Context, owner string, org bool, query string) ([]string, error)
}

// ErrNoCodeSearch is returned (wrapped) by a forge without code search.
var ErrNoCodeSearch = errors.New("the forge has no code search")
