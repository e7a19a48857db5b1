package github_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/github"
)

// hits counts requests per path.
type hits struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *hits) add(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[path]++
	return h.n[path]
}

func (h *hits) get(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[path]
}

// budgetServer answers with answer(path, nth request to path).
func budgetServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, n int)) (*httptest.Server, *hits) {
	h := &hits{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(w, r, h.add(r.URL.Path))
	}))
	t.Cleanup(srv.Close)
	return srv, h
}

func get(ctx context.Context, c *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

func secondaryLimit(w http.ResponseWriter, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeJSON(w, http.StatusForbidden, map[string]any{
		"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
		"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits",
	})
}

func TestSecondaryLimitHoldsBackEveryCaller(t *testing.T) {
	srv, h := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.URL.Path == "/a" && n == 1 {
			secondaryLimit(w, "2")
			return
		}
		w.Write([]byte("ok"))
	})
	clk := newClock()
	sleeping := make(chan time.Duration)
	release := make(chan struct{})
	logs := &bytes.Buffer{}
	b := github.NewBudget(github.BudgetOptions{
		Rate: -1, WriteRate: -1, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Sleep: func(ctx context.Context, d time.Duration) error {
			sleeping <- d
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
	})
	c := &http.Client{Transport: b.Transport(nil)}
	ctx := context.Background()

	type result struct {
		resp *http.Response
		err  error
	}
	first, second := make(chan result, 1), make(chan result, 1)
	go func() {
		resp, err := get(ctx, c, srv.URL+"/a")
		first <- result{resp, err}
	}()
	if d := <-sleeping; d != 2*time.Second {
		t.Errorf("the limited caller waits %v, want 2s", d)
	}
	// A second caller on the same budget, to another path, waits too
	// and sends nothing meanwhile.
	go func() {
		resp, err := get(ctx, c, srv.URL+"/b")
		second <- result{resp, err}
	}()
	if d := <-sleeping; d != 2*time.Second {
		t.Errorf("the other caller waits %v, want 2s", d)
	}
	if n := h.get("/b"); n != 0 {
		t.Errorf("the other caller was sent during the wait (%d requests)", n)
	}
	clk.advance(2 * time.Second)
	close(release)
	for name, ch := range map[string]chan result{"first": first, "second": second} {
		r := <-ch
		if r.err != nil || r.resp.StatusCode != http.StatusOK {
			t.Errorf("%s caller: %v, %v", name, r.resp, r.err)
		}
	}
	if h.get("/a") != 2 || h.get("/b") != 1 {
		t.Errorf("requests: /a %d (want 2), /b %d (want 1)", h.get("/a"), h.get("/b"))
	}
	if !strings.Contains(logs.String(), "rate limit") {
		t.Errorf("the wait was not logged:\n%s", logs)
	}
}

func TestPrimaryLimitWaitsForReset(t *testing.T) {
	clk := newClock()
	srv, h := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		now := clk.Now()
		w.Header().Set("Date", now.Format(http.TimeFormat))
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(30*time.Second).Unix(), 10))
		if n == 1 {
			w.Header().Set("X-RateLimit-Remaining", "0")
			writeJSON(w, http.StatusForbidden, map[string]any{"message": "API rate limit exceeded for user ID 1."})
			return
		}
		w.Header().Set("X-RateLimit-Remaining", "4999")
		w.Write([]byte("ok"))
	})
	b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1, Now: clk.Now, Sleep: clk.Sleep})
	c := &http.Client{Transport: b.Transport(nil)}
	resp, err := get(context.Background(), c, srv.URL+"/x")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("get: %v, %v", resp, err)
	}
	if got := clk.slept(); !slices.Equal(got, []time.Duration{30 * time.Second}) {
		t.Errorf("waited %v, want [30s]", got)
	}
	if h.get("/x") != 2 {
		t.Errorf("%d requests, want 2", h.get("/x"))
	}
	if resp.Header.Get("X-RateLimit-Reset") != "" {
		t.Error("the reset header the budget acted on reached the client")
	}
}

