package egress_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/fleetlift/fleetlift/internal/egress"
)

func TestParseRules(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "Registry.NPMjs.org", want: "registry.npmjs.org"},
		{in: "proxy.golang.org:443", want: "proxy.golang.org:443"},
		{in: "*.pythonhosted.org", want: "*.pythonhosted.org"},
		{in: "203.0.113.7:8443", want: "203.0.113.7:8443"},
		{in: "host:0", wantErr: "from 1 to 65535"},
		{in: "host:http", wantErr: "from 1 to 65535"},
		{in: "*", wantErr: "want a host name"},
		{in: "a.*.org", wantErr: "want a host name"},
		{in: "user@host", wantErr: "want a host name"},
		{in: "127.0.0.1", wantErr: "never reachable"},
		{in: "10.1.2.3:443", wantErr: "never reachable"},
		{in: "[::1]:80", wantErr: "never reachable"},
		{in: "169.254.169.254", wantErr: "never reachable"},
	} {
		rules, err := egress.ParseRules([]string{tc.in})
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseRules(%q) = %v, %v; want an error saying %q", tc.in, rules, err, tc.wantErr)
			}
		case err != nil || len(rules) != 1 || rules[0].String() != tc.want:
			t.Errorf("ParseRules(%q) = %v, %v; want %s", tc.in, rules, err, tc.want)
		}
	}
}

func TestForbidden(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		forbidden bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"::1", true}, {"0.0.0.0", true}, {"::", true},
		{"10.0.0.1", true}, {"172.16.5.4", true}, {"192.168.1.1", true}, {"fd00::1", true},
		{"100.64.0.1", true}, {"169.254.169.254", true}, {"fe80::1", true}, {"224.0.0.1", true},
		{"::ffff:127.0.0.1", true}, {"::ffff:10.0.0.1", true}, {"0.1.2.3", true},
		{"203.0.113.7", false}, {"2001:db8::1", false}, {"::ffff:203.0.113.7", false},
	} {
		if got := egress.Forbidden(netip.MustParseAddr(tc.addr)); got != tc.forbidden {
			t.Errorf("Forbidden(%s) = %v, want %v", tc.addr, got, tc.forbidden)
		}
	}
}

// names resolves every name in it to its address, and nothing else.
type names map[string]string

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// upstream is an HTTP server on this host's loopback that says which path
// it was asked for; its port.
func upstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "upstream %s", r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

// proxyFor serves p on loopback, as a jail's forward reaches it.
func proxyFor(t *testing.T, p *egress.Proxy) string {
	t.Helper()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// connect asks the proxy at proxy for a tunnel to target, sends a GET
// through it, and returns the CONNECT's status and what came back.
func connect(t *testing.T, proxy, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	fmt.Fprintf(c, "GET /through-the-tunnel HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return http.StatusOK, string(body)
}

// Only what the rules allow is reached, through a tunnel or as a plain
// http request; the rest is refused before anything is dialled.
func TestProxyReachesOnlyAllowedHosts(t *testing.T) {
	port := upstream(t)
	var refused []string
	p := &egress.Proxy{
		Rules:    mustRules(t, "registry.test:"+port, "*.mirror.test:"+port),
		Resolver: names{"registry.test": "127.0.0.1", "eu.mirror.test": "127.0.0.1", "other.test": "127.0.0.1"},
		// The upstream is on loopback, which Forbidden refuses: this test
		// checks the rules alone (TestProxyNeverReachesForbiddenAddresses
		// the addresses).
		Refuse:  func(a netip.Addr) bool { return !a.IsLoopback() },
		Refused: func(host string, port int, reason string) { refused = append(refused, host) },
	}
	proxy := proxyFor(t, p)

	for target, want := range map[string]string{
		"registry.test:" + port:  "upstream /through-the-tunnel",
		"eu.mirror.test:" + port: "upstream /through-the-tunnel",
	} {
		if code, body := connect(t, proxy, target); code != http.StatusOK || body != want {
			t.Errorf("CONNECT %s: %d %q; want 200 and %q", target, code, body, want)
		}
	}
	for _, target := range []string{"other.test:" + port, "mirror.test:" + port, "registry.test:443", "127.0.0.1:" + port} {
		if code, body := connect(t, proxy, target); code != http.StatusForbidden || !strings.Contains(body, "allowlist") {
			t.Errorf("CONNECT %s: %d %q; want 403 naming the allowlist", target, code, body)
		}
	}

	proxyURL, _ := url.Parse("http://" + proxy)
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}
	for u, want := range map[string]int{
		"http://registry.test:" + port + "/pkg": http.StatusOK,
		"http://other.test:" + port + "/pkg":    http.StatusForbidden,
	} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == http.StatusOK && string(body) != "upstream /pkg" {
			t.Errorf("GET %s through the proxy: %s %q; want %d", u, resp.Status, body, want)
		}
	}
	if len(refused) == 0 {
		t.Error("no refusal was reported")
	}
}

// An allowed name that resolves to loopback, a private range or a
// link-local address is still refused: the control plane and the
// cluster's services stay out of reach, whatever the allowlist says.
func TestProxyNeverReachesForbiddenAddresses(t *testing.T) {
	port := upstream(t)
	p := &egress.Proxy{
		Rules:    mustRules(t, "registry.test:"+port, "metadata.test:80", "cluster.test:443"),
		Resolver: names{"registry.test": "127.0.0.1", "metadata.test": "169.254.169.254", "cluster.test": "10.96.0.1"},
		// No dial may happen at all; a dialer that fails the test says so.
		Dialer: &net.Dialer{Control: func(_, address string, _ syscall.RawConn) error {
			t.Errorf("dialled %s", address)
			return fmt.Errorf("no")
		}},
	}
	proxy := proxyFor(t, p)
	for _, target := range []string{"registry.test:" + port, "metadata.test:80", "cluster.test:443"} {
		if code, body := connect(t, proxy, target); code != http.StatusForbidden || !strings.Contains(body, "may never reach") {
			t.Errorf("CONNECT %s: %d %q; want 403", target, code, body)
		}
	}
}

func mustRules(t *testing.T, entries ...string) []egress.Rule {
	t.Helper()
	rules, err := egress.ParseRules(entries)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}
