package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/notify"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestParseService(t *testing.T) {
	vars := env(map[string]string{"SLACK_URL": "https://hooks.slack.example/services/T/B/secret", "HOOK_KEY": "k3y"})
	s, err := notify.ParseService("team-slack=slack,url-env=SLACK_URL", vars)
	if err != nil || s.Kind != notify.KindSlack || s.URL != "https://hooks.slack.example/services/T/B/secret" {
		t.Fatalf("slack: %+v, %v", s, err)
	}
	if strings.Contains(s.String(), "secret") {
		t.Errorf("a Slack service's name shows its URL: %s", s)
	}
	s, err = notify.ParseService("audit=webhook,url=http://127.0.0.1:9/hook,secret-env=HOOK_KEY", vars)
	if err != nil || s.Kind != notify.KindWebhook || string(s.Secret) != "k3y" || s.String() != "audit (webhook to http://127.0.0.1:9)" {
		t.Fatalf("webhook: %+v (%s), %v", s, s, err)
	}
	for flag, want := range map[string]string{
		"x":                                   "want NAME=slack",
		"Bad_Name=slack,url-env=SLACK_URL":    "want NAME=slack",
		"a=email,url=https://x":               `kind "email" is neither slack nor webhook`,
		"a=slack,url=https://hooks.example/x": "give it as url-env=VAR",
		"a=slack,url-env=NOPE":                "$NOPE is not set",
		"a=webhook,url=https://h.example/x":   "give its key as secret-env=VAR",
		"a=webhook,url=http://example.com/x,secret-env=HOOK_KEY":      "https (or http to this machine)",
		"a=webhook,url=https://u:p@example.com/x,secret-env=HOOK_KEY": "carries credentials",
		"a=webhook,secret-env=HOOK_KEY":                               "no url",
		"a=webhook,url=https://h.example,secret-env=HOOK_KEY,x=y":     `unknown option "x"`,
	} {
		_, err := notify.ParseService(flag, vars)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error saying %q", flag, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "k3y") {
			t.Errorf("%s: the error shows a secret: %v", flag, err)
		}
	}
}

func TestParseTemplateRefusesWhatCostsMoreThanItsLength(t *testing.T) {
	for text, want := range map[string]string{
		`{{range 1000000000}}x{{end}}`:             "range is not allowed",
		`{{if .Message}}{{range 9}}{{end}}{{end}}`: "range is not allowed",
		`{{define "x"}}a{{end}}b`:                  "define and block are not allowed",
		`{{block "x" .}}a{{end}}`:                  "define and block are not allowed",
		`{{template "t"}}`:                         "template calls are not allowed",
		`{{.Campain}}`:                             "can't evaluate field Campain",
		`{{.Campaign`:                              "unclosed action",
	} {
		if _, err := notify.ParseTemplate("t", text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error saying %q", text, err, want)
		}
	}
	tm, err := notify.ParseTemplate("t", `{{.Campaign}} {{.Event}}{{with .Target}} for {{.}}{{end}}: {{.Repositories.Failed}} of {{.Repositories.Total}} failed`)
	if err != nil {
		t.Fatal(err)
	}
	m, err := notify.Render(tm, notify.Message{Campaign: "bump", Event: notify.Failed, Repositories: notify.Counts{Total: 10, Failed: 3}})
	if err != nil || m.Text != "bump failed: 3 of 10 failed" {
		t.Errorf("rendered %q, %v", m.Text, err)
	}
	// A template's output is cut, not grown without end.
	long, err := notify.ParseTemplate("t", `{{printf "%900000d" 1}}`)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := notify.Render(long, notify.Message{}); err != nil || len(m.Text) > notify.MaxText {
		t.Errorf("a long message: %d bytes, %v; want at most %d", len(m.Text), err, notify.MaxText)
	}
}

func TestRenderBuiltInLineRedactsCredentials(t *testing.T) {
	m, err := notify.Render(nil, notify.Message{Event: notify.Paused, Campaign: "bump", Kind: "Campaign", Generation: 2,
		Message: "clone https://x-access-token:ghs_secret@github.example/o/r failed", Repositories: notify.Counts{Total: 4, Completed: 1, Failed: 3}})
	if err != nil {
		t.Fatal(err)
	}
	want := "fleetlift: campaign/bump (generation 2) paused: clone https://REDACTED@github.example/o/r failed (4 repositories: 1 completed, 3 failed, 0 pull requests). fleetlift status bump"
	if m.Text != want || strings.Contains(m.Message, "ghs_secret") {
		t.Errorf("got %q (message %q)\nwant %q", m.Text, m.Message, want)
	}
}