func TestPrimaryLimitUsedUpByASuccessPausesTheNextRequest(t *testing.T) {
	clk := newClock()
	srv, _ := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		now := clk.Now()
		w.Header().Set("Date", now.Format(http.TimeFormat))
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(now.Add(10*time.Second).Unix(), 10))
		w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(1-n))
		w.Write([]byte("ok"))
	})
	b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1, Now: clk.Now, Sleep: clk.Sleep})
	c := &http.Client{Transport: b.Transport(nil)}
	for range 2 {
		if _, err := get(context.Background(), c, srv.URL+"/x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := clk.slept(); !slices.Equal(got, []time.Duration{10 * time.Second}) {
		t.Errorf("waited %v, want [10s] before the second request", got)
	}
}

func TestServerErrorsAreRetriedThenFail(t *testing.T) {
	clk := newClock()
	srv, h := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		http.Error(w, "upstream failed", http.StatusBadGateway)
	})
	b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1, MaxRetries: 3, Backoff: time.Second, Now: clk.Now, Sleep: clk.Sleep})
	c := &http.Client{Transport: b.Transport(nil)}
	_, err := get(context.Background(), c, srv.URL+"/x")
	if !errors.Is(err, github.ErrUnavailable) || !strings.Contains(err.Error(), "502 Bad Gateway after 4 attempts") {
		t.Fatalf("error = %v, want forge unavailable: 502 Bad Gateway after 4 attempts", err)
	}
	if h.get("/x") != 4 {
		t.Errorf("%d requests, want 4", h.get("/x"))
	}
	waits := clk.slept()
	if len(waits) != 3 {
		t.Fatalf("waited %v, want 3 backoffs", waits)
	}
	for i, d := range waits {
		lo := time.Second << i
		if d < lo || d > lo+lo/2 {
			t.Errorf("backoff %d = %v, want between %v and %v", i, d, lo, lo+lo/2)
		}
	}
}

func TestRetryReplaysTheBody(t *testing.T) {
	var bodies []string
	var mu sync.Mutex
	srv, _ := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		data, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(data))
		mu.Unlock()
		if n == 1 {
			// Refused for a rate limit: the forge did not act.
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	clk := newClock()
	b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1, Now: clk.Now, Sleep: clk.Sleep})
	c := &http.Client{Transport: b.Transport(nil)}
	resp, err := c.Post(srv.URL+"/comments", "application/json", strings.NewReader(`{"body":"hello"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("post: %v, %v", resp, err)
	}
	resp.Body.Close()
	if !slices.Equal(bodies, []string{`{"body":"hello"}`, `{"body":"hello"}`}) {
		t.Errorf("bodies = %q", bodies)
	}
}

// TestServerErrorsRetryOnlyRepeatableRequests: after a server error the
// forge may have acted, so the budget sends a request again only when
// repeating it changes nothing.
func TestServerErrorsRetryOnlyRepeatableRequests(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		idempotent bool
		wantSent   int
		wantStatus int
	}{
		{"a read is retried", http.MethodGet, false, 2, http.StatusOK},
		{"a PUT is retried", http.MethodPut, false, 2, http.StatusOK},
		{"a POST is answered as it came", http.MethodPost, false, 1, http.StatusBadGateway},
		{"a PATCH is answered as it came", http.MethodPatch, false, 1, http.StatusBadGateway},
		{"a POST marked idempotent is retried", http.MethodPost, true, 2, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, h := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					http.Error(w, "upstream timed out", http.StatusBadGateway)
					return
				}
				w.WriteHeader(http.StatusOK)
			})
			clk := newClock()
			b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1, Now: clk.Now, Sleep: clk.Sleep})
			ctx := context.Background()
			if tt.idempotent {
				ctx = github.Idempotent(ctx)
			}
			req, err := http.NewRequestWithContext(ctx, tt.method, srv.URL+"/x", strings.NewReader(`{"body":"hello"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := (&http.Client{Transport: b.Transport(nil)}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus || h.get("/x") != tt.wantSent {
				t.Errorf("%s after %d requests, want %d after %d", resp.Status, h.get("/x"), tt.wantStatus, tt.wantSent)
			}
		})
	}
}

