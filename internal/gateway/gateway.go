package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// Usage is what one sandbox's model calls used, as the model counted it,
// and why the gateway refused a request, if it did: the protocol's
// record of it, which the agent puts into the task's result.
type Usage = protocol.ModelUsage

// add adds what one response reported to u.
func add(u *Usage, m messageUsage) {
	u.InputTokens += m.InputTokens
	u.OutputTokens += m.OutputTokens
	u.CacheCreationInputTokens += m.CacheCreationInputTokens
	u.CacheReadInputTokens += m.CacheReadInputTokens
}

// Sandbox is what the gateway needs of one sandbox it serves.
type Sandbox struct {
	// ID names it in errors.
	ID string
	// Limit is its budget of tokens (Usage.Tokens), read before each
	// request; zero or less: none. A function, since a sandbox's task
	// arrives after it was made.
	Limit func() int64
	// CostLimit is its budget in US dollars (Usage.CostUSD), read as
	// Limit is; zero or less: none but the gateway's MaxCostPerTask.
	CostLimit func() float64
	// Before, when set, is what the task's earlier sandboxes (lost to
	// crashes) used, read as Limit is: Limit and CostLimit bound it and
	// this sandbox's calls together.
	Before func() Usage
	// Owner is the campaign (or task) and team its calls are counted
	// under in Gateway.Observe; nil: none.
	Owner func() (campaign, team string)
	// Save, when set, is told the usage after changes: in order, off the
	// requests' path (a sandbox whose files are written through its
	// provider's API would slow every call), the latest usage each time
	// (one save may stand for several changes); a refusal is saved before
	// its response goes.
	Save func(Usage)
	// Repositories, when set, are the repositories it may read through
	// GitReads, by name: its task's. A function, as Limit is.
	Repositories func() map[string]Repository
}

// ProtocolSandbox is the Sandbox of sandbox id, whose protocol directory
// its provider reads and writes through read and write (names relative to
// protocol.Dir): once the worker wrote the manifest there, its budget is
// the manifest's limits.max_tokens and the repositories it may read are
// the manifest's (the transformation repository and targets included);
// what it used goes to protocol.UsageFile beside it.
func ProtocolSandbox(id string, read func(name string) ([]byte, error), write func(name string, data []byte) error) Sandbox {
	manifest := manifestOf(read)
	return Sandbox{
		ID: id,
		Limit: func() int64 {
			m := manifest()
			if m == nil || m.Limits.MaxTokens <= 0 {
				return 0
			}
			return int64(m.Limits.MaxTokens)
		},
		CostLimit: func() float64 {
			if m := manifest(); m != nil {
				return m.Limits.MaxCostUSD
			}
			return 0
		},
		Before: func() Usage {
			if m := manifest(); m != nil && m.Limits.Spent != nil {
				return *m.Limits.Spent
			}
			return Usage{}
		},
		Owner: func() (string, string) {
			if m := manifest(); m != nil {
				return m.TaskID, m.Team
			}
			return "", ""
		},
		Repositories: func() map[string]Repository {
			m := manifest()
			if m == nil {
				return nil
			}
			repos := append(append([]protocol.Repository(nil), m.Repositories...), m.Targets...)
			if m.Transformation != nil {
				repos = append(repos, *m.Transformation)
			}
			out := make(map[string]Repository, len(repos))
			for _, r := range repos {
				out[r.Name] = Repository{URL: r.URL, Branch: r.Branch, Depth: m.GitConfig.CloneDepth}
			}
			return out
		},
		Save: func(u Usage) {
			if data, err := json.Marshal(u); err == nil {
				_ = write(protocol.UsageFile, data)
			}
		},
	}
}

// manifestOf reads the manifest through read until it is there, then
// keeps it: the worker writes it once, after the sandbox was made.
func manifestOf(read func(name string) ([]byte, error)) func() *protocol.Manifest {
	var kept atomic.Pointer[protocol.Manifest]
	return func() *protocol.Manifest {
		if m := kept.Load(); m != nil {
			return m
		}
		data, err := read(protocol.ManifestFile)
		if err != nil {
			return nil
		}
		var m protocol.Manifest
		if json.Unmarshal(data, &m) != nil {
			return nil
		}
		kept.Store(&m)
		return &m
	}
}

