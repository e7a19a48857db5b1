package activity_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/github"
	"github.com/fleetlift/fleetlift/internal/status"
)

// clock is the budget's time: sleeping moves it on, so a test sees the
// pacing without waiting for it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

// TestBulkMergeKeepsToTheWriteBudget merges twelve pull requests with
// their branches deleted in one `prs merge` (ActOnPullRequests) through
// a GitHub whose account allows one write every two seconds: the forge
// receives exactly the 24 writes, never two within two seconds of each
// other on the budget's clock, and no other request.
func TestBulkMergeKeepsToTheWriteBudget(t *testing.T) {
	start := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clk := &clock{now: start}
	var mu sync.Mutex
	var writes []time.Time
	asked := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		asked[r.Method]++
		if r.Method != http.MethodGet {
			writes = append(writes, clk.Now())
		}
		switch {
		case r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/merge"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"merged": true, "message": "Pull Request successfully merged"}`)
		case r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/git/refs/heads/"):
			w.WriteHeader(http.StatusNoContent)
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	budget := github.NewBudget(github.BudgetOptions{Rate: 100, WriteRate: 0.5, Now: clk.Now, Sleep: clk.Sleep})
	f, err := github.New(github.Options{BaseURL: srv.URL + "/api/v3/", WebURL: "https://ghe.example/", Token: "t0ken-for-the-test",
		Budget: budget, Now: clk.Now, Sleep: clk.Sleep})
	if err != nil {
		t.Fatal(err)
	}
	a := &activity.Activities{Forges: func(string) (forge.Forge, error) { return f, nil }}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)

	in := activity.ActInput{Request: status.ActRequest{Action: status.ActMerge, Method: forge.MergeSquash, DeleteBranch: true}}
	for i := range 12 {
		p := status.FollowedPR{Repo: fmt.Sprintf("svc-%02d", i),
			PullRequestStatus: forge.PullRequestStatus{State: forge.StateOpen, Head: "6dcb09b5b57875f334f61aebed695e2e4193db5e"}}
		p.Forge, p.Number, p.Branch = "github", 40+i, "auto/bump"
		p.Repository = fmt.Sprintf("https://ghe.example/acme/svc-%02d.git", i)
		p.URL = fmt.Sprintf("https://ghe.example/acme/svc-%02d/pull/%d", i, 40+i)
		in.PRs = append(in.PRs, p)
	}
	v, err := env.ExecuteActivity(a.ActOnPullRequests, in)
	if err != nil {
		t.Fatal(err)
	}
	var out []status.ActOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if o.Outcome != status.ActDone {
			t.Errorf("%s: %s %s", o.Repo, o.Outcome, o.Reason)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(out) != 12 || asked[http.MethodPut] != 12 || asked[http.MethodDelete] != 12 || asked[http.MethodGet] != 0 {
		t.Fatalf("%d outcomes; requests %v, want 12 merges and 12 branch deletions only", len(out), asked)
	}
	for i := 1; i < len(writes); i++ {
		if gap := writes[i].Sub(writes[i-1]); gap < 2*time.Second {
			t.Errorf("writes %d and %d %s apart, within the budget's two seconds", i-1, i, gap)
		}
	}
	if span := writes[len(writes)-1].Sub(start); span < 46*time.Second {
		t.Errorf("24 writes at one every two seconds took %s on the budget's clock, want at least 46s", span)
	}
}
