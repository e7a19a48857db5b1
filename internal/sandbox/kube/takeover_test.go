package kube_test

import (
	"context"
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

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/controller/controllertest"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// A worker that takes over a sandbox another worker started, once that
// one is gone, moves the sandbox to its own gateway: the sandbox gets a
// new key, which this worker's gateway alone takes (the old one is
// refused), and the agent's relay reaches this worker from then on: the
// agent CLI's model calls and the work's egress go through it.
func TestTakeOverMovesTheGateway(t *testing.T) {
	j := newJailed(t)
	upstream, keys := countingModel(t)
	port := registry(t)
	newGateway := func() *gateway.Gateway {
		return &gateway.Gateway{Upstream: upstream, Key: realModelKey, Egress: proxyAllowing(t, port)}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	read := protocolReader(t, ctx)

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
	for _, k := range keys() {
		if k != realModelKey {
			t.Errorf("the model was called with %q; want the real key, added by a gateway", k)
		}
	}
}

// realModelKey is the model's key, which the workers' gateways hold.
const realModelKey = "sk-ant-real-key-canary-takeover"

// countingModel serves the model's Messages API, answering every call;
// keys are the API keys it was called with.
func countingModel(t *testing.T) (upstream *url.URL, keys func() []string) {
	var mu sync.Mutex
	var got []string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":200,"output_tokens":80}}`)
	}))
	t.Cleanup(model.Close)
	upstream, _ = url.Parse(model.URL)
	return upstream, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// protocolReader reads a sandbox's protocol file name through p.
func protocolReader(t *testing.T, ctx context.Context) func(p sandbox.Provider, id, name string) string {
	return func(p sandbox.Provider, id, name string) string {
		t.Helper()
		rc, err := p.CopyFrom(ctx, id, protocol.Dir+"/"+name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		defer rc.Close()
		data, _ := io.ReadAll(rc)
		return strings.TrimSpace(string(data))
	}
}

// A worker that dies while its sandbox's agent runs leaves the task's
// next steps to another worker, which does not provision the sandbox
// again: the first step it takes on it (the wait's read of status.json)
// moves the sandbox to its gateway. The agent CLI, started under the
// dead worker with its key in the environment, gets its egress and model
// calls through the new worker's gateway from then on: the agent's relay
// puts the sandbox's new key in each request. The old key is refused
// there.
func TestNextStepMovesTheGateway(t *testing.T) {
	j := newJailed(t)
	upstream, keys := countingModel(t)
	port := registry(t)
	newGateway := func() *gateway.Gateway {
		return &gateway.Gateway{Upstream: upstream, Key: realModelKey, Egress: proxyAllowing(t, port)}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	read := protocolReader(t, ctx)

	// An agent CLI that waits until it is told to go on, then tries the
	// egress proxy until it gets through (at most a minute), then calls
	// the model twice, each of which must get through.
	cli, _ := json.Marshal([]string{"sh", "-c", `while [ ! -e "$FLEETLIFT_WORKSPACE/go-on" ]; do sleep 0.05; done
n=0
until curl -sS --max-time 10 -p http://registry.test:` + port + `/after > EGRESS 2>&1; do
  n=$((n+1)); [ "$n" -lt 600 ] || { echo " gave up" >> EGRESS; exit 1; }; sleep 0.1
done
` + sandboxtest.CurlModelCLI[2]})
	opts := j.options(t, "next-step")
	opts.Env["FLEETLIFT_AGENT_CLI"], opts.Env["MODEL_CALLS"] = string(cli), "2"

	// Worker A provisions the sandbox and hands its agent the manifest;
	// then its gateway is gone, and the agent CLI goes on.
	gwA, stopA := serveGatewayUntil(t, newGateway())
	a := j.provider(gwA)
	t.Cleanup(func() { _ = a.Cleanup(context.Background(), opts.ID) })
	if _, err := a.Provision(ctx, opts); err != nil {
		t.Fatal(err)
	}
	keyA := read(a, opts.ID, protocol.GatewayKeyFile)
	m := j.work(t, "")
	m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "call the model"}
	m.Limits = protocol.Limits{MaxTokens: 100000, MaxIterations: 1}
	data, _ := json.Marshal(m)
	if err := a.CopyTo(ctx, opts.ID, strings.NewReader(string(data)), protocol.Dir+"/"+protocol.ManifestFile); err != nil {
		t.Fatal(err)
	}
	stopA()
	if err := a.CopyTo(ctx, opts.ID, strings.NewReader(""), "go-on"); err != nil {
		t.Fatal(err)
	}

	// Worker B takes the task's next steps: it waits for the agent and
	// reads its result, and never provisions.
	gwB := serveGateway(t, newGateway())
	b := j.provider(gwB)
	r := j.await(t, ctx, b, opts.ID)
	if r.Status != protocol.PhaseComplete || !strings.Contains(added(r, "MODEL_CALL.txt"), "call 1: status 200") {
		t.Fatalf("the agent CLI once worker A was gone: phase %s (%s); it saw:\n%s\nits egress: %s",
			r.Status, r.Error, added(r, "MODEL_CALL.txt"), added(r, "EGRESS"))
	}
	if got := strings.ReplaceAll(added(r, "EGRESS"), "\n", ""); got != "registry /after" {
		t.Errorf("the work's egress through worker B: %q; want the allowed host's answer", got)
	}
	if got := read(b, opts.ID, protocol.GatewayURLFile); got != gwB.URL {
		t.Errorf("gateway-url = %q; want worker B's %s", got, gwB.URL)
	}
	keyB := read(b, opts.ID, protocol.GatewayKeyFile)
	if keyB == keyA {
		t.Fatal("the sandbox kept worker A's key")
	}
	if u, ok := gwB.Gateway.Usage(keyB); !ok || u.Requests != 2 {
		t.Errorf("worker B's gateway counted %+v for the sandbox; want its 2 calls", u)
	}
	req, _ := http.NewRequest(http.MethodPost, gwB.URL+"/v1/messages", strings.NewReader(`{}`))
	req.Header.Set("X-Api-Key", keyA)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a model call with worker A's key at worker B: %v %v; want 401", resp.Status, err)
	}
	if got := keys(); len(got) != 2 {
		t.Errorf("the model was called %d times; want the agent CLI's 2", len(got))
	}
	for _, k := range keys() {
		if k != realModelKey {
			t.Errorf("the model was called with %q; want the real key, added by a gateway", k)
		}
	}
}

