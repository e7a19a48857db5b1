package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/egress"
	"github.com/fleetlift/fleetlift/internal/gateway"
)

// names resolves every name in it to its address, and nothing else.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// egressGateway serves a gateway whose egress proxy allows
// registry.test, which resolves to a server on loopback that says which
// path it was asked for; the gateway's address and that server's port.
func egressGateway(t *testing.T) (*gateway.Gateway, string, string) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s", r.URL.Path)
	}))
	t.Cleanup(up.Close)
	_, port, _ := net.SplitHostPort(up.Listener.Addr().String())
	rules, err := egress.ParseRules([]string{"registry.test:" + port})
	if err != nil {
		t.Fatal(err)
	}
	gw := &gateway.Gateway{Egress: &egress.Proxy{
		Rules:    rules,
		Resolver: names{"registry.test": "127.0.0.1", "other.test": "127.0.0.1"},
		// The upstream is on loopback, which the proxy never reaches
		// otherwise (package egress tests that).
		Refuse: func(a netip.Addr) bool { return !a.IsLoopback() },
	}}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return gw, srv.Listener.Addr().String(), port
}

// upgrade asks the gateway at addr for its egress proxy with key; the
// connection, its reader and the answer's status and body (when not
// 101).
func upgrade(t *testing.T, addr, key string) (net.Conn, *bufio.Reader, int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /fleetlift/egress HTTP/1.1\r\nHost: gateway\r\nConnection: Upgrade\r\nUpgrade: fleetlift-egress\r\nX-Api-Key: %s\r\n\r\n", key)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return c, br, resp.StatusCode, ""
	}
	body, _ := io.ReadAll(resp.Body)
	return c, br, resp.StatusCode, string(body)
}

// tunnel asks the proxy on c for a tunnel to target and sends a GET
// through it; the CONNECT's status and what came back.
func tunnel(t *testing.T, c net.Conn, br *bufio.Reader, target string) (int, string) {
	t.Helper()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	fmt.Fprintf(c, "GET /pkg HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return http.StatusOK, string(body)
}

// A sandbox reaches the egress proxy through the gateway with its key,
// and then the hosts the proxy allows alone; without a key the gateway
// gave, nothing reaches the proxy; a closed key ends the sandbox's
// connections through it.
func TestEgressThroughTheGateway(t *testing.T) {
	gw, addr, port := egressGateway(t)
	key, err := gw.Open(gateway.Sandbox{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}

	c, br, code, body := upgrade(t, addr, key)
	if code != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade with the sandbox's key: %d %s; want 101", code, body)
	}
	if code, body := tunnel(t, c, br, "registry.test:"+port); code != http.StatusOK || body != "upstream /pkg" {
		t.Errorf("CONNECT registry.test: %d %q; want the upstream's answer", code, body)
	}
	c, br, _, _ = upgrade(t, addr, key)
	if code, body := tunnel(t, c, br, "other.test:"+port); code != http.StatusForbidden || !strings.Contains(body, "allowlist") {
		t.Errorf("CONNECT other.test: %d %q; want 403 naming the allowlist", code, body)
	}
	// Plain http:// through the same connection, as HTTP_PROXY sends it.
	c, br, _, _ = upgrade(t, addr, key)
	fmt.Fprintf(c, "GET http://registry.test:%s/plain HTTP/1.1\r\nHost: registry.test:%s\r\n\r\n", port, port)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != "upstream /plain" {
		t.Errorf("GET http://registry.test through the proxy: %s %q", resp.Status, got)
	}

	for _, k := range []string{"", "fleetlift-gw-0000", realKey} {
		if _, _, code, body := upgrade(t, addr, k); code != http.StatusUnauthorized {
			t.Errorf("upgrade with key %q: %d %s; want 401", k, code, body)
		}
	}
	// The gateway's port is no proxy itself.
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if code, body := tunnel(t, raw, bufio.NewReader(raw), "registry.test:"+port); code == http.StatusOK {
		t.Errorf("a CONNECT straight to the gateway was tunnelled: %q", body)
	}

	// A connection open when the key is closed ends.
	c, br, _, _ = upgrade(t, addr, key)
	gw.Close(key)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the connection of a closed key stays open: %v", err)
	}
	if _, _, code, _ := upgrade(t, addr, key); code != http.StatusUnauthorized {
		t.Errorf("upgrade with a closed key: %d; want 401", code)
	}
}

// A gateway with no egress proxy says so.
func TestNoEgressProxy(t *testing.T) {
	gw := &gateway.Gateway{}
	key, _ := gw.Open(gateway.Sandbox{ID: "s1"})
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	if _, _, code, body := upgrade(t, srv.Listener.Addr().String(), key); code != http.StatusNotFound || !strings.Contains(body, "no egress proxy") {
		t.Errorf("upgrade: %d %s; want 404 saying there is no egress proxy", code, body)
	}
}
