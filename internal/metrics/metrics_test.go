package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/metrics"
	"github.com/fleetlift/fleetlift/internal/metrics/metricstest"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

func scrape(t *testing.T, m *metrics.Metrics) metricstest.Samples {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	return metricstest.Scrape(t, srv.URL)
}

func want(t *testing.T, s metricstest.Samples, v float64, name string, labels ...string) {
	t.Helper()
	got, ok := s.Get(name, labels...)
	if !ok {
		t.Errorf("%s: missing; have %v", metricstest.Key(name, labels...), s.Names("fleetlift_"))
		return
	}
	if got != v {
		t.Errorf("%s = %v, want %v", metricstest.Key(name, labels...), got, v)
	}
}

func TestPassSeries(t *testing.T) {
	m := metrics.New()
	since := time.Now().Add(-90 * time.Minute)
	res := &reconcile.Result{Recorded: []state.Campaign{
		{ID: "slog", Kind: state.KindCampaign, Phase: state.PhaseAwaitingApproval,
			Repos: []state.Repo{
				{Name: "a", Status: state.RepoCompleted, PullRequestState: state.PullRequestMerged},
				{Name: "b", Status: state.RepoCompleted, PullRequestState: state.PullRequestOpen},
				{Name: "c", Status: state.RepoAwaitingApproval},
			},
			PendingApprovals: []state.PendingApproval{{Target: "slog/c", ResultDigest: "sha256:x", Since: since}},
		},
		{ID: "one", Kind: state.KindTask, Phase: state.PhaseCompleted},
	}}
	m.ObservePass(res, nil, 120*time.Millisecond)
	m.ObservePass(nil, errors.New("read the head: boom"), 10*time.Millisecond)
	m.ObservePass(&reconcile.Result{Recorded: res.Recorded, Outcomes: []reconcile.Outcome{{ID: "x", Action: "create", Err: errors.New("no")}}}, nil, time.Millisecond)

	s := scrape(t, m)
	want(t, s, 1, "fleetlift_campaign_info", "id", "slog", "kind", "Campaign", "phase", "awaiting_approval")
	want(t, s, 1, "fleetlift_campaign_info", "id", "one", "kind", "Task", "phase", "completed")
	want(t, s, 2, "fleetlift_campaign_repositories", "id", "slog", "state", "completed")
	want(t, s, 1, "fleetlift_campaign_repositories", "id", "slog", "state", "awaiting_approval")
	want(t, s, 0, "fleetlift_campaign_repositories", "id", "slog", "state", "failed")
	want(t, s, 1, "fleetlift_campaign_pull_requests", "id", "slog", "state", "merged")
	want(t, s, 1, "fleetlift_campaign_pull_requests", "id", "slog", "state", "open")
	want(t, s, 1, "fleetlift_campaign_approvals_waiting", "id", "slog")
	want(t, s, 0, "fleetlift_campaign_approvals_waiting", "id", "one")
	if age, _ := s.Get("fleetlift_approval_waiting_seconds", "id", "slog", "target", "slog/c"); age < 5390 || age > 5500 {
		t.Errorf("approval age %v, want about 5400", age)
	}
	want(t, s, 3, "fleetlift_reconcile_pass_duration_seconds_count")
	want(t, s, 1, "fleetlift_reconcile_errors_total", "stage", "pass")
	want(t, s, 1, "fleetlift_reconcile_errors_total", "stage", "apply")
	if ts, _ := s.Get("fleetlift_reconcile_last_success_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("last success %v, want the first pass's time", ts)
	}
}

// A standby reconciler says it stands by and has no last success for an
// alert on its age to take for a stall; once it leads and a pass
// succeeds, it says both. A worker says nothing about reconciling.
func TestStandbyIsNotStalled(t *testing.T) {
	var leading atomic.Bool
	m := metrics.New()
	m.Reconciling(leading.Load)
	s := scrape(t, m)
	want(t, s, 0, "fleetlift_reconcile_leader")
	if v, ok := s.Get("fleetlift_reconcile_last_success_timestamp_seconds"); ok {
		t.Errorf("a standby that never reconciled exports a last success at %v", v)
	}

	leading.Store(true)
	m.ObservePass(&reconcile.Result{}, nil, time.Millisecond)
	s = scrape(t, m)
	want(t, s, 1, "fleetlift_reconcile_leader")
	if ts, ok := s.Get("fleetlift_reconcile_last_success_timestamp_seconds"); !ok || time.Since(time.Unix(int64(ts), 0)) > time.Minute {
		t.Errorf("a leader's last success %v (present %v), want its pass's time", ts, ok)
	}

	// It lost the lease: a standby again, its last success kept.
	leading.Store(false)
	s = scrape(t, m)
	want(t, s, 0, "fleetlift_reconcile_leader")
	if _, ok := s.Get("fleetlift_reconcile_last_success_timestamp_seconds"); !ok {
		t.Error("the last success of a former leader is gone")
	}

	worker := scrape(t, metrics.New())
	for _, n := range []string{"fleetlift_reconcile_leader", "fleetlift_reconcile_last_success_timestamp_seconds"} {
		if _, ok := worker.Get(n); ok {
			t.Errorf("a process that does not reconcile exports %s", n)
		}
	}
}

