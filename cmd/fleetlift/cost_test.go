package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/metrics/metricstest"
	"github.com/fleetlift/fleetlift/internal/state"
)

// standInModelArg makes this test binary an agent CLI (standInModel).
const standInModelArg = "stand-in-model-cli"

// standInModel is an agent CLI that calls its model through the
// gateway as many times as its prompt's "calls=N" says, appending a line
// to CHANGES.md after each answer, and fails on a refusal, saying it.
func standInModel() int {
	prompt, err := os.ReadFile(os.Getenv(protocol.EnvPromptFile))
	if err != nil {
		fmt.Fprintln(os.Stderr, "read the prompt:", err)
		return 1
	}
	m := regexp.MustCompile(`calls=(\d+)`).FindSubmatch(prompt)
	if m == nil {
		fmt.Fprintln(os.Stderr, "the prompt says no calls=N")
		return 1
	}
	n, _ := strconv.Atoi(string(m[1]))
	for i := range n {
		req, _ := http.NewRequest(http.MethodPost, os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages",
			strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":1000,"messages":[{"role":"user","content":"change it"}]}`))
		req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "call the model:", err)
			return 1
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "the model answered %s: %s\n", resp.Status, body)
			return 1
		}
		f, err := os.OpenFile("CHANGES.md", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(f, "change %d\n", i+1)
		f.Close()
	}
	return 0
}

// costCampaign is an agentic campaign over urls whose agent calls its
// model twice in each repository.
func costCampaign(urls []string) string {
	var b strings.Builder
	b.WriteString(`version: 1
kind: Campaign
id: slog
title: Structured logging
team: platform
max_cost_per_campaign: 0.03
strict_batches: true
batch_size: 2
max_parallel: 2
template:
  require_approval: false
  pull_request: {branch_prefix: auto/slog, title: Structured logging}
  execution:
    agentic:
      prompt: "Move to log/slog. calls=2"
      limits: {max_cost_per_task: 0.05}
repositories:
`)
	for i, u := range urls {
		fmt.Fprintf(&b, "  - {name: svc%d, url: %q}\n", i, u)
	}
	return b.String()
}