// receiver is a loopback webhook receiver that checks signatures as a
// user's would.
type receiver struct {
	mu     sync.Mutex
	secret []byte
	got    []notify.Message
	bodies [][]byte
	bad    []error
	status int
	header http.Header
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, body)
	if r.secret != nil {
		if err := notify.Verify(r.secret, req.Header, body, time.Now(), 5*time.Minute); err != nil {
			r.bad = append(r.bad, err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var m notify.Message
		if err := json.Unmarshal(body, &m); err != nil {
			r.bad = append(r.bad, err)
		}
		if req.Header.Get(notify.HeaderDelivery) != m.Key || req.Header.Get(notify.HeaderEvent) != m.Event {
			r.bad = append(r.bad, errors.New("headers do not match the body"))
		}
		r.got = append(r.got, m)
	}
	for k, v := range r.header {
		w.Header()[k] = v
	}
	if r.status != 0 {
		w.WriteHeader(r.status)
		io.WriteString(w, "busy")
	}
}

func TestSendWebhookIsSignedAndVerifies(t *testing.T) {
	rec := &receiver{secret: []byte("k3y")}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := notify.Service{Name: "audit", Kind: notify.KindWebhook, URL: srv.URL + "/hook", Secret: []byte("k3y")}
	m := notify.Message{Event: notify.Completed, Campaign: "bump", Key: "abc", Text: "done"}
	var c notify.Client
	if err := c.Send(context.Background(), s, m); err != nil {
		t.Fatal(err)
	}
	if len(rec.bad) > 0 || len(rec.got) != 1 || rec.got[0].Campaign != "bump" || rec.got[0].Text != "done" {
		t.Fatalf("received %+v, problems %v", rec.got, rec.bad)
	}
	// Signed under another key, or replayed an hour later, it is refused.
	wrong := s
	wrong.Secret = []byte("other")
	if err := c.Send(context.Background(), wrong, m); err == nil {
		t.Error("a message signed under another key was taken")
	}
	late := notify.Client{Now: func() time.Time { return time.Now().Add(-time.Hour) }}
	if err := late.Send(context.Background(), s, m); err == nil {
		t.Error("a message an hour old was taken")
	}
	if len(rec.bad) != 2 {
		t.Errorf("refused %v; want the wrong key and the old timestamp", rec.bad)
	}
}

func TestSendSlackPostsText(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := notify.Service{Name: "team", Kind: notify.KindSlack, URL: srv.URL + "/services/T/B/secret"}
	var c notify.Client
	if err := c.Send(context.Background(), s, notify.Message{Text: "hello", Campaign: "bump", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	if len(rec.bodies) != 1 || string(rec.bodies[0]) != `{"text":"hello"}` {
		t.Errorf("slack got %q; want the text alone", rec.bodies)
	}
}

func TestSendSaysWhatToRetry(t *testing.T) {
	rec := &receiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	s := notify.Service{Name: "team", Kind: notify.KindSlack, URL: srv.URL + "/services/T/B/secret"}
	var c notify.Client
	for _, tc := range []struct {
		status    int
		after     string
		retryable bool
		wait      time.Duration
	}{
		{500, "", true, 0},
		{503, "120", true, 2 * time.Minute},
		{429, "7", true, 7 * time.Second},
		{408, "", true, 0},
		{404, "", false, 0},
		{400, "", false, 0},
	} {
		rec.status, rec.header = tc.status, http.Header{}
		if tc.after != "" {
			rec.header.Set("Retry-After", tc.after)
		}
		err := c.Send(context.Background(), s, notify.Message{Text: "x"})
		var ne *notify.Error
		if !errors.As(err, &ne) || ne.Status != tc.status || ne.Retryable() != tc.retryable || ne.RetryAfter != tc.wait {
			t.Errorf("%d: %v; want retryable %t, wait %s", tc.status, err, tc.retryable, tc.wait)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%d: the error shows the Slack URL: %v", tc.status, err)
		}
	}
	// No one listening: worth another try, and the URL is not in the error.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	down := notify.Service{Name: "team", Kind: notify.KindSlack, URL: "http://" + addr + "/services/T/B/secret"}
	err = c.Send(context.Background(), down, notify.Message{Text: "x"})
	var ne *notify.Error
	if !errors.As(err, &ne) || !ne.Retryable() || strings.Contains(err.Error(), "secret") {
		t.Errorf("service down: %v; want a retryable error without the URL", err)
	}
}