func TestRemovedRunLeavesNoSeries(t *testing.T) {
	m := metrics.New()
	m.ObservePass(&reconcile.Result{Recorded: []state.Campaign{{ID: "gone", Kind: state.KindTask, Phase: state.PhaseRunning}}}, nil, 0)
	m.ObservePass(&reconcile.Result{}, nil, 0)
	s := scrape(t, m)
	for k := range s {
		if strings.Contains(k, `"gone"`) {
			t.Errorf("a run no longer recorded is still exported: %s", k)
		}
	}
}

func TestWebhookForgeSandboxSeries(t *testing.T) {
	m := metrics.New()
	m.WebhookDelivered(webhook.OutcomeAccepted)
	m.WebhookDelivered(webhook.OutcomeUnauthorized)
	m.WebhookDelivered(webhook.OutcomeUnauthorized)
	m.RateLimitWait("corp")(1500 * time.Millisecond)

	const token = "ghp_notarealtoken0123456789"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
	}))
	defer api.Close()
	hc := &http.Client{Transport: m.ForgeTransport("corp", nil)}
	req, _ := http.NewRequest(http.MethodPost, api.URL+"/repos/a/b/pulls?access_token="+token, nil)
	req.Header.Set("Authorization", "token "+token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	p := m.Sandbox(fakeProvider{})
	if _, err := p.Provision(context.Background(), sandbox.ProvisionOptions{ID: "x"}); err != nil {
		t.Fatal(err)
	}

	m.NotifyTried("audit", "paused", "retry")
	m.PermitWaited("corp")(1500 * time.Millisecond)
	m.PermitWaited("corp")(500 * time.Millisecond)
	m.RequestPermitWaited("corp")(250 * time.Millisecond)
	m.SlotWaited("corp")(3 * time.Second)
	m.NotifyTried("audit", "paused", "delivered")
	m.ModelUsed("slog-rollout", "platform", "claude-sonnet-4-5", protocol.ModelUsage{InputTokens: 1000, OutputTokens: 500, CacheReadInputTokens: 2000, CostUSD: 0.0111})
	m.ModelUsed("slog-rollout", "platform", "claude-sonnet-4-5", protocol.ModelUsage{InputTokens: 1000, OutputTokens: 500, CostUSD: 0.0105})
	m.ModelUsed("slog-rollout", "platform", "local-llama", protocol.ModelUsage{InputTokens: 10})

	s := scrape(t, m)
	want(t, s, 1, "fleetlift_notify_deliveries_total", "service", "audit", "event", "paused", "outcome", "retry")
	want(t, s, 2, "fleetlift_forge_write_permits_total", "forge", "corp")
	want(t, s, 2, "fleetlift_forge_write_permit_wait_seconds_total", "forge", "corp")
	want(t, s, 1, "fleetlift_forge_request_permits_total", "forge", "corp")
	want(t, s, 0.25, "fleetlift_forge_request_permit_wait_seconds_total", "forge", "corp")
	want(t, s, 1, "fleetlift_forge_transfer_slots_total", "forge", "corp")
	want(t, s, 3, "fleetlift_forge_transfer_slot_wait_seconds_total", "forge", "corp")
	want(t, s, 1, "fleetlift_notify_deliveries_total", "service", "audit", "event", "paused", "outcome", "delivered")
	want(t, s, 2000, "fleetlift_agent_tokens_total", "campaign", "slog-rollout", "team", "platform", "model", "claude-sonnet-4-5", "kind", "input")
	want(t, s, 2000, "fleetlift_agent_tokens_total", "campaign", "slog-rollout", "team", "platform", "model", "claude-sonnet-4-5", "kind", "cache_read")
	want(t, s, 10, "fleetlift_agent_tokens_total", "campaign", "slog-rollout", "team", "platform", "model", "local-llama", "kind", "input")
	want(t, s, 0.0216, "fleetlift_cost_usd_total", "campaign", "slog-rollout", "team", "platform", "model", "claude-sonnet-4-5")
	if _, ok := s.Get("fleetlift_cost_usd_total", "campaign", "slog-rollout", "team", "platform", "model", "local-llama"); ok {
		t.Error("a model without a price has a cost series")
	}
	want(t, s, 1, "fleetlift_webhook_deliveries_total", "outcome", "accepted")
	want(t, s, 2, "fleetlift_webhook_deliveries_total", "outcome", "unauthorized")
	want(t, s, 0, "fleetlift_webhook_deliveries_total", "outcome", "refused")
	want(t, s, 1, "fleetlift_forge_requests_total", "forge", "corp", "method", "POST", "code", "418")
	want(t, s, 1, "fleetlift_forge_rate_limit_waits_total", "forge", "corp")
	want(t, s, 1.5, "fleetlift_forge_rate_limit_wait_seconds_total", "forge", "corp")
	want(t, s, 1, "fleetlift_sandbox_provision_duration_seconds_count", "provider", "fake", "outcome", "ok")
	for k := range s {
		if strings.Contains(k, token) || strings.Contains(k, "/repos/") {
			t.Errorf("a label holds the request's URL or token: %s", k)
		}
	}
}

