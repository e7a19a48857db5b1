package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/gateway"
)

const realKey = "sk-ant-real-key-canary"

// model is a stand-in for the Messages API: it records the keys it was
// sent and answers with the usage it is told to, as JSON or as a stream.
type model struct {
	mu   sync.Mutex
	keys []string
	auth []string
}

func (m *model) serve(t *testing.T) *url.URL {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.keys = append(m.keys, r.Header.Get("X-Api-Key"))
		m.auth = append(m.auth, r.Header.Get("Authorization"))
		m.mu.Unlock()
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":120,\"output_tokens\":1,\"cache_read_input_tokens\":30}}}\n\n")
			fmt.Fprint(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n")
			fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":40}}\n\n")
			fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":55}}\n\n")
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":200,"output_tokens":80,"cache_creation_input_tokens":20}}`)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

func call(t *testing.T, gw http.Handler, key string, stream bool) (int, string) {
	t.Helper()
	body := `{"model":"claude","max_tokens":100,"messages":[]}`
	if stream {
		body = `{"model":"claude","max_tokens":100,"stream":true,"messages":[]}`
	}
	req := httptest.NewRequest(http.MethodPost, "http://gateway/v1/messages", strings.NewReader(body))
	req.Header.Set("X-Api-Key", key)
	req.Header.Set("Authorization", "Bearer "+key)
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, req)
	data, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(data)
}

// saves records what a sandbox's Save was told.
type saves struct {
	mu   sync.Mutex
	all  []gateway.Usage
	hold chan struct{} // when set, each save waits for it to close
}

func (s *saves) save(u gateway.Usage) {
	if s.hold != nil {
		<-s.hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, u)
}

// waitFor waits until the last usage saved is want: saves come after the
// calls, off their path.
func (s *saves) waitFor(t *testing.T, want gateway.Usage) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		all := slices.Clone(s.all)
		s.mu.Unlock()
		if len(all) > 0 && all[len(all)-1] == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage saved %v; want the last to be %+v", all, want)
		}
	}
}

// A sandbox whose files are slow to write (a pod's, through the
// provider's API) does not slow its model calls: they are answered while
// its saves wait, and the last save then has every call's usage.
func TestSlowSavesDoNotHoldUpCalls(t *testing.T) {
	m := &model{}
	saved := &saves{hold: make(chan struct{})}
	gw := &gateway.Gateway{Upstream: m.serve(t), Key: realKey}
	key, err := gw.Open(gateway.Sandbox{ID: "slow", Save: saved.save})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if code, body := call(t, gw, key, false); code != http.StatusOK {
			t.Fatalf("call %d while the saves wait: %d %s", i, code, body)
		}
	}
	close(saved.hold)
	saved.waitFor(t, gateway.Usage{Requests: 3, InputTokens: 600, OutputTokens: 240, CacheCreationInputTokens: 60})
	gw.Close(key)
}

// The model sees the real key and never a sandbox's; the sandbox never
// gets the real key back; the tokens the model reports are counted, from
// a JSON answer and from a stream.
func TestGatewayAddsTheKeyAndCounts(t *testing.T) {
	m := &model{}
	saved := &saves{}
	gw := &gateway.Gateway{Upstream: m.serve(t), Key: realKey}
	key, err := gw.Open(gateway.Sandbox{ID: "s1", Save: saved.save})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(key, realKey) {
		t.Fatal("a sandbox's key holds the real one")
	}
	if code, body := call(t, gw, key, false); code != http.StatusOK || strings.Contains(body, realKey) {
		t.Fatalf("JSON call: %d %s", code, body)
	}
	if code, body := call(t, gw, key, true); code != http.StatusOK || !strings.Contains(body, "message_stop") {
		t.Fatalf("stream call: %d %s", code, body)
	}
	for i, k := range m.keys {
		if k != realKey || m.auth[i] != "" {
			t.Errorf("request %d reached the model with x-api-key %q, authorization %q; want the real key alone", i, k, m.auth[i])
		}
	}
	u, _ := gw.Usage(key)
	want := gateway.Usage{Requests: 2, InputTokens: 320, OutputTokens: 135, CacheCreationInputTokens: 20, CacheReadInputTokens: 30}
	if u != want {
		t.Errorf("usage %+v; want %+v", u, want)
	}
	saved.waitFor(t, want)
	if got := gw.Close(key); got != want {
		t.Errorf("Close: %+v", got)
	}
	if code, _ := call(t, gw, key, false); code != http.StatusUnauthorized {
		t.Errorf("a closed sandbox's key: %d; want 401", code)
	}
}

// A key the gateway did not give, or none, reaches nothing.
func TestGatewayRefusesUnknownKeys(t *testing.T) {
	m := &model{}
	gw := &gateway.Gateway{Upstream: m.serve(t), Key: realKey}
	for _, key := range []string{"", realKey, "fleetlift-gw-0000"} {
		if code, _ := call(t, gw, key, false); code != http.StatusUnauthorized {
			t.Errorf("key %q: %d; want 401", key, code)
		}
	}
	if len(m.keys) != 0 {
		t.Errorf("the model was called %d times", len(m.keys))
	}
}

// Once a sandbox's tokens reach its limit, its requests are refused with
// the reason, which its usage keeps; the model is not called.
func TestGatewayStopsAtTheLimit(t *testing.T) {
	m := &model{}
	gw := &gateway.Gateway{Upstream: m.serve(t), Key: realKey}
	key, _ := gw.Open(gateway.Sandbox{ID: "s1", Limit: func() int64 { return 250 }})
	if code, _ := call(t, gw, key, false); code != http.StatusOK {
		t.Fatalf("first call (0 of 250 used): %d", code)
	}
	code, body := call(t, gw, key, false)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "token budget is spent: 300 of limits.max_tokens 250") {
		t.Fatalf("second call (300 of 250 used): %d %s; want 429 saying why", code, body)
	}
	if len(m.keys) != 1 {
		t.Errorf("the model was called %d times; want once", len(m.keys))
	}
	if u, _ := gw.Usage(key); !strings.Contains(u.Refused, "token budget is spent") || u.Requests != 1 {
		t.Errorf("usage %+v; want one request and the refusal", u)
	}
}
