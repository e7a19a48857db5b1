package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/metrics/metricstest"
	"github.com/fleetlift/fleetlift/internal/state"
)

// TestUpMetricsLogsAndUI: `fleetlift up` with --metrics-listen,
// --ui-listen and --log-format json runs the demo's campaign; /metrics
// shows it waiting for approval and then completed, with the passes, the
// sandboxes and the Temporal SDK's series; the log is JSON with the SDK's
// lines in it; the Temporal Web UI answers and reads the namespace
// through the install's credential.
func TestUpMetricsLogsAndUI(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	targets := demoTargetsForTest(t, root)
	campaigns := filepath.Join(root, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	metricsAddr, uiAddr := freeAddr(t), freeAddr(t)
	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s",
		"--metrics-listen", metricsAddr, "--ui-listen", uiAddr, "--log-format", "json")
	waitListening(t, metricsAddr)
	commit := func(name, body, who, msg string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(campaigns, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(campaigns, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"add", name}, {"commit", "-q", "-m", msg}} {
			if err := demo.Git(ctx, campaigns, who, args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit("campaigns/go-version.yaml", demo.Campaign(targets), demo.Author, "Raise the go directive")

	const id = "demo-go-version"
	// scrapeUntil scrapes until cond holds of the samples.
	scrapeUntil := func(what string, cond func(metricstest.Samples) bool) metricstest.Samples {
		t.Helper()
		var s metricstest.Samples
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			if s = metricstest.Scrape(t, "http://"+metricsAddr+"/metrics"); cond(s) {
				return s
			}
			time.Sleep(300 * time.Millisecond)
		}
		t.Fatalf("%s: gave up; fleetlift series %v\n%s", what, s.Names("fleetlift_"), up.out.String())
		return nil
	}
	is := func(s metricstest.Samples, v float64, name string, labels ...string) bool {
		got, ok := s.Get(name, labels...)
		return ok && got == v
	}
	s := scrapeUntil("awaiting approval", func(s metricstest.Samples) bool {
		return is(s, 3, "fleetlift_campaign_approvals_waiting", "id", id)
	})
	for _, c := range []struct {
		v      float64
		name   string
		labels []string
	}{
		{1, "fleetlift_campaign_info", []string{"id", id, "kind", "Campaign", "phase", "awaiting_approval"}},
		{3, "fleetlift_campaign_repositories", []string{"id", id, "state", "awaiting_approval"}},
		{0, "fleetlift_campaign_repositories", []string{"id", id, "state", "failed"}},
		{0, "fleetlift_reconcile_errors_total", []string{"stage", "pass"}},
		{3, "fleetlift_sandbox_provision_duration_seconds_count", []string{"provider", "local", "outcome", "ok"}},
	} {
		if got, ok := s.Get(c.name, c.labels...); !ok || got != c.v {
			t.Errorf("%s = %v (present %v), want %v", metricstest.Key(c.name, c.labels...), got, ok, c.v)
		}
	}
	rec, err := reader.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rec.PendingApprovals {
		if age, ok := s.Get("fleetlift_approval_waiting_seconds", "id", id, "target", p.Target); !ok || age < 0 || age > 600 {
			t.Errorf("approval age of %s: %v (present %v)", p.Target, age, ok)
		}
		commit("approvals/"+strings.ReplaceAll(p.Target, "/", "-")+".yaml",
			fmt.Sprintf("version: 1\nkind: Approval\ntarget: %s\naction: approve\nresult_digest: %s\nby: %s\n", p.Target, p.ResultDigest, demo.Approver),
			demo.Approver, "Approve "+p.Target)
	}
	s = scrapeUntil("completed", func(s metricstest.Samples) bool {
		return is(s, 1, "fleetlift_campaign_info", "id", id, "kind", "Campaign", "phase", string(state.PhaseCompleted))
	})
	if !is(s, 3, "fleetlift_campaign_repositories", "id", id, "state", "completed") || !is(s, 0, "fleetlift_campaign_approvals_waiting", "id", id) {
		t.Errorf("completed campaign: repositories completed %v, approvals waiting %v",
			s[metricstest.Key("fleetlift_campaign_repositories", "id", id, "state", "completed")], s[metricstest.Key("fleetlift_campaign_approvals_waiting", "id", id)])
	}
	if n, _ := s.Get("fleetlift_reconcile_pass_duration_seconds_count"); n < 2 {
		t.Errorf("%v reconcile passes counted", n)
	}
	if ts, _ := s.Get("fleetlift_reconcile_last_success_timestamp_seconds"); time.Since(time.Unix(int64(ts), 0)) > 5*time.Minute {
		t.Errorf("last successful pass at %v", ts)
	}
	if len(s.Names("temporal_")) == 0 {
		t.Errorf("no Temporal SDK series")
	}
	// up reconciles without an election: it leads.
	if v, ok := s.Get("fleetlift_reconcile_leader"); !ok || v != 1 {
		t.Errorf("fleetlift_reconcile_leader = %v (present %v), want 1", v, ok)
	}
	// Every Temporal SDK series deploy/monitoring's alerts and dashboard
	// query is one a running fleetlift serves, but the failure counter:
	// the SDK makes temporal_request_failure_total (its
	// metrics.TemporalRequestFailure, with the Prometheus naming scope's
	// _total) only when a request fails.
	for _, n := range metricstest.Queried(t, func(n string) bool { return strings.HasPrefix(n, "temporal_") }) {
		if !s.Has(n) && n != "temporal_request_failure_total" {
			t.Errorf("deploy/monitoring queries %s, which fleetlift up does not serve; it serves %v", n, s.Names("temporal_"))
		}
	}

	// The UI answers and reaches Temporal with the install's credential.
	for path, want := range map[string]string{"/": "<html", "/api/v1/namespaces/" + devserver.Namespace: `"` + devserver.Namespace + `"`} {
		resp, err := http.Get("http://" + uiAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("web UI GET %s: %s %.300s; want 200 with %s", path, resp.Status, body, want)
		}
	}

	// Every log line of the reconciler and the SDK is JSON.
	up.stop(t)
	var sdk, fleet int
	for _, line := range strings.Split(up.out.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("a log line is not JSON: %q", line)
			continue
		}
		if m["component"] == "temporal-sdk" {
			sdk++
		} else {
			fleet++
		}
	}
	if sdk == 0 || fleet == 0 {
		t.Errorf("%d JSON lines of the Temporal SDK and %d of fleetlift, want some of each:\n%s", sdk, fleet, up.out.String())
	}
}

// TestMetricsDefaults: up serves /metrics on loopback by default, as the
// docs/observability.md's curl expects; reconcile and worker only where they are told.
func TestMetricsDefaults(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	for name, want := range map[string]string{"up": defaultMetricsListen, "reconcile": "", "worker": ""} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		f := cmd.Flags().Lookup("metrics-listen")
		if f == nil {
			t.Fatalf("%s has no --metrics-listen", name)
		}
		if f.DefValue != want || f.Value.String() != want {
			t.Errorf("%s --metrics-listen defaults to %q (value %q), want %q", name, f.DefValue, f.Value.String(), want)
		}
	}
	if defaultMetricsListen != "127.0.0.1:9464" {
		t.Errorf("up's metrics address is %s; the docs/observability.md's curl reads 127.0.0.1:9464", defaultMetricsListen)
	}
}

// TestLoopbackMetricsAnswerOnlyToTheirNames: metrics served on loopback
// (up's default) answer a request that names this machine, not one whose
// Host is another name that resolves here (DNS rebinding from a page in
// a browser).
func TestLoopbackMetricsAnswerOnlyToTheirNames(t *testing.T) {
	root := newRootCmd(io.Discard, io.Discard)
	up, _, err := root.Find([]string{"up"})
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	o, err := observe(up, &metricsFlags{listen: addr}, &temporalFlags{})
	if err != nil {
		t.Fatal(err)
	}
	defer o.stop()
	_, port, _ := net.SplitHostPort(addr)
	for host, want := range map[string]int{addr: http.StatusOK, "localhost:" + port: http.StatusOK, "rebound.example:" + port: http.StatusMisdirectedRequest} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /metrics with Host %s: %s; want %d", host, resp.Status, want)
		}
	}
}