func TestPermissionDeniedIsNotRetried(t *testing.T) {
	srv, h := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("X-RateLimit-Remaining", "4000")
		writeJSON(w, http.StatusForbidden, map[string]any{"message": "Resource not accessible by integration"})
	})
	b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1})
	resp, err := get(context.Background(), &http.Client{Transport: b.Transport(nil)}, srv.URL+"/x")
	if err != nil || resp.StatusCode != http.StatusForbidden || h.get("/x") != 1 {
		t.Errorf("got %v, %v after %d requests; want one 403", resp, err, h.get("/x"))
	}
}

func TestWaitRespectsTheContext(t *testing.T) {
	srv, _ := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})

	t.Run("cancelled while waiting", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		var slept atomic.Bool
		b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1, Sleep: func(ctx context.Context, d time.Duration) error {
			slept.Store(true)
			cancel()
			<-ctx.Done()
			return ctx.Err()
		}})
		_, err := get(ctx, &http.Client{Transport: b.Transport(nil)}, srv.URL+"/x")
		if !errors.Is(err, context.Canceled) || !slept.Load() {
			t.Errorf("error = %v, want context canceled during the wait", err)
		}
	})
	t.Run("a wait past the deadline fails at once", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var slept atomic.Bool
		b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: -1, Sleep: func(context.Context, time.Duration) error {
			slept.Store(true)
			return nil
		}})
		_, err := get(ctx, &http.Client{Transport: b.Transport(nil)}, srv.URL+"/x")
		if !errors.Is(err, github.ErrRateLimited) || slept.Load() {
			t.Errorf("error = %v (slept %v), want forge rate limit exceeded without a wait", err, slept.Load())
		}
	})
}

func TestTokenBucketSpacesRequests(t *testing.T) {
	srv, _ := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusOK) })
	tests := []struct {
		name   string
		opts   github.BudgetOptions
		method string
		want   []time.Duration
	}{
		{"reads at 2 per second", github.BudgetOptions{Rate: 2, Burst: 1, WriteRate: -1}, http.MethodGet, []time.Duration{500 * time.Millisecond, 500 * time.Millisecond}},
		{"writes at 1 per second", github.BudgetOptions{Rate: -1, WriteRate: 1}, http.MethodPost, []time.Duration{time.Second, time.Second}},
		{"reads are not writes", github.BudgetOptions{Rate: -1, WriteRate: 1}, http.MethodGet, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			tt.opts.Now, tt.opts.Sleep = clk.Now, clk.Sleep
			c := &http.Client{Transport: github.NewBudget(tt.opts).Transport(nil)}
			for range 3 {
				req, _ := http.NewRequest(tt.method, srv.URL+"/x", nil)
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			if got := clk.slept(); !slices.Equal(got, tt.want) {
				t.Errorf("waited %v, want %v", got, tt.want)
			}
		})
	}
}

// sharedBudget records what a budget asked of its shared write budget.
type sharedBudget struct {
	mu       sync.Mutex
	acquired int
	holds    []time.Time
}

func (s *sharedBudget) Acquire(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquired++
	return nil
}

func (s *sharedBudget) Hold(_ context.Context, until time.Time, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holds = append(s.holds, until)
	return nil
}