// TestCampaignCostFromPlanToStatus is issue 41's cost, as a user meets
// it: behind the worker's gateway a stand-in model reports its usage,
// which the gateway prices; the campaign pauses once its repositories
// cost max_cost_per_campaign, `status` says why and what each cost,
// `continue` runs the rest, the recorded state and the metrics hold the
// total, and `plan` projects the next run's cost from this one.
func TestCampaignCostFromPlanToStatus(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		// 1,000 × $3 + 200 × $15 a million tokens: $0.006 a call,
		// $0.012 a repository.
		fmt.Fprint(w, `{"type":"message","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":1000,"output_tokens":200}}`)
	}))
	defer model.Close()
	t.Setenv(envAnthropicAPIKey, "sk-ant-test-key")

	root := t.TempDir()
	prices := filepath.Join(root, "prices.yaml")
	if err := os.WriteFile(prices, []byte("claude-sonnet-4-5: {input: 3, output: 15, cache_write: 3.75, cache_read: 0.30}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	urls := demoRepos(t, root, 6)
	campaigns := filepath.Join(root, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		t.Fatal(err)
	}
	commit := func(body, msg string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(campaigns, "campaigns", "slog.yaml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := demo.Git(ctx, campaigns, demo.Author, "add", "."); err != nil {
			t.Fatal(err)
		}
		if err := demo.Git(ctx, campaigns, demo.Author, "commit", "-q", "-m", msg); err != nil {
			t.Fatal(err)
		}
	}
	commit(costCampaign(urls), "Structured logging")
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	flags := []string{"--temporal-address", addr, "--state-dir", stateDir}

	// Nothing ran yet: no projection.
	out, _ := runCLI(t, append([]string{"plan", "--repo", campaigns}, flags...)...)
	if want := "cost: no projection for 6 repositories: no recorded run priced its model calls; max_cost_per_campaign $0.0300; max_cost_per_task $0.0500"; !strings.Contains(out, want) {
		t.Errorf("plan of the new campaign lacks %q:\n%s", want, out)
	}

	self, _ := json.Marshal([]string{os.Args[0], standInModelArg})
	metricsAddr := freeAddr(t)
	up := startUp(t, append([]string{"--repo", campaigns, "--interval", "1s", "--agent-cli", string(self),
		"--model-gateway", model.URL, "--model-prices", prices, "--metrics-listen", metricsAddr}, flags...)...)

	// Two batches of two: $0.048 reach the $0.03 budget, and the campaign
	// pauses before the last two repositories.
	var rec state.Campaign
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		r, err := reader.Get(ctx, "slog")
		if err == nil && r.Phase == state.PhasePaused {
			rec = r
			break
		}
		if err == nil && r.Phase.Done() || time.Now().After(deadline) {
			t.Fatalf("the campaign did not pause at its budget: %+v, %v\n%s", r, err, up.out.String())
		}
	}
	if want := "the campaign's model calls cost $0.0480, reaching max_cost_per_campaign $0.0300: paused until `fleetlift continue` or `abort`"; rec.Message != want {
		t.Errorf("recorded message %q; want %q", rec.Message, want)
	}
	out, code := runCLI(t, append([]string{"status", "slog"}, flags...)...)
	for _, want := range []string{
		"campaign/slog: paused (the campaign's model calls cost $0.0480",
		"svc0        completed  ",
		"$0.0120",
		"model: 8 requests, 9600 tokens (8000 input, 1600 output, 0 cache writes, 0 cache reads), costing $0.0480",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status while paused: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	if out, code := runCLI(t, append([]string{"continue", "slog"}, flags...)...); code != 0 {
		t.Fatalf("continue: exit %d\n%s", code, out)
	}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		r, err := reader.Get(ctx, "slog")
		if err == nil && r.Phase.Done() {
			rec = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the campaign did not finish after continue: %+v, %v\n%s", r, err, up.out.String())
		}
	}
	if rec.Phase != state.PhaseCompleted || rec.Usage == nil || rec.Usage.Requests != 12 || rec.Usage.Repositories != 6 || fmt.Sprintf("%.4f", rec.Usage.CostUSD) != "0.0720" {
		t.Errorf("recorded after continue: %s, usage %+v; want completed, 12 calls for 6 repositories, $0.0720", rec.Phase, rec.Usage)
	}
	if n := calls.Load(); n != 12 {
		t.Errorf("the model was called %d times; want 12", n)
	}

	// The worker's metrics: the team's tokens and cost.
	s := metricstest.Scrape(t, "http://"+metricsAddr+"/metrics")
	labels := []string{"campaign", "slog", "team", "platform", "model", "claude-sonnet-4-5-20250929"}
	if v, ok := s.Get("fleetlift_agent_tokens_total", append(labels, "kind", "input")...); !ok || v != 12000 {
		t.Errorf("fleetlift_agent_tokens_total input: %v %v; want 12000", v, ok)
	}
	if v, ok := s.Get("fleetlift_cost_usd_total", labels...); !ok || fmt.Sprintf("%.4f", v) != "0.0720" {
		t.Errorf("fleetlift_cost_usd_total: %v %v; want 0.072", v, ok)
	}

	// Two more repositories: the next run is projected from this one's.
	// (The reconciler stops first, so that the plan is of a change not
	// applied yet.)
	up.stop(t)
	more := demoRepos(t, filepath.Join(root, "more"), 2)
	commit(costCampaign(append(urls, more...)), "Structured logging in two more")
	out, _ = runCLI(t, append([]string{"plan", "--repo", campaigns}, flags...)...)
	if want := "cost: about $0.0960 projected (8 repositories at $0.0120 each, from this campaign's last run); over max_cost_per_campaign $0.0300: the campaign pauses once it is spent; max_cost_per_task $0.0500"; !strings.Contains(out, want) {
		t.Errorf("plan of the changed campaign lacks %q:\n%s", want, out)
	}
}
