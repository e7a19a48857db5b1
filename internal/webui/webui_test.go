package webui_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/webui"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestServesTheUI: the UI's page and its health check answer on the
// port; the Temporal frontend is asked only when the page asks for data.
func TestServesTheUI(t *testing.T) {
	s, err := webui.Start(webui.Options{Listen: freeAddr(t), Temporal: freeAddr(t), Namespace: "fleetlift"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for path, want := range map[string]string{"/": "<html", "/healthz": "OK"} {
		resp, err := http.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(strings.ToLower(string(body)), strings.ToLower(want)) {
			t.Errorf("GET %s: %s, %.200q; want 200 with %q", path, resp.Status, body, want)
		}
	}
}

// TestTakenPort: a port something else holds is an error, not the end of
// the process.
func TestTakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := webui.Start(webui.Options{Listen: ln.Addr().String(), Temporal: freeAddr(t)}); err == nil {
		t.Fatal("started on a taken port")
	}
}

// TestReadOnly: the UI refuses writes (terminating a run, starting one)
// before anything reaches Temporal, even from a client that skips its
// CSRF check with an Authorization header; reads go through.
func TestReadOnly(t *testing.T) {
	s, err := webui.Start(webui.Options{Listen: freeAddr(t), Temporal: freeAddr(t), Namespace: "fleetlift"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	for _, path := range []string{
		"/api/v1/namespaces/fleetlift/workflows/campaign%2Fx/terminate",
		"/api/v1/namespaces/fleetlift/workflows/campaign%2Fx",
		// The UI server's own blocker let this through: the decoded
		// path holds /workflows/ and /query/, and it starts a workflow.
		"/api/v1/namespaces/fleetlift/workflows/x%2Fquery%2Fy",
		"/api/v1/namespaces/fleetlift/workflows/x/query/y",
	} {
		req, err := http.NewRequest(http.MethodPost, s.URL()+path, strings.NewReader(`{"input":{"payloads":[]}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer anything")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: %s; want 405 Method Not Allowed (the UI is read-only)", path, resp.Status)
		}
	}
}

// TestAnswersOnlyToItsOwnNames: a request whose Host names another server
// (a page elsewhere whose name was made to resolve to this address) is
// refused; the UI's own address and loopback names on any port (as a
// port-forward presents) are served.
func TestAnswersOnlyToItsOwnNames(t *testing.T) {
	s, err := webui.Start(webui.Options{Listen: freeAddr(t), Temporal: freeAddr(t), Namespace: "fleetlift"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	_, port, _ := net.SplitHostPort(s.Address())
	for host, want := range map[string]int{
		s.Address():                http.StatusOK,
		"localhost:" + port:        http.StatusOK,
		"localhost:18233":          http.StatusOK,
		"[::1]:18233":              http.StatusOK,
		"attacker.example:" + port: http.StatusMisdirectedRequest,
		"attacker.example":         http.StatusMisdirectedRequest,
		"0.0.0.0:" + port:          http.StatusMisdirectedRequest,
	} {
		req, err := http.NewRequest(http.MethodGet, s.URL()+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /healthz with Host %s: %s; want %d", host, resp.Status, want)
		}
	}
}
