package webhook_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/fleetlift/fleetlift/internal/webhook"
)

// TestListenServesTheHandlerAndAProbe: the receiver hands /webhook to
// the handler, answers "ok" at /healthz for probes, and stops on Close.
func TestListenServesTheHandlerAndAProbe(t *testing.T) {
	reached := false
	s, err := webhook.Listen("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached = true
		w.WriteHeader(http.StatusAccepted)
	}))
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr().String()
	resp, err := http.Post(base+"/webhook", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !reached || resp.StatusCode != http.StatusAccepted {
		t.Errorf("POST /webhook: %s, reached the handler %v", resp.Status, reached)
	}
	resp, err = http.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok\n" {
		t.Errorf("GET /healthz: %s %q", resp.Status, body)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the receiver still answers after Close")
	}
	if _, err := webhook.Listen("127.0.0.1:-1", http.NotFoundHandler()); err == nil {
		t.Error("Listen on a bad address did not fail")
	}
}