// Gateway forwards model calls from sandboxes, adding the key and
// counting tokens; see the package documentation. Serve it where the
// sandboxes' jails forward their model port to.
type Gateway struct {
	// Upstream is the model API's base URL, such as
	// https://api.anthropic.com; nil: no model is served.
	Upstream *url.URL
	// Key is the API key, sent as x-api-key.
	Key string
	// OpenAI, when set, is an OpenAI-compatible API served under
	// OpenAIPrefix, for agent CLIs that speak that instead.
	OpenAI *OpenAI
	// Git, when set, serves the sandboxes' reads of their repositories
	// under GitPrefix (see GitReads).
	Git *GitReads
	// Egress, when set, is the egress proxy (package egress) sandboxes
	// that reach the gateway over the network reach with their key, at
	// protocol.GatewayEgressPath (see serveEgress).
	Egress http.Handler
	// Transport makes the upstream requests; nil: http.DefaultTransport.
	Transport http.RoundTripper
	// Prices, when set, prices each call by the model that answered it
	// (Usage.CostUSD).
	Prices Prices
	// MaxCostPerTask, when above zero, bounds every sandbox's cost in US
	// dollars: a task's limits.max_cost_per_task can ask for less, never
	// more. A bound on cost needs Prices, and a price for each model
	// that answers; a call it cannot price stops the sandbox's calls.
	MaxCostPerTask float64
	// TokensPerMinute, when above zero, holds model calls while the
	// tokens counted in the last minute, every sandbox's together, reach
	// it: the pace a model account's rate limit asks for.
	TokensPerMinute int64
	// pace, when set, is the Pace TokensPerMinute is kept with, shared:
	// the model account's budget every worker using it asks
	// (SharePace); own, this gateway's count of the last minute,
	// otherwise.
	pace atomic.Pointer[paceHolder]
	// Observe, when set, is told what each response used and cost, with
	// the model that answered and the sandbox's owner (metrics).
	Observe func(campaign, team, model string, used Usage)

	own    pacer
	mu     sync.Mutex
	boxes  map[string]*box
	proxy  *httputil.ReverseProxy
	openai *httputil.ReverseProxy
	once   sync.Once
}

// box is one open sandbox.
type box struct {
	Sandbox
	// ctx ends when the box is closed, and with it reads of its
	// repositories.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	usage  Usage
	copies map[string]*copyOf // GitReads' copies, by repository name
	// changed wakes the saver, which saves usage as it is then (see
	// Sandbox.Save); saving serializes the saves.
	changed chan struct{}
	saving  sync.Mutex
}

func newBox(sb Sandbox, used Usage) *box {
	ctx, cancel := context.WithCancel(context.Background())
	b := &box{Sandbox: sb, ctx: ctx, cancel: cancel, usage: used, changed: make(chan struct{}, 1)}
	if sb.Save != nil {
		go b.saver()
	}
	return b
}

// saver saves the usage whenever it changed, until the box is closed.
func (b *box) saver() {
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.changed:
			b.save()
		}
	}
}

// save has Save save the usage as it is now.
func (b *box) save() {
	b.saving.Lock()
	defer b.saving.Unlock()
	b.mu.Lock()
	u := b.usage
	b.mu.Unlock()
	b.Save(u)
}

// changedLocked wakes the saver.
func (b *box) changedLocked() {
	if b.Save == nil {
		return
	}
	select {
	case b.changed <- struct{}{}:
	default: // a save is due already; it will see this change
	}
}

// close stops reads of b's repositories and removes its copies.
func (b *box) close() {
	b.cancel()
	b.mu.Lock()
	copies := b.copies
	b.copies = nil
	b.mu.Unlock()
	for _, c := range copies {
		c.once.Do(func() {})
		if c.scratch != nil {
			c.scratch.Close()
		}
	}
}

// APIs are the model APIs the gateway serves: the Messages API when it
// holds its key, an OpenAI-compatible one when it has one. The agent
// points its CLI at the gateway for these alone.
func (g *Gateway) APIs() []string {
	var apis []string
	if g.Upstream != nil && g.Key != "" {
		apis = append(apis, protocol.GatewayAnthropic)
	}
	if g.OpenAI != nil && g.OpenAI.Upstream != nil && g.OpenAI.Key != "" {
		apis = append(apis, protocol.GatewayOpenAI)
	}
	return apis
}

// Open lets sb call the model and returns the key it calls with.
func (g *Gateway) Open(sb Sandbox) (string, error) {
	return g.OpenFrom(sb, Usage{})
}

// OpenFrom is Open for a sandbox that used used already (through another
// gateway, whose key this one does not take): its budget counts on.
func (g *Gateway) OpenFrom(sb Sandbox, used Usage) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("model gateway: %w", err)
	}
	key := keyPrefix + hex.EncodeToString(b)
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.boxes == nil {
		g.boxes = map[string]*box{}
	}
	g.boxes[key] = newBox(sb, used)
	return key, nil
}

// keyPrefix starts every key Open gives.
const keyPrefix = "fleetlift-gw-"

