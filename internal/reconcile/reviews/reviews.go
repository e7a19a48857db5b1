package reviews

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/markdown"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/state"
)

// PullRequests is reconcile.Reviews on a forge with reviews. For each result
// awaiting approval it opens a pull request on the campaigns repository
// whose body summarises the result (per repository: the files, lines
// added and removed) and names its digest, from a branch named after the
// target and the digest (Branch). That branch name, which nobody
// can change on an open pull request, is where the digest a review
// approves comes from: never from the body, which people can edit (and
// which fleetlift puts back when they do). A new result (after a steer)
// gets a pull request of its own, and the one for the earlier result is
// closed, so no review of one result ever counts for another.
//
// A review APPROVED by an allowed reviewer on the pull request's current
// head approves; CHANGES_REQUESTED with a body steers with that text;
// closing the pull request unmerged rejects, when whoever closed it may
// approve. The author of the pull request (fleetlift) and the author of
// the campaign's definition never decide alone. When nothing awaits
// approval for a target any more, its pull request is closed with a
// note.
type PullRequests struct {
	Hub forge.Hub
	// Repository is the campaigns repository's clone URL on the forge.
	Repository string
	// Base is the watched branch the pull requests target.
	Base string
	// Git fetches the base and pushes approval branches; its token comes
	// through its credential helper.
	Git    *git.Git
	Author git.Identity
	// History tells who last changed each definition: that author's
	// reviews never count. Nil skips the check.
	History reconcile.History
	Log     *slog.Logger

	mu sync.Mutex
	// open are the approval pull requests this process opened or found
	// open, by target, to close them once their target is decided or has
	// a new result.
	open map[string]approvalPR
	// pushed are the commits this process pushed to each approval
	// branch: another head there was pushed by someone else, and is
	// replaced, once (a forge may report a head late).
	pushed   map[string]map[string]bool
	replaced map[string]bool
	// noted are the closed pull requests already told that their closing
	// decided nothing.
	noted map[int]bool
}

// approvalPR is an approval pull request and the result it shows.
type approvalPR struct {
	number int
	url    string
	digest string
}

var _ reconcile.Reviews = (*PullRequests)(nil)

// BranchPrefix starts the branches of approval pull requests.
const BranchPrefix = "fleetlift/approval/"

