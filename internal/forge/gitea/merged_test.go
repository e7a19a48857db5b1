package gitea_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
)

func TestMergedPullRequest(t *testing.T) {
	var (
		merge = strings.Repeat("c", 40) // the commit on main asked about
		head  = strings.Repeat("a", 40) // the pull request's head, which giteaReview reviews
		other = strings.Repeat("e", 40)
		path  = "/repos/acme/svc/commits/" + merge + "/pull"
	)
	tests := []struct {
		name  string
		pulls []*fakePull
		want  int // the pull request found; 0: none
	}{
		{"pushed directly", nil, 0},
		{"merged", []*fakePull{{State: "closed", Merged: true, HeadSHA: head, MergeSHA: merge, Author: "bob"}}, 1},
		{"branch moved after the merge", []*fakePull{{State: "closed", Merged: true, HeadSHA: other, MergedHead: head, MergeSHA: merge, Author: "bob"}}, 1},
		{"merged as another commit", []*fakePull{{State: "closed", Merged: true, HeadSHA: merge, MergeSHA: other, Author: "bob"}}, 0},
		{"the merged one among several", []*fakePull{
			{State: "open", HeadSHA: merge},
			{State: "closed", Merged: true, HeadSHA: head, MergeSHA: merge, Author: "bob"},
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := newFixture(t)
			for i, p := range tt.pulls {
				p.Head, p.Base = "change-"+string(rune('a'+i)), "main"
				fx.fake.AddPull(p)
			}
			fx.fake.Reviews[tt.want] = []map[string]any{
				giteaReview(1, "bob", "COMMENT", false),
				giteaReview(2, "carol", "APPROVED", true),
				giteaReview(3, "alice", "APPROVED", false),
			}
			pr, reviews, err := fx.f.MergedPullRequest(fx.ctx, fx.url, merge)
			if err != nil {
				t.Fatal(err)
			}
			if n := fx.fake.Count("GET", path); n != 1 {
				t.Errorf("asked %s %d times, want once", path, n)
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
			var got []string
			for _, r := range reviews {
				got = append(got, r.User+" "+r.State+" "+r.CommitID[:1])
			}
			// Gitea's states, normalised as ListReviews does.
			if want := []string{"bob COMMENTED a", "carol DISMISSED a", "alice APPROVED a"}; !slices.Equal(got, want) {
				t.Errorf("reviews = %q, want %q", got, want)
			}
		})
	}
}

func TestMergedPullRequestFailsWithAClearError(t *testing.T) {
	fx := newFixture(t)
	fx.fake.Before = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/commits/") {
			writeJSON(w, http.StatusForbidden, map[string]any{"message": "token does not have at least one of required scope(s): [read:repository]"})
			return true
		}
		return false
	}
	c := strings.Repeat("c", 40)
	_, _, err := fx.f.MergedPullRequest(fx.ctx, fx.url, c)
	if err == nil || !strings.Contains(err.Error(), "find the pull request merged as "+c+" in acme/svc") || strings.Contains(err.Error(), token) {
		t.Errorf("error = %v", err)
	}
}
