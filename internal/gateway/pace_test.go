package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// With a tokens-per-minute limit, a call waits while the last minute's
// tokens, every sandbox's together, reach it, and goes once the oldest
// of them is a minute old; a caller that gives up is never forwarded.
func TestGatewayPacesTokensPerMinute(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"model":"m","usage":{"input_tokens":3000,"output_tokens":500}}`)
	}))
	defer srv.Close()
	up, _ := url.Parse(srv.URL)

	var now atomic.Pointer[time.Time]
	start := time.Date(2026, 12, 5, 4, 0, 0, 0, time.UTC)
	now.Store(&start)
	asked := make(chan time.Duration, 1)
	fire := make(chan time.Time)
	gw := &Gateway{Upstream: up, Key: "real", TokensPerMinute: 3500}
	gw.own.now = func() time.Time { return *now.Load() }
	gw.own.after = func(d time.Duration) <-chan time.Time {
		asked <- d
		return fire
	}
	k1, _ := gw.Open(Sandbox{ID: "s1"})
	k2, _ := gw.Open(Sandbox{ID: "s2"})
	send := func(key string) chan int {
		done := make(chan int, 1)
		go func() {
			req := httptest.NewRequest(http.MethodPost, "http://gateway/v1/messages", strings.NewReader(`{}`))
			req.Header.Set("X-Api-Key", key)
			rec := httptest.NewRecorder()
			gw.ServeHTTP(rec, req)
			done <- rec.Code
		}()
		return done
	}
	if code := <-send(k1); code != http.StatusOK {
		t.Fatalf("first call: %d", code)
	}
	// 3,500 tokens at 04:00:00: s2's call at 04:00:20 waits 40 s.
	later := start.Add(20 * time.Second)
	now.Store(&later)
	done := send(k2)
	select {
	case d := <-asked:
		if d != 40*time.Second {
			t.Errorf("the waiting call waits %s; want 40s, until the tokens of 04:00:00 are a minute old", d)
		}
	case code := <-done:
		t.Fatalf("a call past the minute's tokens was not held: %d", code)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the model was called %d times while the call waits; want once", n)
	}
	minute := start.Add(time.Minute)
	now.Store(&minute)
	fire <- minute
	if code := <-done; code != http.StatusOK {
		t.Fatalf("the paced call: %d", code)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the model was called %d times; want the paced call forwarded", n)
	}
	if u, _ := gw.Usage(k2); u.Requests != 1 || u.InputTokens != 3000 {
		t.Errorf("the paced sandbox's usage %+v; want its call counted", u)
	}
}
