package github_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/github"
)

// exchange is one request and GitHub's answer to it.
type exchange struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
	// Headers are answer headers besides the content type (Link).
	Headers map[string]string `json:"headers,omitempty"`
}

// replay serves the exchanges of a testdata file, each as often as it
// is asked, and fails the test on a request it does not hold; asked
// counts the requests by method and path.
func replay(t *testing.T, file string) (*httptest.Server, func() map[string]int) {
	srv, asked, _ := replayBodies(t, file)
	return srv, asked
}

// replayBodies is replay that also keeps the body of each request, by
// method and path.
func replayBodies(t *testing.T, file string) (*httptest.Server, func() map[string]int, func(string) string) {
	t.Helper()
	rec := struct{ Exchanges []exchange }{loadExchanges(t, file)}
	var mu sync.Mutex
	asked := map[string]int{}
	bodies := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.RequestURI()
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		asked[key]++
		bodies[key] = string(body)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("%s without the token", key)
		}
		for _, e := range rec.Exchanges {
			if e.Method+" "+e.Path == key {
				w.Header().Set("Content-Type", contentType)
				for k, v := range e.Headers {
					w.Header().Set(k, v)
				}
				w.WriteHeader(e.Status)
				w.Write(e.Body)
				return
			}
		}
		t.Errorf("unexpected request %s", key)
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			out := map[string]int{}
			for k, v := range asked {
				out[k] = v
			}
			return out
		}, func(key string) string {
			mu.Lock()
			defer mu.Unlock()
			return bodies[key]
		}
}

