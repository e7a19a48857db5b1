package github_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
)

func TestMergedPullRequest(t *testing.T) {
	var (
		merge  = strings.Repeat("c", 40) // the commit on main asked about
		head   = strings.Repeat("d", 40) // a pull request's head
		other  = strings.Repeat("e", 40)
		commit = "/repos/acme/svc/commits/" + merge + "/pulls"
	)
	approved := review(1, "alice", "APPROVED")
	approved["commit_id"] = head
	tests := []struct {
		name  string
		pulls []*fakePull
		want  int // the pull request found; 0: none
	}{
		{"pushed directly", nil, 0},
		{"merge commit", []*fakePull{{State: "closed", Merged: true, HeadSHA: head, MergeSHA: merge, Author: "bob"}}, 1},
		{"on an open pull request's branch only", []*fakePull{{State: "open", HeadSHA: merge, MergeSHA: other}}, 0},
		{"merged as another commit", []*fakePull{{State: "closed", Merged: true, HeadSHA: merge, MergeSHA: other}}, 0},
		{"closed without merging", []*fakePull{{State: "closed", HeadSHA: head, MergeSHA: merge}}, 0},
		{"the merged one among several", []*fakePull{
			{State: "open", HeadSHA: merge, MergeSHA: other},
			{State: "closed", Merged: true, HeadSHA: head, MergeSHA: merge, Author: "bob"},
			{State: "closed", Merged: true, HeadSHA: merge, MergeSHA: other},
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			fx.fake.MaxPerPage = 1 // the one that counts may be on any page
			for i, p := range tt.pulls {
				p.Head, p.Base = "change-"+string(rune('a'+i)), "main"
				fx.fake.AddPull(p)
			}
			fx.fake.Reviews[tt.want] = []map[string]any{review(2, "bob", "COMMENTED"), approved}
			pr, reviews, err := fx.f.MergedPullRequest(fx.ctx, fx.url, merge)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == 0 {
				if pr != nil || reviews != nil {
					t.Errorf("MergedPullRequest = %+v, %+v; want none", pr, reviews)
				}
				return
			}
			if pr == nil {
				t.Fatalf("MergedPullRequest found none, want #%d", tt.want)
			}
			if pr.Number != tt.want || pr.State != forge.StateMerged || pr.Author != "bob" || pr.HeadSHA != head || pr.Base != "main" {
				t.Errorf("pull request = %+v, want #%d merged into main by bob at %s", pr, tt.want, head)
			}
			if len(reviews) != 2 || reviews[1].User != "alice" || reviews[1].State != forge.ReviewApproved || reviews[1].CommitID != head {
				t.Errorf("reviews = %+v, want bob's comment and alice's approval of %s", reviews, head)
			}
			if n := fx.fake.Count("GET", commit); n < 1 {
				t.Errorf("asked %s %d times", commit, n)
			}
		})
	}
}

func TestMergedPullRequestRefusesBadCommits(t *testing.T) {
	fx := newFixture(t)
	for _, c := range []string{"", "main", "HEAD~1", strings.Repeat("C", 40), "../pulls/" + strings.Repeat("c", 31)} {
		if _, _, err := fx.f.MergedPullRequest(fx.ctx, fx.url, c); err == nil || !strings.Contains(err.Error(), "invalid commit") {
			t.Errorf("MergedPullRequest(%q): error %v, want invalid commit", c, err)
		}
	}
	fx.fake.Mu.Lock()
	defer fx.fake.Mu.Unlock()
	if len(fx.fake.Calls) != 0 {
		t.Errorf("API calls for invalid commits: %+v, want none", fx.fake.Calls)
	}
}

func TestMergedPullRequestFailsWithAClearError(t *testing.T) {
	fx := newFixture(t)
	fx.fake.Before = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/commits/") {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "No commit found for SHA: " + r.PathValue("sha")})
			return true
		}
		return false
	}
	_, _, err := fx.f.MergedPullRequest(fx.ctx, fx.url, strings.Repeat("c", 40))
	if err == nil || !strings.Contains(err.Error(), "find the pull request merged as "+strings.Repeat("c", 40)+" in acme/svc") || strings.Contains(err.Error(), token) {
		t.Errorf("error = %v", err)
	}
}
