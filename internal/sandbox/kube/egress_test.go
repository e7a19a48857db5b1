package kube_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/egress"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// names resolves every name in it to its address, and nothing else.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// registry is a stand-in package registry on this machine's loopback
// that says which path it was asked for; its port.
func registry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "registry %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// proxyAllowing is the worker's egress proxy with registry.test:port
// on its allowlist. Every name resolves to loopback, which the proxy
// never reaches otherwise: here the allowlist alone decides (package
// egress tests the addresses).
func proxyAllowing(t *testing.T, port string) *egress.Proxy {
	t.Helper()
	rules, err := egress.ParseRules([]string{"registry.test:" + port})
	if err != nil {
		t.Fatal(err)
	}
	return &egress.Proxy{
		Rules:    rules,
		Resolver: names{"registry.test": "127.0.0.1", "other.test": "127.0.0.1"},
		Refuse:   func(a netip.Addr) bool { return !a.IsLoopback() },
	}
}

// run provisions sandbox id of p, has its agent run m and returns the
// result once the agent ended.
func (j *jailed) run(t *testing.T, p sandbox.Provider, id string, m protocol.Manifest, env map[string]string) protocol.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	opts := j.options(t, id)
	maps.Copy(opts.Env, env)
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), id) })
	if _, err := p.Provision(ctx, opts); err != nil {
		t.Fatalf("Provision(%s): %v", id, err)
	}
	return j.drive(t, ctx, p, id, m)
}

// drive hands sandbox id's agent m and waits for it to end.
func (j *jailed) drive(t *testing.T, ctx context.Context, p sandbox.Provider, id string, m protocol.Manifest) protocol.Result {
	t.Helper()
	data, _ := json.Marshal(m)
	if err := p.CopyTo(ctx, id, strings.NewReader(string(data)), protocol.Dir+"/"+protocol.ManifestFile); err != nil {
		t.Fatal(err)
	}
	return j.await(t, ctx, p, id)
}

// await reads sandbox id's status until its agent ended, as the wait
// for the agent does, and then its result.
func (j *jailed) await(t *testing.T, ctx context.Context, p sandbox.Provider, id string) protocol.Result {
	t.Helper()
	read := func(name string, v any) bool {
		rc, err := p.CopyFrom(ctx, id, protocol.Dir+"/"+name)
		if errors.Is(err, sandbox.ErrNotFound) {
			return false
		}
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		defer rc.Close()
		return json.NewDecoder(rc).Decode(v) == nil
	}
	for {
		var st protocol.Status
		if read(protocol.StatusFile, &st) && st.Phase.Terminal() {
			var r protocol.Result
			if !read(protocol.ResultFile, &r) {
				t.Fatalf("phase %s without a result", st.Phase)
			}
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the agent did not end: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// work is a transform of a new repository of j that runs script.
func (j *jailed) work(t *testing.T, script string) protocol.Manifest {
	url, _ := j.repository(t)
	return protocol.Manifest{
		TaskID: "egress", Mode: protocol.ModeTransform, Title: "egress",
		Repositories:   []protocol.Repository{{Name: "svc", URL: url, Branch: "main"}},
		Execution:      protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", script}},
		TimeoutSeconds: 120,
		PullRequest:    &protocol.PullRequest{BranchPrefix: "fleetlift", Title: "egress"},
		GitConfig:      protocol.GitConfig{UserName: "Fleetlift Bot", UserEmail: "bot@example.com"},
		Forge:          "local",
	}
}

// added is what the change of r adds to path, "" when it has none.
func added(r protocol.Result, path string) string {
	var out []string
	for _, rr := range r.Repositories {
		for _, d := range rr.Diffs {
			if d.Path != path {
				continue
			}
			for _, l := range strings.Split(d.Diff, "\n") {
				if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") {
					out = append(out, l[1:])
				}
			}
		}
	}
	return strings.Join(out, "\n")
}

// The work in a kubernetes-jobs sandbox reaches the network through the
// worker's egress proxy alone, at the worker's gateway, with its
// sandbox's key: an allowed host, tunnelled (HTTPS's way) or as plain
// http://, answers; a host not allowed is refused by the proxy. A pod
// without a key the worker gave (anything else on the pod network)
// reaches nothing through the worker's port.
func TestEgressThroughTheWorker(t *testing.T) {
	j := newJailed(t)
	port := registry(t)
	gw := serveGateway(t, &gateway.Gateway{Egress: proxyAllowing(t, port)})
	p := j.provider(gw)

	m := j.work(t, `
curl -sS --max-time 30 -p http://registry.test:`+port+`/tunnelled > TUNNELLED 2>&1; echo " exit $?" >> TUNNELLED
curl -sS --max-time 30 http://registry.test:`+port+`/plain > PLAIN 2>&1; echo " exit $?" >> PLAIN
curl -sS --max-time 30 -p http://other.test:`+port+`/x > OTHER 2>&1; echo " exit $?" >> OTHER
curl -sS --max-time 30 --noproxy '*' http://127.0.0.1:`+port+`/direct > DIRECT 2>&1; echo " exit $?" >> DIRECT`)
	r := j.run(t, p, "egress-worker", m, nil)
	said := func(name string) string { return strings.ReplaceAll(added(r, name), "\n", "") }
	if got := said("TUNNELLED"); got != "registry /tunnelled exit 0" {
		t.Errorf("a tunnel to the allowed host: %q; want its answer (phase %s, %s)", got, r.Status, r.Error)
	}
	if got := said("PLAIN"); got != "registry /plain exit 0" {
		t.Errorf("plain http:// to the allowed host: %q; want its answer", got)
	}
	if got := said("OTHER"); !strings.Contains(got, "response 403") || strings.Contains(got, "registry /x") {
		t.Errorf("a host not allowed: %q; want the proxy's 403", got)
	}
	if got := said("DIRECT"); got == "" || strings.Contains(got, "registry /direct") || strings.HasSuffix(got, " exit 0") {
		t.Errorf("the work reached the registry without the proxy: %q", got)
	}

	// From the pod network, without the sandbox's key.
	addr := strings.TrimPrefix(gw.URL, "http://")
	for _, key := range []string{"", "fleetlift-gw-000000000000000000000000000000000000000000000000"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /fleetlift/egress HTTP/1.1\r\nHost: gw\r\nConnection: Upgrade\r\nUpgrade: fleetlift-egress\r\nX-Api-Key: %s\r\n\r\n", key)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the egress proxy with key %q: %s; want 401", key, resp.Status)
		}
		c.Close()
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT registry.test:%s HTTP/1.1\r\nHost: registry.test:%s\r\n\r\n", port, port)
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Errorf("the worker's port tunnelled a CONNECT without a key: %q", body)
	}
}
