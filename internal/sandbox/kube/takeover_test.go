package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// A worker that takes over a sandbox another worker started, once that
// one is gone, moves the sandbox to its own gateway: the sandbox gets a
// new key, which this worker's gateway alone takes (the old one is
// refused), and the agent's relay reaches this worker from then on: the
// agent CLI's model calls and the work's egress go through it.
func TestTakeOverMovesTheGateway(t *testing.T) {
	j := newJailed(t)
	const realKey = "sk-ant-real-key-canary-takeover"
	var mu sync.Mutex
	var keys []string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":200,"output_tokens":80}}`)
	}))
	t.Cleanup(model.Close)
	upstream, _ := url.Parse(model.URL)
	port := registry(t)
	newGateway := func() *gateway.Gateway {
		return &gateway.Gateway{Upstream: upstream, Key: realKey, Egress: proxyAllowing(t, port)}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	read := func(p sandbox.Provider, id, name string) string {
		rc, err := p.CopyFrom(ctx, id, protocol.Dir+"/"+name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		defer rc.Close()
		data, _ := io.ReadAll(rc)
		return strings.TrimSpace(string(data))
	}

	// Worker A starts the sandbox, then is gone.
	gwA, stopA := serveGatewayUntil(t, newGateway())
	a := j.provider(gwA)
	// An agent CLI that reaches a host through the egress proxy, then
	// calls the model.
	cli, _ := json.Marshal([]string{"sh", "-c", `curl -sS --max-time 30 -p http://registry.test:` + port + `/after > EGRESS 2>&1; echo " exit $?" >> EGRESS
` + sandboxtest.CurlModelCLI[2]})
	opts := j.options(t, "taken-over")
	opts.Env["FLEETLIFT_AGENT_CLI"], opts.Env["MODEL_CALLS"] = string(cli), "2"
	t.Cleanup(func() { _ = a.Cleanup(context.Background(), opts.ID) })
	if _, err := a.Provision(ctx, opts); err != nil {
		t.Fatal(err)
	}
	keyA := read(a, opts.ID, protocol.GatewayKeyFile)
	stopA()

	// Worker B provisions it again (the step retried there), and takes
	// it over.
	gwB := serveGateway(t, newGateway())
	b := j.provider(gwB)
	if _, err := b.Provision(ctx, opts); err != nil {
		t.Fatal(err)
	}
	keyB := read(b, opts.ID, protocol.GatewayKeyFile)
	if keyB == keyA {
		t.Fatal("the worker that took the sandbox over kept the old key")
	}
	if got := read(b, opts.ID, protocol.GatewayURLFile); got != gwB.URL {
		t.Errorf("gateway-url = %q; want worker B's %s", got, gwB.URL)
	}
	if _, ok := gwB.Gateway.Usage(keyA); ok {
		t.Error("worker B's gateway takes worker A's key")
	}
	req, _ := http.NewRequest(http.MethodPost, gwB.URL+"/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", keyA)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a model call with worker A's key at worker B: %v %v; want 401", resp.Status, err)
	}

	m := j.work(t, "")
	m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "call the model"}
	m.Limits = protocol.Limits{MaxTokens: 100000, MaxIterations: 1}
	r := j.drive(t, ctx, b, opts.ID, m)
	if r.Status != protocol.PhaseComplete || !strings.Contains(added(r, "MODEL_CALL.txt"), "call 1: status 200") {
		t.Fatalf("the agent CLI through worker B's gateway: phase %s (%s); it saw:\n%s", r.Status, r.Error, added(r, "MODEL_CALL.txt"))
	}
	if got := strings.ReplaceAll(added(r, "EGRESS"), "\n", ""); got != "registry /after exit 0" {
		t.Errorf("the work's egress through worker B: %q; want the allowed host's answer", got)
	}
	if u, ok := gwB.Gateway.Usage(keyB); !ok || u.Requests != 2 {
		t.Errorf("worker B's gateway counted %+v for the sandbox; want its 2 calls", u)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, k := range keys {
		if k != realKey {
			t.Errorf("the model was called with %q; want the real key, added by a gateway", k)
		}
	}
}