// The kubernetes provider moves a sandbox to the gateway of the worker
// that takes its next step, too, once: that step reads the new key,
// which that worker's gateway alone takes, and later steps keep it.
func TestRequestsNextStepMovesTheGateway(t *testing.T) {
	c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true})
	worker := c.Worker(t)
	newProvider := func(url string) (*kube.Requests, *gateway.Gateway) {
		gw := &gateway.Gateway{}
		return &kube.Requests{Client: worker, Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs,
			Gateway: &kube.Gateway{Gateway: gw, URL: url}}, gw
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	read := protocolReader(t, ctx)

	a, _ := newProvider("http://10.1.2.3:8090")
	sb, err := a.Provision(ctx, sandbox.ProvisionOptions{ID: "next-step-req", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Cleanup(context.Background(), sb.ID) })
	keyA := read(a, sb.ID, protocol.GatewayKeyFile)

	b, gwB := newProvider("http://10.1.2.4:8090")
	keyB := read(b, sb.ID, protocol.GatewayKeyFile)
	if keyB == keyA {
		t.Fatal("the sandbox kept worker A's key")
	}
	if _, ok := gwB.Usage(keyB); !ok {
		t.Error("worker B's gateway does not take the sandbox's new key")
	}
	if _, ok := gwB.Usage(keyA); ok {
		t.Error("worker B's gateway takes worker A's key")
	}
	if got := read(b, sb.ID, protocol.GatewayURLFile); got != "http://10.1.2.4:8090" {
		t.Errorf("gateway-url = %q; want worker B's address", got)
	}
	if again := read(b, sb.ID, protocol.GatewayKeyFile); again != keyB {
		t.Errorf("a later step at worker B gave another key")
	}
}