func TestTemporalHandler(t *testing.T) {
	// Twice in one process, as a restarted command or a second test does.
	_, other := metrics.New().TemporalHandler()
	other.Close()
	m := metrics.New()
	h, closer := m.TemporalHandler()
	h.WithTags(map[string]string{"namespace": "default"}).Counter("temporal_request").Inc(2)
	if err := closer.Close(); err != nil { // flushes
		t.Fatal(err)
	}
	s := scrape(t, m)
	if len(s.Names("temporal_request")) == 0 {
		t.Errorf("no temporal_request series; have %v", s.Names("temporal"))
	}
}

type fakeProvider struct{ sandbox.Provider }

func (fakeProvider) Name() string { return "fake" }
func (fakeProvider) Provision(context.Context, sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	return &sandbox.Sandbox{}, nil
}

// TestMonitoringNamesExportedSeries: every fleetlift_ series the alert
// rules and the dashboard in deploy/monitoring query, but the
// controller's, is one a reconciler or worker exports once its hooks have
// been used. (cmd/fleetlift's TestUpMetricsLogsAndUI checks the Temporal
// SDK's temporal_ series on a live `fleetlift up`, and
// cmd/fleetlift-controller's TestControllerCommand the controller's.)
func TestMonitoringNamesExportedSeries(t *testing.T) {
	m := metrics.New()
	m.Reconciling(func() bool { return true })
	m.ObservePass(&reconcile.Result{Recorded: []state.Campaign{{ID: "a", Kind: state.KindTask, Phase: state.PhaseRunning,
		PendingApprovals: []state.PendingApproval{{Target: "a", Since: time.Now()}}}}}, nil, time.Second)
	m.Sandbox(fakeProvider{}).Provision(context.Background(), sandbox.ProvisionOptions{})
	m.RateLimitWait("f")(time.Second)
	m.NotifyTried("s", "paused", "failed")
	hc := &http.Client{Transport: m.ForgeTransport("f", roundTrip(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}))}
	if resp, err := hc.Get("http://forge.invalid/"); err == nil {
		resp.Body.Close()
	}
	s := scrape(t, m)
	queried := metricstest.Queried(t, func(n string) bool {
		return strings.HasPrefix(n, metrics.Namespace+"_") && !metricstest.Controller(n)
	})
	if len(queried) < 10 {
		t.Fatalf("deploy/monitoring queries only %v", queried)
	}
	for _, n := range queried {
		if !s.Has(n) {
			t.Errorf("deploy/monitoring queries %s, which fleetlift does not export; it exports %v", n, s.Names("fleetlift_"))
		}
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A provider whose sandboxes say when their files change still says so
// once its provisioning is timed: the worker hears an agent's status as
// it is written, not at its next poll.
func TestTimedSandboxesStillSayWhenFilesChange(t *testing.T) {
	inner, err := local.New(local.Options{Root: t.TempDir(), AgentCommand: []string{"sh", "-c", "exec sleep 1000", "agent"}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := metrics.New().Sandbox(inner)
	w, ok := p.(interface {
		Watch(id, path string) (<-chan struct{}, func() error, error)
	})
	if !ok {
		t.Fatal("the timed provider hides Watch")
	}
	sb, err := p.Provision(t.Context(), sandbox.ProvisionOptions{ID: "watched"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
	// As the worker's manifest makes the protocol directory.
	if err := p.CopyTo(t.Context(), sb.ID, strings.NewReader(`{}`), ".fleetlift/manifest.json"); err != nil {
		t.Fatal(err)
	}
	changed, stop, err := w.Watch(sb.ID, ".fleetlift/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := p.CopyTo(t.Context(), sb.ID, strings.NewReader(`{"phase":"executing"}`), ".fleetlift/status.json"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no word of the status file's change")
	}
}