// Adopt lets sb call the model again with the key an earlier gateway gave
// it (a worker started again on its sandboxes), counting on from used.
func (g *Gateway) Adopt(key string, sb Sandbox, used Usage) error {
	if !strings.HasPrefix(key, keyPrefix) || len(key) != len(keyPrefix)+48 {
		return fmt.Errorf("model gateway: %s: not a key this gateway gives", sb.ID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.boxes == nil {
		g.boxes = map[string]*box{}
	}
	if old := g.boxes[key]; old != nil {
		go old.close()
	}
	g.boxes[key] = newBox(sb, used)
	return nil
}

// Close ends key's calls; it returns the sandbox's usage.
func (g *Gateway) Close(key string) Usage {
	g.mu.Lock()
	b, ok := g.boxes[key]
	delete(g.boxes, key)
	g.mu.Unlock()
	if !ok {
		return Usage{}
	}
	b.close()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usage
}

// UsageOf is the usage so far of sandbox id, when this gateway serves
// it.
func (g *Gateway) UsageOf(id string) (Usage, bool) {
	g.mu.Lock()
	var found *box
	for _, b := range g.boxes {
		if b.ID == id {
			found = b
		}
	}
	g.mu.Unlock()
	if found == nil {
		return Usage{}, false
	}
	found.mu.Lock()
	defer found.mu.Unlock()
	return found.usage, true
}

// Usage is key's sandbox's usage so far.
func (g *Gateway) Usage(key string) (Usage, bool) {
	g.mu.Lock()
	b, ok := g.boxes[key]
	g.mu.Unlock()
	if !ok {
		return Usage{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.usage, true
}

// sandboxKey is the key a request carries: x-api-key, or a bearer token.
func sandboxKey(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return v
	}
	return ""
}

// apiError writes an error as the Messages API does.
func apiError(w http.ResponseWriter, code int, kind, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":  "error",
		"error": map[string]string{"type": kind, "message": message},
	})
}

// ctxKey carries a request's *box to its response.
type ctxKey struct{}

// ServeHTTP forwards a sandbox's request upstream with the real key, or
// refuses it: an unknown key (401), a spent budget (429).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, GitPrefix):
		g.serveGit(w, r)
		return
	case strings.HasPrefix(r.URL.Path, OpenAIPrefix):
		g.serveOpenAI(w, r)
		return
	case r.URL.Path == protocol.GatewayUsagePath:
		g.serveUsage(w, r)
		return
	case r.URL.Path == protocol.GatewayEgressPath:
		g.serveEgress(w, r)
		return
	}
	if g.Upstream == nil || g.Key == "" {
		apiError(w, http.StatusServiceUnavailable, "api_error", "fleetlift gateway: this worker holds no model key")
		return
	}
	g.forward(w, r, messagesAPI, nil)
}

// serveUsage answers a sandbox's GET of protocol.GatewayUsagePath with
// its usage so far.
func (g *Gateway) serveUsage(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		http.Error(w, "GET only", http.StatusMethodNotAllowed)
		return
	}
	u, ok := g.Usage(sandboxKey(r))
	if !ok {
		http.Error(w, "fleetlift gateway: not a key of a sandbox this gateway serves", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(u)
}

// modelAPI is how a model API refuses a request: its error body, and
// its error kinds for a key it does not know and a spent budget.
type modelAPI struct {
	fail          func(w http.ResponseWriter, code int, kind, message string)
	denied, spent string
	openAI        bool
}

var (
	messagesAPI = modelAPI{fail: apiError, denied: "authentication_error", spent: "rate_limit_error"}
	openAIAPI   = modelAPI{fail: openAIError, denied: "invalid_request_error", spent: "insufficient_quota", openAI: true}
)

// forward admits r (its sandbox's key, within its budget), holds it while
// the worker's tokens per minute are spent, has prepare change it when
// set, and sends it to api's upstream.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, api modelAPI, prepare func(*http.Request)) {
	if g.TokensPerMinute > 0 && g.known(r) {
		if err := g.WaitForTokens(r.Context()); err != nil {
			return
		}
	}
	b, msg, code := g.admit(r)
	if b == nil {
		kind := api.denied
		if code == http.StatusTooManyRequests {
			kind = api.spent
		}
		api.fail(w, code, kind, msg)
		return
	}
	if prepare != nil {
		prepare(r)
	}
	g.once.Do(g.init)
	proxy := g.proxy
	if api.openAI {
		proxy = g.openai
	}
	proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, b)))
}

// known reports whether r carries the key of a sandbox the gateway
// serves.
func (g *Gateway) known(r *http.Request) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.boxes[sandboxKey(r)] != nil
}

