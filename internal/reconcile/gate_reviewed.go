package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
)

// ErrNotReviewed is wrapped by a ReviewedMergeGate's refusal: the watched
// head did not arrive through a pull request someone other than its
// author approved.
var ErrNotReviewed = errors.New("did not come from a reviewed pull request")

// Merges tells which pull request a commit was merged from; forge.Hub
// does.
type Merges interface {
	MergedPullRequest(ctx context.Context, repository, sha string) (*forge.PullRequest, []forge.Review, error)
}

// ReviewedMergeGate is the LaunchGate of watch.require_reviewed_merge.
// When a revision's config turns it on, the revision launches only if its
// commit is the merge (or the squash or rebase result) of a pull request
// into the watched branch that someone other than its author approved on
// its final head commit, and that nobody other than its author has an
// outstanding request for changes on. Otherwise the pass carries out
// nothing and Once returns an error wrapping ErrNotReviewed that says
// which commit and why.
//
// Approval records are commits too: with the gate on, a record committed
// straight to the watched branch launches nothing either, so approvals
// arrive through reviewed pull requests (or as reviews of fleetlift's
// approval pull requests, which are not commits on the branch).
//
// Turning the requirement off is itself gated: once a revision has
// required reviewed merges, later revisions are checked until a reviewed
// one with a valid config turns it off, so a direct push that removes the
// setting (or breaks the config) launches nothing. The gate remembers
// this in its Latch, which outlives the process: a reconciler restarted
// (or another replica taking over) at a head that dropped the setting
// without review still launches nothing. (An operator who must lift it
// without a reviewed merge terminates the latch in Temporal: for
// dispatch.Latch, the workflow workflow.ReviewedMergeLatchID names.)
//
// The gate judges the head commit only. A commit pushed directly and then
// covered by a reviewed merge on top of it is part of the merged tree;
// protect the branch on the forge (pull requests required) for that, and
// see this gate as what keeps fleetlift from launching from any head the
// protection let through unreviewed.
type ReviewedMergeGate struct {
	// Hub finds the pull request a commit was merged from. Nil (a forge
	// without pull requests) refuses every revision that requires
	// reviewed merges.
	Hub Merges
	// Repository is the campaigns repository's clone URL on the forge.
	Repository string
	// Branch is the watched branch, which the pull request must have
	// been merged into; empty means the config's watch.branch.
	Branch string
	// Latch remembers, beyond this process, that reviewed merges are
	// required. Nil keeps it in memory only: a restarted reconciler then
	// trusts a head that dropped the requirement.
	Latch Latch
	Log   *slog.Logger

	mu sync.Mutex
	// required latches on when a revision requires reviewed merges.
	required bool
	// accepted is the last commit the gate let through after asking.
	accepted string
}

// Latch is where a ReviewedMergeGate keeps the requirement between
// restarts, and shares it with other replicas. dispatch.Latch keeps it in
// Temporal.
type Latch interface {
	// Latched reports whether reviewed merges are required.
	Latched(ctx context.Context) (bool, error)
	// Set records that they are, as revision rev said.
	Set(ctx context.Context, rev string) error
	// Clear records that they are not any more, as reviewed revision
	// rev said.
	Clear(ctx context.Context, rev string) error
}

var _ LaunchGate = (*ReviewedMergeGate)(nil)

// Check returns nil when rev may launch: reviewed merges are not
// required, or rev's commit came from a reviewed pull request. A refusal
// wraps ErrNotReviewed; other errors are failures to ask the forge, and
// the next pass asks again. A commit let through is not asked about
// again; a refused one is, since a forge may link a merge commit to its
// pull request moments after the push. A failure to read or write the
// Latch launches nothing either: the next pass tries again.
func (g *ReviewedMergeGate) Check(ctx context.Context, rev *desired.Revision) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	wants := rev.Config != nil && rev.Config.Watch.RequireReviewedMerge
	branch := g.Branch
	if branch == "" && rev.Config != nil {
		branch = rev.Config.Watch.Branch
	}
	where := fmt.Sprintf("commit %s on %s", short(rev.SHA), branch)
	if branch == "" {
		where = fmt.Sprintf("commit %s", short(rev.SHA))
	}
	if err := g.latch(ctx, rev.SHA, wants); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if !g.required || rev.SHA == g.accepted {
		return nil
	}
	if g.Hub == nil {
		return fmt.Errorf("%s: reviewed merges are required, but this reconciler has no forge with pull requests to ask (it reads the forge when it starts: restart it once forge.type is github or gitea)", where)
	}
	pr, reviews, err := g.Hub.MergedPullRequest(ctx, g.Repository, rev.SHA)
	if err != nil {
		return fmt.Errorf("%s: find the pull request it was merged from: %w", where, err)
	}
	approver, why := reviewedMerge(pr, reviews, branch)
	if why != "" {
		return fmt.Errorf("%s %w: %s", where, ErrNotReviewed, why)
	}
	if rev.Config != nil && !wants {
		// A reviewed revision turns the requirement off.
		if g.Latch != nil {
			if err := g.Latch.Clear(ctx, rev.SHA); err != nil {
				return fmt.Errorf("%s: record that reviewed merges are no longer required: %w", where, err)
			}
		}
		g.required = false
	}
	g.accepted = rev.SHA
	g.log().Info("launch gate: reviewed merge", "revision", short(rev.SHA), "pull_request", pr.Number, "approved_by", approver)
	return nil
}

