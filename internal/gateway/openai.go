package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// OpenAIPrefix is where the gateway serves agent CLIs that speak an
// OpenAI-compatible API (chat completions, responses): their base URL is
// the gateway's address + OpenAIPrefix + "v1", and the rest of the path
// goes to OpenAI.Upstream as it is.
const OpenAIPrefix = protocol.GatewayOpenAIPrefix

// OpenAI is an OpenAI-compatible model API the gateway serves under
// OpenAIPrefix, with the same sandbox keys, counts and budgets as the
// Messages API.
type OpenAI struct {
	// Upstream is the API's base URL without its version, such as
	// https://api.openai.com.
	Upstream *url.URL
	// Key is the API key, sent as a bearer token.
	Key string
}

// openAIError writes an error as OpenAI-compatible APIs do.
func openAIError(w http.ResponseWriter, code int, kind, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": message, "type": kind, "code": nil},
	})
}

// openAIRequest makes a streaming request's response report its usage
// (stream_options.include_usage), which OpenAI-compatible APIs send only
// when asked: without it a stream could not be counted, and the budget
// would not hold. Other bodies pass as they are.
func openAIRequest(r *http.Request) {
	if r.Body == nil || r.Method != http.MethodPost {
		return
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	r.Body.Close()
	if err == nil && len(data) <= maxBody {
		var body map[string]json.RawMessage
		if json.Unmarshal(data, &body) == nil && string(body["stream"]) == "true" {
			var opts map[string]json.RawMessage
			_ = json.Unmarshal(body["stream_options"], &opts)
			if opts == nil {
				opts = map[string]json.RawMessage{}
			}
			opts["include_usage"] = json.RawMessage("true")
			if o, err := json.Marshal(opts); err == nil {
				body["stream_options"] = o
				if b, err := json.Marshal(body); err == nil {
					data = b
				}
			}
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.ContentLength = int64(len(data))
	r.Header.Set("Content-Length", strconv.Itoa(len(data)))
}

func (g *Gateway) openAIProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Path = "/" + strings.TrimPrefix(pr.In.URL.Path, OpenAIPrefix)
			pr.Out.URL.RawPath = ""
			pr.SetURL(g.OpenAI.Upstream)
			pr.Out.Host = g.OpenAI.Upstream.Host
			pr.Out.Header.Del("X-Api-Key")
			pr.Out.Header.Set("Authorization", "Bearer "+g.OpenAI.Key)
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport: g.Transport,
		ModifyResponse: func(resp *http.Response) error {
			if b, ok := resp.Request.Context().Value(ctxKey{}).(*box); ok {
				stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
				resp.Body = &counter{ReadCloser: resp.Body, g: g, box: b, stream: stream, read: openAIUsage}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			openAIError(w, http.StatusBadGateway, "api_error", "fleetlift model gateway: the model API did not answer")
		},
	}
}

// serveOpenAI forwards a sandbox's OpenAI-compatible request, or refuses
// it as ServeHTTP does a Messages API one.
func (g *Gateway) serveOpenAI(w http.ResponseWriter, r *http.Request) {
	if g.OpenAI == nil || g.OpenAI.Upstream == nil || g.OpenAI.Key == "" {
		openAIError(w, http.StatusServiceUnavailable, "api_error", "fleetlift gateway: this worker holds no key for an OpenAI-compatible API")
		return
	}
	g.forward(w, r, openAIAPI, openAIRequest)
}

// openAIUsage reads the usage an OpenAI-compatible response reports: a
// JSON body's (chat completions and responses alike), or a stream's
// chunk that carries it (the last, with include_usage). Prompt tokens
// include the cached ones, which count as cache reads here.
func openAIUsage(data []byte, stream bool) messageUsage {
	type usage struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		InputTokens      int64 `json:"input_tokens"`
		OutputTokens     int64 `json:"output_tokens"`
		PromptDetails    struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		InputDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	}
	var last *usage
	model := ""
	read := func(b []byte) {
		var m struct {
			Model    string `json:"model"`
			Usage    *usage `json:"usage"`
			Response struct {
				Model string `json:"model"`
				Usage *usage `json:"usage"`
			} `json:"response"`
		}
		if json.Unmarshal(b, &m) != nil {
			return
		}
		if m.Model != "" {
			model = m.Model
		} else if m.Response.Model != "" {
			model = m.Response.Model
		}
		if m.Usage != nil {
			last = m.Usage
		} else if m.Response.Usage != nil {
			last = m.Response.Usage
		}
	}
	if stream {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), maxBody)
		for sc.Scan() {
			if payload, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok {
				read(bytes.TrimSpace(payload))
			}
		}
	} else {
		read(data)
	}
	if last == nil {
		return messageUsage{Model: model}
	}
	in, out := last.PromptTokens+last.InputTokens, last.CompletionTokens+last.OutputTokens
	cached := min(last.PromptDetails.CachedTokens+last.InputDetails.CachedTokens, in)
	return messageUsage{InputTokens: in - cached, OutputTokens: out, CacheReadInputTokens: cached, Model: model}
}