func (a *PullRequests) log() *slog.Logger {
	if a.Log != nil {
		return a.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Approvals keeps the approval pull requests in step with the results
// awaiting approval and returns the decisions their reviews make. A
// failure for one target is logged and the others go on.
func (a *PullRequests) Approvals(ctx context.Context, rev *desired.Revision, recorded []state.Campaign) ([]approval.Record, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open == nil {
		a.open, a.pushed, a.replaced, a.noted = map[string]approvalPR{}, map[string]map[string]bool{}, map[string]bool{}, map[int]bool{}
	}
	defs := map[string]string{}
	for _, d := range rev.Desired.Definitions {
		defs[d.ID] = d.File
	}
	var authors map[string]approval.Identity
	pending := map[string]bool{}
	var out []approval.Record
	for _, c := range recorded {
		for _, p := range c.PendingApprovals {
			pending[p.Target] = true
			if authors == nil {
				authors = a.definitionAuthors(ctx, rev, defs)
			}
			rec, err := a.sync(ctx, rev, c, p, defs[c.ID], authors[defs[c.ID]])
			if err != nil {
				a.log().Error("approval pull request", "target", p.Target, "error", err)
				continue
			}
			if rec != nil {
				out = append(out, *rec)
			}
		}
	}
	// Close the pull requests whose target no longer waits: decided.
	for target, o := range a.open {
		if pending[target] {
			continue
		}
		msg := fmt.Sprintf("Nothing awaits approval for `%s` any more: the decision was carried out, or the run ended. Closing.", target)
		if a.close(ctx, target, o, msg) {
			delete(a.open, target)
		}
	}
	return out, nil
}

// close comments msg on an approval pull request and closes it; it
// reports whether it closed it.
func (a *PullRequests) close(ctx context.Context, target string, o approvalPR, msg string) bool {
	const marker = "<!-- fleetlift:approval-closed -->"
	if err := a.Hub.UpsertComment(ctx, a.Repository, o.number, marker, marker+"\n"+msg); err != nil {
		a.log().Warn("comment on approval pull request", "target", target, "url", o.url, "error", err)
	}
	if err := a.Hub.ClosePullRequest(ctx, a.Repository, o.number); err != nil {
		a.log().Error("close approval pull request", "target", target, "url", o.url, "error", err)
		return false
	}
	return true
}

// definitionAuthors reads who last changed each definition file, when the
// source can tell.
func (a *PullRequests) definitionAuthors(ctx context.Context, rev *desired.Revision, defs map[string]string) map[string]approval.Identity {
	out := map[string]approval.Identity{}
	h := a.History
	if h == nil {
		return out
	}
	var files []string
	for _, f := range defs {
		files = append(files, f)
	}
	changes, err := h.LastChanges(ctx, rev.SHA, files)
	if err != nil {
		a.log().Warn("read definition authors", "error", err)
		return out
	}
	for f, c := range changes {
		out[f] = approval.Identity{Name: c.AuthorName, Email: c.AuthorEmail}
	}
	return out
}

// sync brings one result's approval pull request in step and returns
// the decision its reviews (or its closing) make, if any.
func (a *PullRequests) sync(ctx context.Context, rev *desired.Revision, c state.Campaign, p state.PendingApproval, defFile string, defAuthor approval.Identity) (*approval.Record, error) {
	branch, err := Branch(p.Target, p.ResultDigest)
	if err != nil {
		return nil, err
	}
	pr, err := a.Hub.FindPullRequest(ctx, a.Repository, branch)
	if err != nil {
		return nil, err
	}
	if pr != nil && pr.Branch != branch {
		return nil, fmt.Errorf("find the approval pull request of %s: the forge answered with one from %s", branch, pr.Branch)
	}
	body := approvalBody(c, p, defFile)
	if pr == nil {
		pr, err = a.openPR(ctx, rev, p, branch, body)
		if err != nil {
			return nil, err
		}
		a.track(ctx, p, pr)
		a.log().Info("opened approval pull request", "target", p.Target, "digest", approval.ShortDigest(p.ResultDigest), "url", pr.URL)
		return nil, nil
	}
	if pr.State == forge.StateOpen {
		a.track(ctx, p, pr)
		if ours, ok := a.pushed[branch]; ok && !ours[pr.HeadSHA] && !a.replaced[pr.HeadSHA] {
			// Someone else pushed to the branch: what its head shows is
			// not fleetlift's summary. A head of fleetlift's own makes
			// the reviews of theirs stale. (The digest reviews approve
			// is the branch's all the same.)
			a.log().Warn("approval branch moved by someone else: pushing it again", "branch", branch, "head", short(pr.HeadSHA))
			a.replaced[pr.HeadSHA] = true
			_, err := a.openPR(ctx, rev, p, branch, body)
			return nil, err
		}
		if normalise(pr.Body) != normalise(body) || pr.Title != title(p) {
			// The body is for people, and only fleetlift writes it.
			if err := a.Hub.UpdatePullRequest(ctx, a.Repository, pr.Number, title(p), body); err != nil {
				return nil, err
			}
			a.log().Warn("approval pull request edited: its title and body are put back", "target", p.Target, "url", pr.URL)
		}
	}
	// The pull request is about this very result (its branch names the
	// digest): read the reviews, fresh, just before deciding.
	if rev.Approvers == nil {
		return nil, fmt.Errorf("nobody may approve %s: the repository has no valid fleetlift.yaml with approvers", p.Target)
	}
	view := approval.PullRequestView{State: pr.State, HeadSHA: pr.HeadSHA, Author: pr.Author}
	if pr.State == forge.StateClosed {
		if view.ClosedBy, err = a.Hub.ClosedBy(ctx, a.Repository, pr.Number); err != nil {
			return nil, err
		}
	}
	raw, err := a.Hub.ListReviews(ctx, a.Repository, pr.Number)
	if err != nil {
		return nil, err
	}
	reviews := make([]approval.Review, len(raw))
	for i, r := range raw {
		reviews[i] = approval.Review(r)
	}
	allowed := func(user string) (bool, error) {
		if defAuthor.Is(user) {
			// The author of the change never approves it alone; here
			// their review (or closing) does not count at all.
			return false, nil
		}
		ok, _, err := rev.Approvers.Allowed(ctx, defFile, user, a.Hub.IsMember)
		return ok, err
	}
	d, err := approval.DecideReviews(view, reviews, allowed)
	if err != nil {
		return nil, err
	}
	if d.Action == "" {
		if pr.State == forge.StateClosed {
			a.noteClosed(ctx, p, pr, d.Reason)
		}
		return nil, nil
	}
	file := pr.URL
	if d.ReviewID != 0 {
		file = fmt.Sprintf("%s#review-%d", pr.URL, d.ReviewID)
	}
	return &approval.Record{File: file, Target: p.Target, ResultDigest: p.ResultDigest, Generation: c.Generation,
		By: d.By, Action: d.Action, Prompt: d.Prompt}, nil
}

// track remembers pr as the open approval pull request of p's target,
// and closes the one of an earlier result of the target, pointing to pr.
func (a *PullRequests) track(ctx context.Context, p state.PendingApproval, pr *forge.PullRequest) {
	if prev, ok := a.open[p.Target]; ok && prev.number != pr.Number {
		msg := fmt.Sprintf("A new result of `%s` awaits approval in %s (digest `%s`); this one, `%s`, no longer can be approved. Closing.",
			p.Target, pr.URL, approval.ShortDigest(p.ResultDigest), approval.ShortDigest(prev.digest))
		if !a.close(ctx, p.Target, prev, msg) {
			return
		}
	}
	a.open[p.Target] = approvalPR{number: pr.Number, url: pr.URL, digest: p.ResultDigest}
}

// noteClosed tells, once, on an approval pull request that was closed
// by someone who may not decide, that its result still awaits a decision.
func (a *PullRequests) noteClosed(ctx context.Context, p state.PendingApproval, pr *forge.PullRequest, why string) {
	if a.noted[pr.Number] {
		return
	}
	const marker = "<!-- fleetlift:approval-close-ignored -->"
	msg := fmt.Sprintf("%s\nClosing this pull request decided nothing: %s. The result still awaits approval; "+
		"an allowed approver may reopen this pull request to review it, or close it to reject it.", marker, why)
	if err := a.Hub.UpsertComment(ctx, a.Repository, pr.Number, marker, msg); err != nil {
		a.log().Warn("comment on approval pull request", "target", p.Target, "url", pr.URL, "error", err)
		return
	}
	a.noted[pr.Number] = true
	a.log().Warn("approval pull request closed by someone who may not decide", "target", p.Target, "url", pr.URL, "reason", why)
}

// normalise is a pull request body as forges keep it.
func normalise(body string) string {
	return strings.TrimSpace(strings.ReplaceAll(body, "\r\n", "\n"))
}

// openPR pushes the approval branch (the watched head plus a summary
// file) and opens or updates its pull request.
func (a *PullRequests) openPR(ctx context.Context, rev *desired.Revision, p state.PendingApproval, branch, body string) (*forge.PullRequest, error) {
	s, err := a.Git.NewScratch(ctx, "")
	if err != nil {
		return nil, err
	}
	defer s.Close()
	base := "refs/heads/" + a.Base
	if err := s.Fetch(ctx, a.Repository, "+"+base+":refs/remotes/origin/"+a.Base); err != nil {
		return nil, err
	}
	head, err := s.Run(ctx, "rev-parse", "--verify", "refs/remotes/origin/"+a.Base+"^{commit}")
	if err != nil {
		return nil, err
	}
	head = strings.TrimSpace(head)
	// The summary file, under .fleetlift/approvals/ of the base tree.
	blob, err := s.RunInput(ctx, strings.NewReader(body), "hash-object", "-w", "--stdin")
	if err != nil {
		return nil, err
	}
	tree, err := a.treeWith(ctx, s, head, []string{".fleetlift", "approvals", approval.PathName(p.Target) + ".md"}, strings.TrimSpace(blob))
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("Approval requested: %s (%s)\n", p.Target, approval.ShortDigest(p.ResultDigest))
	commit, err := s.CommitTree(ctx, tree, msg, a.Author, head)
	if err != nil {
		return nil, err
	}
	if _, err := s.Run(ctx, "update-ref", "refs/heads/"+branch, commit); err != nil {
		return nil, err
	}
	pr, err := a.Hub.CreatePullRequest(ctx, forge.PullRequestRequest{
		Repository: a.Repository, Dir: s.Dir(), Base: a.Base, Head: branch,
		Title: title(p), Body: body, Labels: []string{"fleetlift-approval"},
	})
	if err != nil {
		return nil, err
	}
	if a.pushed[branch] == nil {
		a.pushed[branch] = map[string]bool{}
	}
	a.pushed[branch][commit] = true
	return pr, nil
}

// treeWith returns the tree of commit with blob at path (directories
// made as needed).
func (a *PullRequests) treeWith(ctx context.Context, s *git.Scratch, commit string, path []string, blob string) (string, error) {
	var walk func(tree string, path []string) (string, error)
	walk = func(tree string, path []string) (string, error) {
		var entries []string
		if tree != "" {
			out, err := s.Run(ctx, "ls-tree", tree)
			if err != nil {
				return "", err
			}
			for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
				if l == "" {
					continue
				}
				if _, name, _ := strings.Cut(l, "\t"); name != path[0] {
					entries = append(entries, l)
				}
			}
		}
		if len(path) == 1 {
			entries = append(entries, fmt.Sprintf("100644 blob %s\t%s", blob, path[0]))
		} else {
			sub := ""
			if tree != "" {
				if out, err := s.Run(ctx, "rev-parse", "--verify", "--quiet", tree+":"+path[0]); err == nil {
					sub = strings.TrimSpace(out)
				}
			}
			t, err := walk(sub, path[1:])
			if err != nil {
				return "", err
			}
			entries = append(entries, fmt.Sprintf("040000 tree %s\t%s", t, path[0]))
		}
		out, err := s.RunInput(ctx, strings.NewReader(strings.Join(entries, "\n")+"\n"), "mktree")
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(out), nil
	}
	return walk(commit+"^{tree}", path)
}

func title(p state.PendingApproval) string {
	return "Approve " + p.Target + " (" + approval.ShortDigest(p.ResultDigest) + ")"
}

// approvalBody is the approval pull request's description.
func approvalBody(c state.Campaign, p state.PendingApproval, defFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s awaits approval\n\n", markdown.Code(p.Target))
	fmt.Fprintf(&b, "%s %s (from %s, generation %d) produced the result below, digest %s.\n\n",
		c.Kind, markdown.Code(c.ID), markdown.Code(defFile), c.Generation, markdown.Code(p.ResultDigest))
	b.WriteString("| Repository | File | + | − |\n|---|---|--:|--:|\n")
	repos := slices.Clone(p.Repos)
	slices.SortFunc(repos, func(x, y state.PendingRepo) int { return strings.Compare(x.Name, y.Name) })
	for _, r := range repos {
		if len(r.Files) == 0 {
			what := "no changes"
			if r.Report {
				what = "a report"
			}
			fmt.Fprintf(&b, "| %s | %s | | |\n", markdown.Cell(markdown.Code(r.Name)), what)
		}
		for _, f := range r.Files {
			fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", markdown.Cell(markdown.Code(r.Name)), markdown.Cell(markdown.Code(f.Path)), f.Additions, f.Deletions)
		}
	}
	b.WriteString("\n**Review this pull request to decide:** *Approve* opens the pull requests on the target repositories; " +
		"*Request changes* with a comment sends the agent back to work with your comment; closing the pull request rejects the result " +
		"when an allowed approver closes it (closed by anyone else, it decides nothing). " +
		"Only reviews on the current head by allowed approvers count; the author of the campaign's definition cannot approve it alone. " +
		"This pull request is about this one result, whose digest its branch names: a new result gets a pull request of its own. " +
		"Do not merge: fleetlift closes this pull request once the decision is carried out.\n")
	return b.String()
}

// Branch is the branch of the approval pull request for the
// result digest of target: BranchPrefix, approval.PathName(target),
// "." and the digest's hex digits
// ("fleetlift/approval/slog-rollout__payments.9f2c…"). No two results
// share a branch; the reviews of the pull request from it are about that
// digest and no other. digest must be "sha256:" and 64 hex digits, as
// fleetlift's result digests are.
func Branch(target, digest string) (string, error) {
	hex, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || !sha256Hex.MatchString(hex) {
		return "", fmt.Errorf("approval branch of %s: digest %q is not sha256: and 64 hex digits", target, digest)
	}
	return BranchPrefix + approval.PathName(target) + "." + hex, nil
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// short is the first 12 characters of a commit's name.
func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