// latch brings the requirement up to date at every pass: a revision that
// wants reviewed merges sets it, in the Latch too; one that does not reads
// it from the Latch (without one, the gate's memory says). Another
// replica, or this reconciler before a restart, may have set or cleared
// it meanwhile: one call to the Latch a pass costs less than reasoning
// about who did what since the last.
func (g *ReviewedMergeGate) latch(ctx context.Context, sha string, wants bool) error {
	switch {
	case wants:
		if g.Latch != nil {
			if err := g.Latch.Set(ctx, sha); err != nil {
				return fmt.Errorf("record that reviewed merges are required: %w", err)
			}
		}
		g.required = true
	case g.Latch != nil:
		latched, err := g.Latch.Latched(ctx)
		if err != nil {
			return fmt.Errorf("read whether reviewed merges are required: %w", err)
		}
		if latched && !g.required {
			g.log().Info("launch gate: reviewed merges are required since an earlier revision", "revision", short(sha))
		}
		g.required = latched
	}
	return nil
}

func (g *ReviewedMergeGate) log() *slog.Logger {
	if g.Log != nil {
		return g.Log
	}
	return slog.New(slog.DiscardHandler)
}

// reviewedMerge says whether pr, merged as the commit asked about, was
// reviewed: it returns who approved, or why it was not reviewed. Each
// reviewer's latest review counts, comments and pending reviews aside (a
// comment neither adds nor withdraws anything); a dismissed latest review
// counts for nothing. The pull request's author never counts. An approval
// counts only when given on the head commit that was merged; a request
// for changes stands until its reviewer approves or it is dismissed, as
// on a protected GitHub branch.
func reviewedMerge(pr *forge.PullRequest, reviews []forge.Review, branch string) (approver, why string) {
	switch {
	case pr == nil:
		return "", "it was pushed directly, not merged from a pull request"
	case pr.State != forge.StateMerged:
		return "", fmt.Sprintf("pull request #%d is %s, not merged", pr.Number, pr.State)
	case branch != "" && pr.Base != branch:
		return "", fmt.Sprintf("pull request #%d was merged into %s, not %s", pr.Number, pr.Base, branch)
	case pr.HeadSHA == "":
		return "", fmt.Sprintf("the forge did not say which commit pull request #%d ended at", pr.Number)
	}
	sorted := slices.Clone(reviews)
	slices.SortStableFunc(sorted, func(a, b forge.Review) int { return a.SubmittedAt.Compare(b.SubmittedAt) })
	latest := map[string]forge.Review{}
	var order []string
	for _, r := range sorted {
		if r.State == forge.ReviewCommented || r.State == forge.ReviewPending {
			continue
		}
		key := strings.ToLower(r.User)
		if _, ok := latest[key]; !ok {
			order = append(order, key)
		}
		latest[key] = r
	}
	var approvers, objectors, ignored []string
	for _, key := range order {
		r := latest[key]
		switch {
		case strings.EqualFold(r.User, pr.Author):
			ignored = append(ignored, r.User+": the pull request's author")
		case r.State == forge.ReviewDismissed:
			ignored = append(ignored, r.User+": review dismissed")
		case r.State == forge.ReviewChangesRequested:
			objectors = append(objectors, r.User)
		case r.State != forge.ReviewApproved:
			ignored = append(ignored, fmt.Sprintf("%s: unknown review state %q", r.User, r.State))
		case r.CommitID != pr.HeadSHA:
			ignored = append(ignored, fmt.Sprintf("%s: approved %s, not the merged head %s", r.User, shortCommit(r.CommitID), short(pr.HeadSHA)))
		default:
			approvers = append(approvers, r.User)
		}
	}
	switch {
	case len(objectors) > 0:
		return "", fmt.Sprintf("pull request #%d was merged with changes requested by %s", pr.Number, strings.Join(objectors, ", "))
	case len(approvers) == 0:
		why = fmt.Sprintf("pull request #%d was merged without an approving review from someone other than its author", pr.Number)
		if len(ignored) > 0 {
			why += " (" + strings.Join(ignored, "; ") + ")"
		}
		return "", why
	}
	return strings.Join(approvers, ", "), ""
}

func shortCommit(sha string) string {
	if sha == "" {
		return "an unknown commit"
	}
	return short(sha)
}
