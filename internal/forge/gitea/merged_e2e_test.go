package gitea_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/gitea"
	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

// TestMergedPullRequestOnGitea asks a real Gitea which pull request each
// commit on main was merged from: a pull request approved by bob and
// merged by each of Gitea's merge styles is found with its reviews, a
// commit pushed straight to main and a commit that only sits on a pull
// request's branch are not.
func TestMergedPullRequestOnGitea(t *testing.T) {
	s := giteatest.Start(t)
	alice, bob := s.CreateUser(t, "alice"), s.CreateUser(t, "bob")
	cloneURL := s.CreateRepo(t, "alice", "campaigns", false)
	s.AddCollaborator(t, "alice", "campaigns", "bob", "write")
	f, err := gitea.New(gitea.Options{URL: s.URL(), Token: bob.Token})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	work := t.TempDir()
	git := func(args ...string) string { return strings.TrimSpace(s.Git(t, alice, work, args...)) }
	commit := func(file, content string) string {
		if err := os.WriteFile(filepath.Join(work, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", ".")
		git("commit", "-q", "-m", "change "+file)
		return git("rev-parse", "HEAD")
	}
	mainHead := func() string {
		out := git("ls-remote", cloneURL, "refs/heads/main")
		sha, _, _ := strings.Cut(out, "\t")
		return sha
	}
	git("init", "-q")
	commit("README.md", "# campaigns\n")
	git("push", "-q", cloneURL, "HEAD:refs/heads/main")

	direct := mainHead()
	if pr, reviews, err := f.MergedPullRequest(ctx, cloneURL, direct); err != nil || pr != nil || reviews != nil {
		t.Errorf("pushed directly: MergedPullRequest = %+v, %+v, %v; want none", pr, reviews, err)
	}

	for i, style := range []string{"merge", "squash", "rebase", "fast-forward-only"} {
		t.Run(style, func(t *testing.T) {
			branch := "change-" + style
			git("fetch", "-q", cloneURL, "main")
			git("checkout", "-q", "-B", branch, "FETCH_HEAD")
			commit(style+"-1.txt", "one\n")
			head := commit(style+"-2.txt", "two\n")
			git("push", "-q", cloneURL, "HEAD:refs/heads/"+branch)

			var opened struct {
				Number int `json:"number"`
			}
			s.Do(t, alice.Token, http.MethodPost, "repos/alice/campaigns/pulls",
				map[string]any{"head": branch, "base": "main", "title": "Change " + style}, &opened)
			if opened.Number != i+1 {
				t.Fatalf("opened #%d, want #%d", opened.Number, i+1)
			}
			s.Do(t, bob.Token, http.MethodPost, fmt.Sprintf("repos/alice/campaigns/pulls/%d/reviews", opened.Number),
				map[string]any{"event": "APPROVED", "body": "Looks good."}, nil)
			waitMergeable(t, s, alice.Token, opened.Number)
			s.Do(t, alice.Token, http.MethodPost, fmt.Sprintf("repos/alice/campaigns/pulls/%d/merge", opened.Number),
				map[string]any{"do": style}, nil)

			merged := mainHead()
			pr, reviews, err := f.MergedPullRequest(ctx, cloneURL, merged)
			if err != nil {
				t.Fatal(err)
			}
			if pr == nil {
				t.Fatalf("main at %s: no merged pull request, want #%d", merged, opened.Number)
			}
			if pr.Number != opened.Number || pr.State != forge.StateMerged || pr.Author != "alice" || pr.Base != "main" || pr.HeadSHA != head {
				t.Errorf("pull request = %+v, want #%d merged into main, by alice, head %s", pr, opened.Number, head)
			}
			approved := false
			for _, r := range reviews {
				approved = approved || (r.User == "bob" && r.State == forge.ReviewApproved && r.CommitID == head)
			}
			if !approved {
				t.Errorf("reviews = %+v, want bob's approval of %s", reviews, head)
			}
			if style == "merge" {
				// The branch's commit is in main, but was not merged as itself.
				if pr, _, err := f.MergedPullRequest(ctx, cloneURL, head); err != nil || pr != nil {
					t.Errorf("the pull request's head: MergedPullRequest = %+v, %v; want none", pr, err)
				}
			}
		})
	}

	// Approved at one commit, pushed to, merged, and the branch reset to
	// the approved commit afterwards: the head reported is the one
	// merged, not the branch's.
	t.Run("branch reset after the merge", func(t *testing.T) {
		git("fetch", "-q", cloneURL, "main")
		git("checkout", "-q", "-B", "sneaky", "FETCH_HEAD")
		approvedHead := commit("sneaky-1.txt", "fine\n")
		git("push", "-q", cloneURL, "HEAD:refs/heads/sneaky")
		var opened struct {
			Number int `json:"number"`
		}
		s.Do(t, alice.Token, http.MethodPost, "repos/alice/campaigns/pulls",
			map[string]any{"head": "sneaky", "base": "main", "title": "Sneaky"}, &opened)
		s.Do(t, bob.Token, http.MethodPost, fmt.Sprintf("repos/alice/campaigns/pulls/%d/reviews", opened.Number),
			map[string]any{"event": "APPROVED"}, nil)
		late := commit("sneaky-2.txt", "unreviewed\n")
		git("push", "-q", cloneURL, "HEAD:refs/heads/sneaky")
		waitMergeable(t, s, alice.Token, opened.Number)
		s.Do(t, alice.Token, http.MethodPost, fmt.Sprintf("repos/alice/campaigns/pulls/%d/merge", opened.Number),
			map[string]any{"do": "squash"}, nil)
		git("push", "-q", "-f", cloneURL, approvedHead+":refs/heads/sneaky")

		pr, reviews, err := f.MergedPullRequest(ctx, cloneURL, mainHead())
		if err != nil || pr == nil {
			t.Fatalf("MergedPullRequest = %+v, %v; want #%d", pr, err, opened.Number)
		}
		if pr.HeadSHA != late {
			t.Errorf("head = %s, want %s, the commit merged (the approved one is %s)", pr.HeadSHA, late, approvedHead)
		}
		if len(reviews) != 1 || reviews[0].CommitID != approvedHead {
			t.Errorf("reviews = %+v, want bob's approval of %s", reviews, approvedHead)
		}
	})
}

// waitMergeable waits for Gitea to finish checking pull request number
// after a push: it answers a merge with 405 until then.
func waitMergeable(t *testing.T, s *giteatest.Server, token string, number int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pr struct {
			Mergeable bool `json:"mergeable"`
		}
		s.Do(t, token, http.MethodGet, fmt.Sprintf("repos/alice/campaigns/pulls/%d", number), nil, &pr)
		if pr.Mergeable {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pull request #%d not mergeable after 30s", number)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
