package github_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
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
}

// replay serves the exchanges of a testdata file, each as often as it
// is asked, and fails the test on a request it does not hold; asked
// counts the requests by method and path.
func replay(t *testing.T, file string) (*httptest.Server, func() map[string]int) {
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
	var mu sync.Mutex
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Method + " " + r.URL.RequestURI()
		mu.Lock()
		asked[key]++
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+token {
			t.Errorf("%s without the token", key)
		}
		for _, e := range rec.Exchanges {
			if e.Method+" "+e.Path == key {
				w.Header().Set("Content-Type", contentType)
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
	}
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
