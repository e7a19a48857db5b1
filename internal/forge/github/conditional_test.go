package github_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/github"
)

// etagServer serves the recorded answers of file as GitHub does, with
// an ETag on each and 304 Not Modified to a request whose If-None-Match
// names it; like GitHub, it counts only full answers against the rate
// limit (X-RateLimit-Remaining).
type etagServer struct {
	mu        sync.Mutex
	bodies    map[string][]byte
	full, not int
	remaining int
}

func newETagServer(t *testing.T, file string) (*etagServer, *httptest.Server) {
	t.Helper()
	s := &etagServer{bodies: map[string][]byte{}, remaining: 5000}
	for _, e := range loadExchanges(t, file) {
		s.bodies[e.Method+" "+e.Path] = e.Body
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		body, ok := s.bodies[r.Method+" "+r.URL.RequestURI()]
		if !ok {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.RequestURI())
			http.NotFound(w, r)
			return
		}
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			s.not++
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(s.remaining))
			w.WriteHeader(http.StatusNotModified)
			return
		}
		s.full++
		s.remaining--
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(s.remaining))
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *etagServer) counts() (full, notModified, remaining int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full, s.not, s.remaining
}

// TestFollowingUnchangedPullRequestsCostsNoRateLimit: the second read of
// a pull request that did not change is four conditional requests the
// forge answers 304, which GitHub does not count; a change is read in
// full, and only what changed.
func TestFollowingUnchangedPullRequestsCostsNoRateLimit(t *testing.T) {
	s, srv := newETagServer(t, "testdata/pull-status.json")
	f, err := github.New(github.Options{BaseURL: srv.URL + "/api/v3/", WebURL: "https://ghe.example/", Token: token,
		Budget: github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	repo := "https://ghe.example/acme/svc.git"
	first, err := f.PullRequestStatus(ctx, repo, 42, "")
	if err != nil {
		t.Fatal(err)
	}
	if full, not, left := s.counts(); full != 4 || not != 0 || left != 4996 {
		t.Fatalf("first read: %d full answers, %d not modified, %d left", full, not, left)
	}
	again, err := f.PullRequestStatus(ctx, repo, 42, "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, first) {
		t.Errorf("read from 304s:\n got %+v\nwant %+v", again, first)
	}
	if full, not, left := s.counts(); full != 4 || not != 4 || left != 4996 {
		t.Errorf("second read: %d full answers, %d not modified, %d of the rate limit left; want 4, 4, 4996", full, not, left)
	}

	// Someone turns it into a draft: the pull request is read in full,
	// its reviews and checks are not.
	s.mu.Lock()
	key := "GET /api/v3/repos/acme/svc/pulls/42"
	s.bodies[key] = []byte(strings.Replace(string(s.bodies[key]), `"draft": false`, `"draft": true`, 1))
	s.mu.Unlock()
	changed, err := f.PullRequestStatus(ctx, repo, 42, "")
	if err != nil {
		t.Fatal(err)
	}
	if !changed.Draft || changed.Review != forge.DecisionApproved {
		t.Errorf("after the change: %+v", changed)
	}
	if full, not, _ := s.counts(); full != 5 || not != 7 {
		t.Errorf("third read: %d full answers, %d not modified; want 5, 7", full, not)
	}
}
