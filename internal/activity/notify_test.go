package activity_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/notify"
)

// Notify says Temporal's retry what to do: a service the worker lacks
// and a refusal fail for good, a 429 waits as long as it asks, a server
// error is tried again on the retry policy's backoff.
func TestNotifyTellsTheRetryWhatToDo(t *testing.T) {
	status, after := 0, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if after != "" {
			w.Header().Set("Retry-After", after)
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	var tried []string
	a := &activity.Activities{NotifyServices: map[string]notify.Service{
		"team": {Name: "team", Kind: notify.KindSlack, URL: srv.URL + "/services/T/B/hidden-part"},
	}, NotifyTried: func(service, event, outcome string) { tried = append(tried, service+"/"+event+"/"+outcome) }}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	d := notify.Delivery{Service: "team", Message: notify.Message{Text: "hi", Event: notify.Paused}}
	for _, tc := range []struct {
		service, after string
		status         int
		want           string
		retry          bool
		wait           time.Duration
	}{
		{service: "team", status: 200},
		{service: "pager", status: 200, want: `no notification service "pager" on this worker: start it with --notify pager=`},
		{service: "team", status: 404, want: "404 Not Found"},
		{service: "team", status: 429, after: "30", want: "429", retry: true, wait: 30 * time.Second},
		{service: "team", status: 502, want: "502", retry: true},
	} {
		status, after, d.Service = tc.status, tc.after, tc.service
		_, err := env.ExecuteActivity(a.Notify, d)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s %d: %v", tc.service, tc.status, err)
			}
			continue
		}
		var ae *temporal.ApplicationError
		if !errors.As(err, &ae) || !strings.Contains(ae.Error(), tc.want) || ae.NonRetryable() == tc.retry || ae.NextRetryDelay() != tc.wait {
			t.Errorf("%s %d: %v; want %q, retry %t after %s", tc.service, tc.status, err, tc.want, tc.retry, tc.wait)
		}
		if err != nil && strings.Contains(err.Error(), "hidden-part") {
			t.Errorf("%s %d: the error shows the Slack URL: %v", tc.service, tc.status, err)
		}
	}
	// The metrics count each try by how it went.
	want := "team/paused/delivered pager/paused/failed team/paused/failed team/paused/retry team/paused/retry"
	if got := strings.Join(tried, " "); got != want {
		t.Errorf("tries told: %s; want %s", got, want)
	}
}