// With a shared budget, each write (and each retry of one) waits for its
// permit there, reads do not, and a secondary limit holds the shared
// budget back until the forge's time, for every process.
func TestSharedBudgetPermitsWritesAndTakesHolds(t *testing.T) {
	clk := newClock()
	srv, _ := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodPost && n == 1 {
			secondaryLimit(w, "7")
			return
		}
		w.Write([]byte("ok"))
	})
	shared := &sharedBudget{}
	start := clk.Now()
	b := github.NewBudget(github.BudgetOptions{Rate: -1, Shared: shared, Now: clk.Now, Sleep: clk.Sleep})
	c := &http.Client{Transport: b.Transport(nil)}
	if _, err := get(context.Background(), c, srv.URL+"/read"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pulls", strings.NewReader("{}"))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("{}")), nil }
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the write: %v %v", resp, err)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.acquired != 2 {
		t.Errorf("%d permits asked for; want 2 (the write and its retry), none for the read", shared.acquired)
	}
	if len(shared.holds) != 1 || !shared.holds[0].Equal(start.Add(7*time.Second)) {
		t.Errorf("holds %v; want one until 7s from now", shared.holds)
	}
}

// unserved is a shared budget no process serves.
type unserved struct{ asked atomic.Int32 }

func (u *unserved) Acquire(context.Context) error {
	u.asked.Add(1)
	return fmt.Errorf("%w: no worker", github.ErrSharedUnavailable)
}

func (u *unserved) Hold(context.Context, time.Time, string) error { return nil }

// A shared budget no process serves does not stop the writes: they are
// paced by this process's own write bucket, as without one.
func TestUnservedSharedBudgetFallsBackToTheOwnBucket(t *testing.T) {
	clk := newClock()
	srv, h := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) { w.Write([]byte("ok")) })
	shared := &unserved{}
	b := github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: 1, Shared: shared, Now: clk.Now, Sleep: clk.Sleep})
	c := &http.Client{Transport: b.Transport(nil)}
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pulls", strings.NewReader("{}"))
		resp, err := c.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a write with the shared budget unserved: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if h.get("/pulls") != 3 || shared.asked.Load() != 3 {
		t.Errorf("%d writes sent, %d permits asked; want 3 and 3", h.get("/pulls"), shared.asked.Load())
	}
	if got := clk.slept(); !slices.Equal(got, []time.Duration{time.Second, time.Second}) {
		t.Errorf("waited %v; want the own bucket's second between writes", got)
	}
}

// With a shared budget of requests (requests_per_hour), every request,
// read or write, and each retry waits for its permit there, besides the
// write's own permit; a rate limit holds both shared budgets back; and a
// budget of requests no process serves lets requests go, uncounted.
func TestSharedRequestsCountEveryRequest(t *testing.T) {
	clk := newClock()
	srv, h := budgetServer(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Method == http.MethodGet && n == 1 {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Write([]byte("ok"))
	})
	writes, requests := &sharedBudget{}, &sharedBudget{}
	start := clk.Now()
	b := github.NewBudget(github.BudgetOptions{Rate: -1, Shared: writes, SharedRequests: requests, Now: clk.Now, Sleep: clk.Sleep})
	c := &http.Client{Transport: b.Transport(nil)}
	if _, err := get(context.Background(), c, srv.URL+"/read"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/pulls", strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the write: %v %v", resp, err)
	}
	resp.Body.Close()
	for name, s := range map[string]*sharedBudget{"writes": writes, "requests": requests} {
		s.mu.Lock()
		if len(s.holds) != 1 || !s.holds[0].Equal(start.Add(3*time.Second)) {
			t.Errorf("the shared %s budget's holds %v; want one until 3s from now", name, s.holds)
		}
		s.mu.Unlock()
	}
	if requests.acquired != 3 || writes.acquired != 1 {
		t.Errorf("%d permits of requests and %d of writes asked for; want 3 (the read, its retry, the write) and 1", requests.acquired, writes.acquired)
	}

	u := &unserved{}
	b.ShareRequests(u)
	if _, err := get(context.Background(), c, srv.URL+"/read"); err != nil {
		t.Fatalf("a read with the budget of requests unserved: %v", err)
	}
	if u.asked.Load() != 1 || h.get("/read") != 3 {
		t.Errorf("%d permits asked, %d reads sent; want the read asked for and sent anyway", u.asked.Load(), h.get("/read"))
	}
}
