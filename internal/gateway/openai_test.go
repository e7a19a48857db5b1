package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/gateway"
)

const realOpenAIKey = "sk-openai-real-key-canary"

// openAIModel is a stand-in for an OpenAI-compatible chat completions
// API: it records what it was sent and reports usage as OpenAI does,
// for a stream only when asked to (stream_options.include_usage).
type openAIModel struct {
	mu        sync.Mutex
	auth      []string
	paths     []string
	askedHow  []bool
	bodyFaith []bool
}

func (m *openAIModel) serve(t *testing.T) *url.URL {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model         string `json:"model"`
			Stream        bool   `json:"stream"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		m.mu.Lock()
		m.auth = append(m.auth, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
		m.paths = append(m.paths, r.URL.Path)
		m.askedHow = append(m.askedHow, req.StreamOptions.IncludeUsage)
		m.bodyFaith = append(m.bodyFaith, req.Model == "gpt-test")
		m.mu.Unlock()
		if req.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
			if req.StreamOptions.IncludeUsage {
				fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":300,\"completion_tokens\":50,\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n")
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"message":{"content":"done"}}],"usage":{"prompt_tokens":200,"completion_tokens":80}}`)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u
}

func callOpenAI(t *testing.T, gw http.Handler, key string, stream bool) (int, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":"gpt-test","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
	r := httptest.NewRequest(http.MethodPost, gateway.OpenAIPrefix+"v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+key)
	w := httptest.NewRecorder()
	gw.ServeHTTP(w, r)
	data, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(data)
}

// An agent CLI that speaks an OpenAI-compatible API reaches it through
// the gateway as the Messages API's do: the API sees the real key, never
// the sandbox's; the gateway counts what the API reports, asking a
// stream to report it; past the budget it refuses, in the API's format.
func TestOpenAICompatibleAPI(t *testing.T) {
	m := &openAIModel{}
	gw := &gateway.Gateway{OpenAI: &gateway.OpenAI{Upstream: m.serve(t), Key: realOpenAIKey}}
	key, err := gw.Open(gateway.Sandbox{ID: "sb", Limit: func() int64 { return 700 }})
	if err != nil {
		t.Fatal(err)
	}
	if code, body := callOpenAI(t, gw, key, false); code != http.StatusOK || !strings.Contains(body, "done") {
		t.Fatalf("JSON call: %d %s", code, body)
	}
	if code, body := callOpenAI(t, gw, key, true); code != http.StatusOK || !strings.Contains(body, `"usage"`) {
		t.Fatalf("stream: %d %s", code, body)
	}
	u, _ := gw.Usage(key)
	if u.Requests != 2 || u.InputTokens != 400 || u.CacheReadInputTokens != 100 || u.OutputTokens != 130 {
		t.Errorf("usage %+v; want 2 requests, 400 input (200 + 300 less 100 cached), 100 cache reads, 130 output", u)
	}
	m.mu.Lock()
	for i, a := range m.auth {
		if a != "Bearer "+realOpenAIKey+"|" || m.paths[i] != "/v1/chat/completions" || !m.bodyFaith[i] {
			t.Errorf("call %d reached the API as %q at %s (body kept: %v)", i, a, m.paths[i], m.bodyFaith[i])
		}
	}
	if len(m.askedHow) != 2 || !m.askedHow[1] {
		t.Errorf("the stream was not asked to report its usage: %v", m.askedHow)
	}
	m.mu.Unlock()

	// 630 of 700 used: one more call, then the budget is spent.
	callOpenAI(t, gw, key, false)
	code, body := callOpenAI(t, gw, key, false)
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"error"`) || !strings.Contains(body, "token budget is spent") {
		t.Errorf("past the budget: %d %s; want 429 in OpenAI's error format", code, body)
	}
	if code, body := callOpenAI(t, gw, "fleetlift-gw-"+strings.Repeat("0", 48), false); code != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
		t.Errorf("another key: %d %s", code, body)
	}
	m.mu.Lock()
	if n := len(m.auth); n != 3 {
		t.Errorf("the API was called %d times; want 3 (refused calls never reach it)", n)
	}
	m.mu.Unlock()
	other := &gateway.Gateway{}
	okey, _ := other.Open(gateway.Sandbox{ID: "sb2"})
	if code, body := callOpenAI(t, other, okey, false); code != http.StatusServiceUnavailable || !strings.Contains(body, "no key for an OpenAI-compatible API") {
		t.Errorf("a gateway without the API: %d %s", code, body)
	}
}
