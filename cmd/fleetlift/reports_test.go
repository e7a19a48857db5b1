package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/state"
)

// reportRepos makes a bare repository under root for each name, holding
// report.src with the given text: what the stand-in agent CLI copies to
// REPORT.md when its prompt says report-from-repo.
func reportRepos(t *testing.T, root string, reports map[string]string) map[string]string {
	t.Helper()
	urls := map[string]string{}
	for name, text := range reports {
		src := filepath.Join(root, "src", name)
		bare := filepath.Join(root, name+".git")
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, "report.src"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		script := fmt.Sprintf(`set -e
git init -q -b main %[1]s
git -C %[1]s add report.src
git -C %[1]s -c user.email=t@example.com -c user.name=t commit -qm init
git clone -q --bare %[1]s %[2]s`, src, bare)
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("make repo: %v\n%s", err, out)
		}
		urls[name] = "file://" + bare
	}
	return urls
}

// standInCLI is the --agent-cli of the agent package's stand-in agent.
func standInCLI(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../internal/agent/testdata/stand-in-agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal([]string{p})
	return string(b)
}

// reportsJSON is what `fleetlift reports -o json` prints.
type reportsJSON struct {
	ID      string         `json:"id"`
	Columns []string       `json:"columns"`
	Summary map[string]int `json:"summary"`
	Reports []struct {
		state.Report
		BodyFile string `json:"body_file"`
	} `json:"reports"`
}

// TestReportCampaignEverywhere is issue 17's acceptance: a report campaign
// over three local repositories, launched from the campaigns repository,
// whose agent writes one valid report, one that fails the output schema
// and one empty report, shows all three as they are in `fleetlift reports
// -o json`, in its table view and on the status branch.
func TestReportCampaignEverywhere(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	urls := reportRepos(t, root, map[string]string{
		"billing":  "---\nauth_library: oauth2-proxy\nscore: 8\n---\n\n# Authentication audit: billing\n\nSessions expire after 15 minutes.\n",
		"payments": "---\nauth_library: custom\nscore: 11\n---\n\n# Authentication audit: payments\n",
		"search":   "",
	})
	campaigns := filepath.Join(root, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		t.Fatal(err)
	}
	def := fmt.Sprintf(`version: 1
kind: Campaign
id: auth-audit
title: Authentication audit
template:
  mode: report
  require_approval: false
  execution:
    agentic:
      prompt: "Audit authentication. report-from-repo"
      output:
        schema:
          type: object
          required: [score, auth_library]
          properties:
            auth_library: {type: string}
            score: {type: integer, minimum: 1, maximum: 10}
repositories:
  - url: %s
  - url: %s
  - url: %s
failure: {threshold_percent: 100}
`, urls["billing"], urls["payments"], urls["search"])
	if err := os.WriteFile(filepath.Join(campaigns, "campaigns", "auth-audit.yaml"), []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := demo.Git(ctx, campaigns, demo.Author, "add", "."); err != nil {
		t.Fatal(err)
	}
	if err := demo.Git(ctx, campaigns, demo.Author, "commit", "-q", "-m", "Audit authentication"); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s", "--agent-cli", standInCLI(t))

	deadline := time.Now().Add(3 * time.Minute)
	for {
		rec, err := reader.Get(ctx, "auth-audit")
		if err == nil && rec.Phase.Done() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the campaign did not finish: %+v, %v\n%s", rec, err, up.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// -o json: each report as it is.
	out, code := runCLI(t, "reports", "auth-audit", "-o", "json", "--temporal-address", addr, "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("reports -o json: exit %d\n%s", code, out)
	}
	var got reportsJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("reports -o json is not JSON: %v\n%s", err, out)
	}
	if got.ID != "campaign/auth-audit" || strings.Join(got.Columns, ",") != "score,auth_library" || len(got.Reports) != 3 ||
		got.Summary["valid"] != 1 || got.Summary["invalid"] != 1 || got.Summary["empty"] != 1 {
		t.Fatalf("reports -o json: %s", out)
	}
	byName := map[string]int{}
	for i, r := range got.Reports {
		byName[r.Repository] = i
	}
	billing, payments, search := got.Reports[byName["billing"]], got.Reports[byName["payments"]], got.Reports[byName["search"]]
	compact := func(raw json.RawMessage) string {
		var b bytes.Buffer
		_ = json.Compact(&b, raw)
		return b.String()
	}
	if billing.Status != state.ReportValid || compact(billing.Frontmatter) != `{"auth_library":"oauth2-proxy","score":8}` ||
		!strings.Contains(billing.Body, "Sessions expire after 15 minutes.") || billing.BodyFile != "billing.md" {
		t.Errorf("the valid report: %+v", billing)
	}
	if payments.Status != state.ReportInvalid || payments.ErrorKind != "schema_invalid" ||
		strings.Join(payments.ValidationErrors, ";") != "/score: maximum: got 11, want 10" ||
		!strings.Contains(payments.Raw, "score: 11") || compact(payments.Frontmatter) != `{"auth_library":"custom","score":11}` {
		t.Errorf("the report that fails its schema: %+v", payments)
	}
	if search.Status != state.ReportEmpty || !strings.Contains(search.Warning, "the report is empty") || search.Error != "" {
		t.Errorf("the empty report: %+v", search)
	}

	// The table view.
	out, code = runCLI(t, "reports", "campaign/auth-audit", "--temporal-address", addr, "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("reports: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"REPOSITORY  STATUS   score  auth_library  PROBLEMS",
		"billing     valid    8      oauth2-proxy",
		"payments    invalid  11     custom        /score: maximum: got 11, want 10",
		"search      empty                         the report is empty",
		"3 reports: 1 valid, 1 empty, 1 invalid",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}

	// The status branch: the report page and the bodies.
	show := func(path string) string {
		b, _ := exec.Command("git", "-C", campaigns, "show", "fleetlift/status:"+path).Output()
		return string(b)
	}
	var page string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if page = show("reports/auth-audit/README.md"); strings.Contains(page, "3 reports: 1 valid, 1 empty, 1 invalid") {
			break
		}
	}
	for _, want := range []string{
		"| `billing` | valid | 8 | oauth2-proxy |  | [billing.md](billing.md) |",
		"| `payments` | **invalid** | 11 | custom | /score: maximum: got 11, want 10 | [payments.md](payments.md) |",
		"| `search` | **empty** (look at it) |  |  | the report is empty",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the status branch's report page lacks %q:\n%s", want, page)
		}
	}
	if b := show("reports/auth-audit/billing.md"); !strings.Contains(b, "Sessions expire after 15 minutes.") {
		t.Errorf("billing.md on the status branch:\n%s", b)
	}
	if p := show("reports/auth-audit/payments.md"); !strings.Contains(p, "What the agent wrote:") || !strings.Contains(p, "score: 11") {
		t.Errorf("payments.md on the status branch:\n%s", p)
	}
	if readme := show("README.md"); !strings.Contains(readme, "[`auth-audit`](reports/auth-audit/README.md)") {
		t.Errorf("the status README does not link the reports:\n%s", readme)
	}

	// A transform is not a report; an unknown view is refused.
	if out, code := runCLI(t, "reports", "auth-audit", "-o", "yaml", "--temporal-address", addr, "--state-dir", stateDir); code != 2 || !strings.Contains(out, `invalid argument "yaml" for "-o, --output" flag: want table, json, csv or markdown`) {
		t.Errorf("reports -o yaml: exit %d\n%s", code, out)
	}
	if out, code := runCLI(t, "reports", "auth-audit", "--for-each", "users-api", "--temporal-address", addr, "--state-dir", stateDir); code == 0 || !strings.Contains(out, "campaign/auth-audit has no for_each targets") {
		t.Errorf("reports --for-each of a run without targets: exit %d\n%s", code, out)
	}
}

