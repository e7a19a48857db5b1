package approval

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// PullRequestView is what DecideReviews needs of an approval pull request
// (fill it from forge.PullRequest).
type PullRequestView struct {
	// State is open, merged or closed (forge.StateOpen, ...).
	State string
	// HeadSHA is the commit at the pull request's head: only reviews
	// given on it count.
	HeadSHA string
	// Author is the login of who opened the pull request.
	Author string
	// ClosedBy is the login of who closed it, when State is closed
	// (forge.Hub's ClosedBy); "" when the forge does not say.
	ClosedBy string
}

// Review is one review of a pull request. It has the fields of
// forge.Review, so approval.Review(r) converts one. State is normalised
// to GitHub's names: APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED or
// PENDING.
type Review struct {
	ID          int64
	User        string
	State       string
	Body        string
	CommitID    string
	SubmittedAt time.Time
}

// Review states and pull request states, as package forge names them.
const (
	reviewApproved         = "APPROVED"
	reviewChangesRequested = "CHANGES_REQUESTED"
	reviewCommented        = "COMMENTED"
	reviewDismissed        = "DISMISSED"
	reviewPending          = "PENDING"

	prClosed = "closed"
)

// Decision is what the reviews of an approval pull request decide.
type Decision struct {
	// Action is Approve, Steer or Reject, or "" while nothing is decided.
	Action Action
	// By is the reviewer whose review decided, or who closed the pull
	// request for a Reject.
	By string
	// Prompt is the text a Steer sends the agent: the review's body.
	Prompt string
	// ReviewID is the review that decided, so that a caller steers once
	// per review, however often it looks.
	ReviewID int64
	// Reason explains the decision, or why there is none, for people.
	Reason string
	// Ignored lists the reviews that did not count and why, one line per
	// reviewer ("carol: not an allowed approver").
	Ignored []string
}

// DecideReviews turns the reviews of an approval pull request into a
// decision. It does no I/O; allowed says whether a reviewer may approve
// the result (Policy.Allowed for the definition's file) and is asked at
// most once per reviewer, and only about reviews that could count.
//
//   - A pull request closed without merging rejects, when whoever
//     closed it may approve (allowed, and not its author): closing is a
//     decision like a review, and anyone who can close a pull request
//     cannot be one who decides. Closed by someone else, or by whom the
//     forge does not say, it decides nothing.
//   - Each reviewer's latest review counts, COMMENTED and PENDING reviews
//     aside (as on GitHub, a comment neither adds nor withdraws an
//     approval); a DISMISSED latest review counts for nothing.
//   - A review given on another commit than the current head is stale and
//     does not count; nor do reviews by the pull request's author, nor by
//     reviewers allowed says no to. Decision.Ignored says which and why.
//   - A counting CHANGES_REQUESTED with a body steers with that body (the
//     latest, if several).
//   - A counting CHANGES_REQUESTED without a body decides nothing, and
//     holds back any approval: someone allowed to decide objects without
//     saying what to change.
//   - Otherwise a counting APPROVED approves (the latest, if several).
//
// reviews are in any order; ties in SubmittedAt keep the given order.
func DecideReviews(pr PullRequestView, reviews []Review, allowed func(user string) (bool, error)) (Decision, error) {
	if pr.State == prClosed {
		return decideClose(pr, allowed)
	}
	if pr.HeadSHA == "" {
		return Decision{}, fmt.Errorf("decide reviews: the pull request has no head commit")
	}
	sorted := slices.Clone(reviews)
	slices.SortStableFunc(sorted, func(a, b Review) int { return a.SubmittedAt.Compare(b.SubmittedAt) })

	// Each reviewer's latest review that says something.
	latest := map[string]int{}
	for i, r := range sorted {
		if r.State == reviewCommented || r.State == reviewPending {
			continue
		}
		latest[strings.ToLower(r.User)] = i
	}

	var d Decision
	var approvals, changes, silent []Review
	for i, r := range sorted {
		if j, ok := latest[strings.ToLower(r.User)]; !ok || j != i {
			continue
		}
		why := ""
		switch {
		case r.State == reviewDismissed:
			why = "review dismissed"
		case r.State != reviewApproved && r.State != reviewChangesRequested:
			why = fmt.Sprintf("unknown review state %q", r.State)
		case strings.EqualFold(r.User, pr.Author):
			why = "the pull request's author"
		case r.CommitID != pr.HeadSHA:
			why = fmt.Sprintf("review of %s, not of the current head %s", shortSHA(r.CommitID), shortSHA(pr.HeadSHA))
		default:
			ok, err := allowed(r.User)
			if err != nil {
				return Decision{}, fmt.Errorf("decide reviews: may %s approve: %w", r.User, err)
			}
			if !ok {
				why = "not an allowed approver"
			}
		}
		if why != "" {
			d.Ignored = append(d.Ignored, r.User+": "+why)
			continue
		}
		switch {
		case r.State == reviewApproved:
			approvals = append(approvals, r)
		case strings.TrimSpace(r.Body) != "":
			changes = append(changes, r)
		default:
			silent = append(silent, r)
		}
	}

	switch {
	case len(changes) > 0:
		r := changes[len(changes)-1]
		d.Action, d.By, d.Prompt, d.ReviewID = Steer, r.User, strings.TrimSpace(r.Body), r.ID
		d.Reason = fmt.Sprintf("%s requested changes: the agent is steered with the review's text", r.User)
	case len(silent) > 0:
		var who []string
		for _, r := range silent {
			who = append(who, r.User)
		}
		d.Reason = fmt.Sprintf("%s requested changes without saying what: request changes again with a comment to steer the agent, or approve", strings.Join(who, ", "))
	case len(approvals) > 0:
		r := approvals[len(approvals)-1]
		d.Action, d.By, d.ReviewID = Approve, r.User, r.ID
		d.Reason = fmt.Sprintf("approved by %s on the current head", r.User)
	default:
		d.Reason = "waiting for an approving review from an allowed reviewer"
	}
	return d, nil
}

// decideClose is what closing pr without merging decides: a reject by an
// allowed approver who is not its author, else nothing.
func decideClose(pr PullRequestView, allowed func(user string) (bool, error)) (Decision, error) {
	const only = "closing rejects only when an allowed approver closes it"
	switch {
	case pr.ClosedBy == "":
		return Decision{Reason: "the approval pull request was closed, and the forge does not say by whom: " + only}, nil
	case strings.EqualFold(pr.ClosedBy, pr.Author):
		return Decision{Reason: fmt.Sprintf("the approval pull request was closed by %s, who opened it: %s", pr.ClosedBy, only),
			Ignored: []string{pr.ClosedBy + ": closed it, and is the pull request's author"}}, nil
	}
	ok, err := allowed(pr.ClosedBy)
	if err != nil {
		return Decision{}, fmt.Errorf("decide reviews: may %s reject: %w", pr.ClosedBy, err)
	}
	if !ok {
		return Decision{Reason: fmt.Sprintf("the approval pull request was closed by %s, who may not approve: %s", pr.ClosedBy, only),
			Ignored: []string{pr.ClosedBy + ": closed it, but is not an allowed approver"}}, nil
	}
	return Decision{Action: Reject, By: pr.ClosedBy, Reason: fmt.Sprintf("%s closed the approval pull request without merging: rejected", pr.ClosedBy)}, nil
}

func shortSHA(sha string) string {
	if sha == "" {
		return "an unknown commit"
	}
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
