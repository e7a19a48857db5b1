package reviews_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/gitea"
	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/reconcile/reviews"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// approvalsOnGitea is a real Gitea with a campaigns repository owned by
// fleetlift's account (bot). alice and mallory may both push to the
// repository, edit, close and reopen its pull requests; alice may approve
// the campaign slog, mallory may not. a keeps the approval pull requests
// there.
type approvalsOnGitea struct {
	g              *giteatest.Server
	bot            giteatest.User
	alice, mallory giteatest.User
	repo           string // owner/name
	clone          string // its clone URL
	rev            *desired.Revision
	a              *reviews.PullRequests
}

const (
	result1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	result2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func newApprovalsOnGitea(t *testing.T) *approvalsOnGitea {
	t.Helper()
	g := giteatest.Start(t)
	e := &approvalsOnGitea{g: g, bot: g.Admin(), alice: g.CreateUser(t, "alice"), mallory: g.CreateUser(t, "mallory")}
	clone := g.CreateRepo(t, e.bot.Name, "campaigns", false)
	e.repo, e.clone = e.bot.Name+"/campaigns", clone
	g.AddCollaborator(t, e.bot.Name, "campaigns", "mallory", "write")
	g.AddCollaborator(t, e.bot.Name, "campaigns", "alice", "write")
	fs := map[string]string{
		"fleetlift.yaml": fmt.Sprintf("version: 1\nkind: Config\nwatch: {branch: main, path: campaigns}\n"+
			"approvers:\n  - path: \"campaigns/**\"\n    users: [alice]\nforge:\n  type: gitea\n  url: %s\n", g.URL()),
		"campaigns/slog.yaml": "version: 1\nkind: Campaign\nid: slog\ntitle: slog\n" +
			"repositories:\n  - url: https://github.com/acme/payments.git\n  - url: https://github.com/acme/ledger.git\n" +
			"template:\n  execution:\n    agentic:\n      prompt: \"Migrate from log.Printf to log/slog.\"\n",
	}
	work := t.TempDir()
	g.Git(t, e.bot, work, "init", "-q", "-b", "main")
	for name, data := range fs {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g.Git(t, e.bot, work, "add", ".")
	g.Git(t, e.bot, work, "commit", "-q", "-m", "config and slog")
	g.Git(t, e.bot, work, "push", "-q", clone, "main")
	e.rev = revision(t, strings.TrimSpace(g.Git(t, e.bot, work, "rev-parse", "HEAD")), fs)

	// The token goes to this Gitea alone, as the operator's forge.
	origins := []string{g.URL()}
	hub, err := gitea.New(gitea.Options{URL: g.URL(), Token: e.bot.Token, Git: &git.Git{TokenOrigins: origins}})
	if err != nil {
		t.Fatal(err)
	}
	e.a = &reviews.PullRequests{Hub: hub, Repository: clone, Base: "main", Git: &git.Git{TokenOrigins: origins},
		Author: git.Identity{Name: "fleetlift", Email: "fleetlift@example.com"}}
	return e
}

// revision reads files as the campaigns repository at sha, with the real
// loader (YAML needs no CUE worker pool).
func revision(t testing.TB, sha string, fs map[string]string) *desired.Revision {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range fs {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	rev, err := desired.Read(context.Background(), &spec.Loader{Eval: spec.InProcess(1)}, fsys, sha, "")
	if err != nil {
		t.Fatalf("read revision %s: %v", sha, err)
	}
	return rev
}

// awaiting is the recorded state of slog, generation 1, with its
// repository payments awaiting approval of result digest.
func awaiting(digest string) []state.Campaign {
	return []state.Campaign{{ID: "slog", Kind: state.KindCampaign, File: "campaigns/slog.yaml", Generation: 1, Phase: state.PhaseAwaitingApproval,
		WorkflowID: "campaign/slog", Repos: []state.Repo{{Name: "payments", Status: state.RepoAwaitingApproval}},
		PendingApprovals: []state.PendingApproval{{Target: "slog/payments", ResultDigest: digest, WorkflowID: "campaign/slog/payments",
			Repos: []state.PendingRepo{{Name: "payments", Files: []state.PendingFile{{Path: "main.go", Additions: 3, Deletions: 1}}}}}}}}
}

// pass is one pass of the reconciler's reviews over recorded.
func (e *approvalsOnGitea) pass(t *testing.T, recorded []state.Campaign) []approval.Record {
	t.Helper()
	recs, err := e.a.Approvals(context.Background(), e.rev, recorded)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// giteaPull is a pull request as Gitea's API shows it.
type giteaPull struct {
	Number int    `json:"number"`
	State  string `json:"state"`
	Title  string `json:"title"`
	Body   string `json:"body"`
	Head   struct {
		Ref string `json:"ref"`
		Sha string `json:"sha"`
	} `json:"head"`
}

// pull is the approval pull request from the branch of digest.
func (e *approvalsOnGitea) pull(t *testing.T, digest string) giteaPull {
	t.Helper()
	branch, err := reviews.Branch("slog/payments", digest)
	if err != nil {
		t.Fatal(err)
	}
	var prs []giteaPull
	e.g.Do(t, e.bot.Token, http.MethodGet, "repos/"+e.repo+"/pulls?state=all&limit=50", nil, &prs)
	for _, p := range prs {
		if p.Head.Ref == branch {
			return p
		}
	}
	t.Fatalf("no approval pull request from %s among %+v", branch, prs)
	return giteaPull{}
}

// waitHead waits until Gitea reports a head of the approval pull request
// of digest that want accepts: it moves a pull request's head a little
// after a push.
func (e *approvalsOnGitea) waitHead(t *testing.T, digest string, want func(sha string) bool) giteaPull {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := e.pull(t, digest)
		if want(p.Head.Sha) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approval pull request's head is still %s", p.Head.Sha)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (e *approvalsOnGitea) review(t *testing.T, u giteatest.User, p giteaPull, event string) {
	t.Helper()
	e.g.Do(t, u.Token, http.MethodPost, fmt.Sprintf("repos/%s/pulls/%d/reviews", e.repo, p.Number),
		map[string]string{"event": event, "commit_id": p.Head.Sha}, nil)
}

func (e *approvalsOnGitea) edit(t *testing.T, u giteatest.User, p giteaPull, fields map[string]string) {
	t.Helper()
	e.g.Do(t, u.Token, http.MethodPatch, fmt.Sprintf("repos/%s/pulls/%d", e.repo, p.Number), fields, nil)
}

// TestReviewDigestComesFromFleetliftRecords: alice approves the approval
// pull request of result 1; the result changes to 2, and mallory edits
// the pull request's body to name result 2. Her edit does not carry
// alice's approval over to result 2: the digest a review approves is the
// one named by the branch fleetlift pushed, result 2 gets a pull request
// of its own, and an edited body is put back. A head mallory pushes to
// the branch is replaced by one of fleetlift's, so an approval of what
// hers showed does not count either.
func TestReviewDigestComesFromFleetliftRecords(t *testing.T) {
	e := newApprovalsOnGitea(t)
	if recs := e.pass(t, awaiting(result1)); len(recs) != 0 {
		t.Fatalf("first pass decided %+v, want an approval pull request and no decision", recs)
	}
	first := e.pull(t, result1)
	e.review(t, e.alice, first, "APPROVED")

	// A body that names result 2 and shows a harmless summary.
	forged := strings.ReplaceAll(first.Body, result1, result2)
	e.edit(t, e.mallory, first, map[string]string{"body": forged, "title": "Approve slog/payments (" + result2[:19] + ")"})

	recs := e.pass(t, awaiting(result2))
	for _, r := range recs {
		if r.Action == approval.Approve {
			t.Fatalf("alice's approval of result 1 approved result 2 after the body was edited: %+v", r)
		}
	}
	second := e.pull(t, result2)
	if second.Number == first.Number || second.State != forge.StateOpen {
		t.Fatalf("result 2's approval pull request: %+v, want a new open one (result 1's is #%d)", second, first.Number)
	}
	if got := e.pull(t, result1); got.State != forge.StateClosed {
		t.Errorf("result 1's approval pull request is %s, want closed", got.State)
	}
	if !strings.Contains(second.Body, result2) || strings.Contains(second.Body, result1) {
		t.Errorf("result 2's pull request body does not name result 2 alone:\n%s", second.Body)
	}

	// An edited body is put back; reviews still decide about result 2
	// only once someone allowed approves it.
	e.edit(t, e.mallory, second, map[string]string{"body": "Nothing to see here: approve away."})
	if recs := e.pass(t, awaiting(result2)); len(recs) != 0 {
		t.Fatalf("nobody approved result 2, yet the pass decided %+v", recs)
	}
	if got := e.pull(t, result2); got.Body != second.Body {
		t.Errorf("the edited body was not put back:\n%s\nwant\n%s", got.Body, second.Body)
	}

	// mallory pushes a head of her own to the branch, showing a harmless
	// summary, and alice approves it: fleetlift pushes a head of its own
	// again, so that approval is stale.
	work := t.TempDir()
	e.g.Git(t, e.mallory, work, "clone", "-q", "--branch", second.Head.Ref, e.clone, ".")
	summary := filepath.Join(work, ".fleetlift", "approvals", "slog__payments.md")
	if err := os.WriteFile(summary, []byte("Nothing changed.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.g.Git(t, e.mallory, work, "commit", "-q", "-am", "Nothing to see")
	e.g.Git(t, e.mallory, work, "push", "-q", "origin", "HEAD:"+second.Head.Ref)
	pushed := strings.TrimSpace(e.g.Git(t, e.mallory, work, "rev-parse", "HEAD"))
	foreign := e.waitHead(t, result2, func(sha string) bool { return sha == pushed })
	e.review(t, e.alice, foreign, "APPROVED")
	if recs := e.pass(t, awaiting(result2)); len(recs) != 0 {
		t.Fatalf("alice approved a head mallory pushed, and the pass decided %+v", recs)
	}
	third := e.waitHead(t, result2, func(sha string) bool { return sha != foreign.Head.Sha })
	if recs := e.pass(t, awaiting(result2)); len(recs) != 0 {
		t.Fatalf("alice's approval of mallory's head counted: %+v", recs)
	}
	e.review(t, e.alice, third, "APPROVED")
	recs = e.pass(t, awaiting(result2))
	if len(recs) != 1 || recs[0].Action != approval.Approve || recs[0].ResultDigest != result2 || recs[0].By != "alice" || recs[0].Generation != 1 {
		t.Fatalf("after alice approved result 2: %+v, want her approval of result 2, generation 1", recs)
	}
}

// TestClosingApprovalPRRejectsOnlyForApproversOnGitea: mallory, who may
// push to the campaigns repository but not approve, closes the approval
// pull request: nothing is rejected, and the pull request says so. alice
// reopens it and closes it herself: that rejects.
func TestClosingApprovalPRRejectsOnlyForApproversOnGitea(t *testing.T) {
	e := newApprovalsOnGitea(t)
	if recs := e.pass(t, awaiting(result1)); len(recs) != 0 {
		t.Fatalf("first pass decided %+v", recs)
	}
	pr := e.pull(t, result1)
	e.edit(t, e.mallory, pr, map[string]string{"state": "closed"})
	if recs := e.pass(t, awaiting(result1)); len(recs) != 0 {
		t.Fatalf("closed by mallory, the pass decided %+v, want nothing", recs)
	}
	var comments []struct{ Body string }
	e.g.Do(t, e.bot.Token, http.MethodGet, fmt.Sprintf("repos/%s/issues/%d/comments", e.repo, pr.Number), nil, &comments)
	if len(comments) != 1 || !strings.Contains(comments[0].Body, "closed by mallory, who may not approve") {
		t.Errorf("comments on the closed pull request: %+v, want one saying mallory's closing decided nothing", comments)
	}

	e.edit(t, e.alice, pr, map[string]string{"state": "open"})
	if recs := e.pass(t, awaiting(result1)); len(recs) != 0 {
		t.Fatalf("reopened, the pass decided %+v", recs)
	}
	e.edit(t, e.alice, pr, map[string]string{"state": "closed"})
	recs := e.pass(t, awaiting(result1))
	if len(recs) != 1 || recs[0].Action != approval.Reject || recs[0].By != "alice" || recs[0].ResultDigest != result1 {
		t.Fatalf("closed by alice: %+v, want her reject of result 1", recs)
	}
}