// TestLocalReportExample runs examples/local/go-inventory.yaml as its
// comment says (on repositories setup.sh makes, here in a temporary
// directory): `fleetlift run` ends with the reports, and `fleetlift
// reports` reads them afterwards from the database the run left.
func TestLocalReportExample(t *testing.T) {
	demo := filepath.Join(t.TempDir(), "fleetlift-demo")
	setup := exec.Command("../../examples/local/setup.sh")
	setup.Env = append(os.Environ(), "FLEETLIFT_DEMO_DIR="+demo)
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v\n%s", err, out)
	}
	src, err := os.ReadFile("../../examples/local/go-inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	def := writeDef(t, t.TempDir(), "go-inventory.yaml", strings.ReplaceAll(string(src), "/tmp/fleetlift-demo", demo))
	agentPath, _ := filepath.Abs("../../examples/local/inventory-agent.sh")
	agentCLI, _ := json.Marshal([]string{agentPath})
	addr, stateDir := freeAddr(t), filepath.Join(t.TempDir(), "state")

	out, code := runCLI(t, "run", "--file", def, "--allow-file-root", demo, "--sandbox", "local", "--agent-cli", string(agentCLI), "--temporal-address", addr, "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"campaign/demo-go-inventory: completed",
		"reports:",
		"REPOSITORY  STATUS  module                     go_version  go_files  has_tests",
		"payments    valid   example.com/acme/payments  1.21        1         false",
		"3 reports: 3 valid",
		"`fleetlift reports campaign/demo-go-inventory --body`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run's output lacks %q:\n%s", want, out)
		}
	}

	out, code = runCLI(t, "reports", "demo-go-inventory", "--body", "--temporal-address", addr, "--state-dir", stateDir)
	if code != 0 || !strings.Contains(out, "=== ledger (valid)\n# Inventory of `example.com/acme/ledger`") || !strings.Contains(out, "- version.go") {
		t.Errorf("reports --body after the run: exit %d\n%s", code, out)
	}
	dir := filepath.Join(t.TempDir(), "inventory")
	if out, code := runCLI(t, "reports", "demo-go-inventory", "-o", "csv", "--out-dir", dir, "--temporal-address", addr, "--state-dir", stateDir); code != 0 ||
		!strings.Contains(out, ",search,,valid,example.com/acme/search,1.21,1,false,,search.md") {
		t.Errorf("reports -o csv: exit %d\n%s", code, out)
	}
	for _, f := range []string{"README.md", "payments.md", "ledger.md", "search.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("--out-dir: %v", err)
		}
	}
}