// loadExchanges reads the recorded exchanges of a testdata file.
func loadExchanges(t *testing.T, file string) []exchange {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Exchanges []exchange `json:"exchanges"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return rec.Exchanges
}

func TestPullRequestStatusFromGitHub(t *testing.T) {
	srv, asked := replay(t, "testdata/pull-status.json")
	f, err := github.New(github.Options{BaseURL: srv.URL + "/api/v3/", WebURL: "https://ghe.example/", Token: token,
		Budget: github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := "https://ghe.example/acme/svc.git"

	for _, tc := range []struct {
		number int
		want   forge.PullRequestStatus
	}{
		{42, forge.PullRequestStatus{State: forge.StateOpen, Head: "6dcb09b5b57875f334f61aebed695e2e4193db5e", Base: "main",
			BaseSHA: "9fceb02d0ae598e95dc970b74767f19372d61af8", Mergeable: forge.MergeableYes, Review: forge.DecisionApproved,
			Checks: forge.StatusFailure, FailedChecks: []string{"build"}, Labels: []string{"automated"}}},
		{43, forge.PullRequestStatus{State: forge.StateMerged, Head: "7dcb09b5b57875f334f61aebed695e2e4193db5e", Base: "main",
			BaseSHA: "9fceb02d0ae598e95dc970b74767f19372d61af8", Labels: []string{}}},
		{44, forge.PullRequestStatus{State: forge.StateOpen, Draft: true, Head: "8dcb09b5b57875f334f61aebed695e2e4193db5e", Base: "main",
			BaseSHA: "9fceb02d0ae598e95dc970b74767f19372d61af8", Mergeable: forge.MergeableConflict, Review: forge.DecisionNone,
			Checks: forge.StatusPending, Labels: []string{}}},
	} {
		got, err := f.PullRequestStatus(ctx, repo, tc.number, "")
		if err != nil {
			t.Fatalf("#%d: %v", tc.number, err)
		}
		if !reflect.DeepEqual(*got, tc.want) {
			t.Errorf("#%d:\n got %+v\nwant %+v", tc.number, *got, tc.want)
		}
	}
	// A merged pull request costs one request: its reviews and checks
	// no longer matter.
	for k, n := range asked() {
		if n != 1 {
			t.Errorf("%s asked %d times", k, n)
		}
	}
	if _, ok := asked()["GET /api/v3/repos/acme/svc/pulls/43/reviews?page=1&per_page=100"]; ok {
		t.Error("the reviews of a merged pull request were read")
	}
}

func TestMergeAndCloseOnGitHub(t *testing.T) {
	srv, asked, body := replayBodies(t, "testdata/land.json")
	f, err := github.New(github.Options{BaseURL: srv.URL + "/api/v3/", WebURL: "https://ghe.example/", Token: token,
		Budget: github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pr := func(n int) forge.PullRequestRef {
		return forge.PullRequestRef{Repository: "https://ghe.example/acme/svc.git", Number: n, Branch: branch}
	}
	head := "6dcb09b5b57875f334f61aebed695e2e4193db5e"
	if err := f.MergePullRequest(ctx, pr(42), forge.MergeOptions{Method: forge.MergeSquash, Head: head, DeleteBranch: true}); err != nil {
		t.Fatal(err)
	}
	var sent map[string]string
	if err := json.Unmarshal([]byte(body("PUT /api/v3/repos/acme/svc/pulls/42/merge")), &sent); err != nil || sent["merge_method"] != "squash" || sent["sha"] != head {
		t.Errorf("merge sent %v (%v); want squash at %s", sent, err, head)
	}
	if asked()["DELETE /api/v3/repos/acme/svc/git/refs/heads/fleetlift/slog-migration"] != 1 {
		t.Errorf("the branch was not deleted: %v", asked())
	}
	if err := f.MergePullRequest(ctx, pr(45), forge.MergeOptions{}); !errors.Is(err, forge.ErrNotMergeable) || strings.Contains(err.Error(), token) {
		t.Errorf("405: %v; want ErrNotMergeable", err)
	}
	if err := f.MergePullRequest(ctx, pr(46), forge.MergeOptions{Head: head}); !errors.Is(err, forge.ErrHeadMoved) {
		t.Errorf("409: %v; want ErrHeadMoved", err)
	}
	if err := f.ClosePullRequestAs(ctx, pr(47), "Superseded by the new run.", false); err != nil {
		t.Fatal(err)
	}
	if got := body("PATCH /api/v3/repos/acme/svc/pulls/47"); !strings.Contains(got, `"state":"closed"`) {
		t.Errorf("close sent %s", got)
	}
	if got := body("POST /api/v3/repos/acme/svc/issues/47/comments"); !strings.Contains(got, "Superseded by the new run.") {
		t.Errorf("comment sent %s", got)
	}
}

// TestProposeAgainUpdatesTheOpenPullRequest: a change made again on a
// branch whose pull request is open (keep_current, prs update, a
// reopen) updates that pull request's body, through recorded GitHub
// answers, and opens no second one; proposed again as it is, it asks
// for nothing to change.
func TestProposeAgainUpdatesTheOpenPullRequest(t *testing.T) {
	srv, asked, bodies := replayBodies(t, "testdata/update.json")
	f, err := github.New(github.Options{BaseURL: srv.URL + "/api/v3/", WebURL: "https://ghe.example/", Token: token,
		Budget: github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1})})
	if err != nil {
		t.Fatal(err)
	}
	req := forge.PullRequestRequest{Repository: "https://ghe.example/acme/svc.git", Head: "fleetlift/slog-migration", Base: "main",
		Title: "Move to slog", Body: "Made again on main at 1a2b3c4."}
	pr, err := f.CreatePullRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if pr.Number != 42 || pr.URL != "https://ghe.example/acme/svc/pull/42" {
		t.Errorf("proposed again: %+v, want pull request 42", pr)
	}
	const patch = "PATCH /api/v3/repos/acme/svc/pulls/42"
	if n := asked()[patch]; n != 1 || !strings.Contains(bodies(patch), "Made again on main at 1a2b3c4.") {
		t.Errorf("the body was updated %d times, with %s", n, bodies(patch))
	}
	if n := asked()["POST /api/v3/repos/acme/svc/pulls"]; n != 0 {
		t.Errorf("a second pull request was asked for %d times", n)
	}
	req.Body = "Made on main at 9fceb02."
	if _, err := f.CreatePullRequest(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := asked()[patch]; n != 1 {
		t.Errorf("an unchanged proposal edited the pull request (%d edits)", n)
	}
}