// admit is the box of r's key, its request counted, or why there is none
// to serve it for: an unknown key (401), a spent budget (429).
func (g *Gateway) admit(r *http.Request) (*box, string, int) {
	g.mu.Lock()
	b := g.boxes[sandboxKey(r)]
	g.mu.Unlock()
	if b == nil {
		return nil, "fleetlift model gateway: not a key of a sandbox this gateway serves", http.StatusUnauthorized
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if msg := g.spent(b); msg != "" {
		first := b.usage.Refused == ""
		b.usage.Refused = msg
		if first && b.Save != nil {
			// The agent reads why once its CLI failed on this answer.
			b.mu.Unlock()
			b.save()
			b.mu.Lock()
		}
		return nil, msg, http.StatusTooManyRequests
	}
	b.usage.Requests++
	b.changedLocked()
	return b, "", 0
}

func (g *Gateway) init() {
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(g.Upstream)
			pr.Out.Host = g.Upstream.Host
			// The sandbox's key goes nowhere; the real one goes only
			// upstream.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("X-Api-Key")
			pr.Out.Header.Set("X-Api-Key", g.Key)
			// Usage is read from plain bodies.
			pr.Out.Header.Del("Accept-Encoding")
		},
		Transport: g.Transport,
		ModifyResponse: func(resp *http.Response) error {
			b, ok := resp.Request.Context().Value(ctxKey{}).(*box)
			if !ok {
				return nil
			}
			stream := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
			resp.Body = &counter{ReadCloser: resp.Body, g: g, box: b, stream: stream}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			apiError(w, http.StatusBadGateway, "api_error", "fleetlift model gateway: the model API did not answer")
		},
	}
	if g.OpenAI != nil {
		g.openai = g.openAIProxy()
	}
}

// messageUsage is the usage object of a Messages API response or event.
type messageUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	// Model is the model that answered, from the response.
	Model string `json:"-"`
}

// counter passes a response body through and counts the usage it
// reports: a JSON message's usage once the body is read, or a stream's
// message_start usage and each message_delta's output tokens (which the
// API reports as running totals: the last one counts).
type counter struct {
	io.ReadCloser
	g      *Gateway
	box    *box
	stream bool
	buf    bytes.Buffer
	done   bool
	// read reads the usage of another API's response (openAIUsage);
	// nil: the Messages API's.
	read func(data []byte, stream bool) messageUsage
}

// maxBody is how much of a JSON body the counter keeps to read its usage.
const maxBody = 8 << 20

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if n > 0 && c.buf.Len() < maxBody {
		c.buf.Write(p[:n])
	}
	if err != nil {
		c.count()
	}
	return n, err
}

func (c *counter) Close() error {
	c.count()
	return c.ReadCloser.Close()
}

func (c *counter) count() {
	if c.done {
		return
	}
	c.done = true
	var u messageUsage
	if c.read != nil {
		u = c.read(c.buf.Bytes(), c.stream)
	} else if c.stream {
		u = streamUsage(c.buf.Bytes())
	} else {
		var m struct {
			Model string       `json:"model"`
			Usage messageUsage `json:"usage"`
		}
		if json.Unmarshal(c.buf.Bytes(), &m) != nil {
			return
		}
		u = m.Usage
		u.Model = m.Model
	}
	var delta Usage
	add(&delta, u)
	price(&delta, c.g.Prices, u)
	c.g.pacer().Spent(delta.Tokens())
	c.box.mu.Lock()
	c.box.usage = *c.box.usage.Plus(&delta)
	c.box.changedLocked()
	c.box.mu.Unlock()
	if c.g.Observe != nil {
		var campaign, team string
		if c.box.Owner != nil {
			campaign, team = c.box.Owner()
		}
		c.g.Observe(campaign, team, u.Model, delta)
	}
}

// streamUsage reads the usage of a Messages API event stream.
func streamUsage(data []byte) messageUsage {
	var u messageUsage
	var lastOutput int64
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxBody)
	for sc.Scan() {
		payload, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
		if !ok {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Model string       `json:"model"`
				Usage messageUsage `json:"usage"`
			} `json:"message"`
			Usage *messageUsage `json:"usage"`
		}
		if json.Unmarshal(bytes.TrimSpace(payload), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "message_start":
			u = ev.Message.Usage
			u.Model = ev.Message.Model
			lastOutput = u.OutputTokens
		case "message_delta":
			if ev.Usage != nil {
				lastOutput = ev.Usage.OutputTokens
				if ev.Usage.InputTokens > 0 {
					u.InputTokens = ev.Usage.InputTokens
				}
			}
		}
	}
	u.OutputTokens = lastOutput
	return u
}
