package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/report"
	"github.com/fleetlift/fleetlift/internal/state"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// auditSpec is a normalised Task spec whose output schema requires
// auth_library and score, and knows issues.
const auditSpec = `{"version":1,"kind":"Task","id":"auth-audit","mode":"report","execution":{"agentic":{"prompt":"audit","output":{"capture":"file",
"schema":{"type":"object","required":["score","auth_library"],"properties":{"auth_library":{"type":"string"},"issues":{"type":"array"},"score":{"type":"integer","maximum":10}}}}}}}`

func TestColumns(t *testing.T) {
	reports := []state.Report{{Repository: "a", Status: state.ReportValid, Frontmatter: json.RawMessage(`{"zeta":1,"score":2,"extra":true}`)}}
	tests := []struct {
		name string
		spec string
		want []string
	}{
		{"required first in their order, other properties sorted, then fields beyond the schema", auditSpec,
			[]string{"score", "auth_library", "issues", "extra", "zeta"}},
		{"campaign template", `{"kind":"Campaign","template":{"execution":{"agentic":{"output":{"schema":{"properties":{"b":{},"a":{}}}}}}}}`,
			[]string{"a", "b", "extra", "score", "zeta"}},
		{"no spec: the reports' fields sorted", "", []string{"extra", "score", "zeta"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := report.New("task/x", json.RawMessage(tt.spec), reports).Columns; !slices.Equal(got, tt.want) {
				t.Errorf("columns %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBodyFilesAreUnique(t *testing.T) {
	reports := []state.Report{
		{Repository: "README", Status: state.ReportValid, Body: "x"},
		{Unit: "team-a", Repository: "api", Status: state.ReportValid, Body: "x"},
		{Unit: "team-b", Repository: "api", Status: state.ReportValid, Body: "x"},
		{Repository: "api", Target: "users", Status: state.ReportValid, Body: "x"},
		{Repository: "API", Target: "USERS", Status: state.ReportValid, Body: "x"},
		{Repository: "gone", Status: state.ReportFailed, Error: "clone failed"},
	}
	got := map[string]string{}
	for _, r := range report.New("campaign/x", nil, reports).Rows {
		got[r.Unit+"/"+r.Repository+"/"+r.Target] = r.BodyFile
	}
	// Rows are sorted: "API" before "api", whose name is then taken.
	want := map[string]string{"/README/": "README-2.md", "team-a/api/": "team-a__api.md", "team-b/api/": "team-b__api.md",
		"/api/users": "api__users-2.md", "/API/USERS": "API__USERS.md", "/gone/": ""}
	if !maps.Equal(got, want) {
		t.Errorf("body files %q, want %q", got, want)
	}
}

func TestOnlyOneTarget(t *testing.T) {
	reports := []state.Report{
		{Repository: "monolith", Target: "users-api", Status: state.ReportValid},
		{Repository: "monolith", Target: "orders-api", Status: state.ReportMissing},
	}
	tb := report.New("task/x", nil, reports)
	if err := tb.Only("orders-api"); err != nil || len(tb.Rows) != 1 || tb.Rows[0].Status != state.ReportMissing {
		t.Fatalf("Only(orders-api): %v, %+v", err, tb.Rows)
	}
	tb = report.New("task/x", nil, reports)
	if err := tb.Only("payments-api"); err == nil || !strings.Contains(err.Error(), `no for_each target "payments-api" (it has orders-api, users-api)`) {
		t.Errorf("Only(payments-api): %v", err)
	}
	if err := report.New("task/y", nil, []state.Report{{Repository: "a"}}).Only("x"); err == nil || !strings.Contains(err.Error(), "task/y has no for_each targets") {
		t.Errorf("Only on a run without targets: %v", err)
	}
}

// Values from the work stay text in the markdown views: no link, no
// HTML, no broken table.
func TestMarkdownQuotesTheWork(t *testing.T) {
	reports := []state.Report{{Repository: "evil|repo", Status: state.ReportInvalid,
		Frontmatter:      json.RawMessage(`{"score":"<img src=x>|[click](https://evil.example)"}`),
		ValidationErrors: []string{"/score: got string | want integer"}, Raw: "```\nbreakout\n"}}
	tb := report.New("task/x", json.RawMessage(auditSpec), reports)
	page := tb.Markdown()
	for _, bad := range []string{"<img", "[click](", "evil|repo", "string | want"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q unquoted:\n%s", bad, page)
		}
	}
	body := tb.Body(0)
	if !strings.Contains(body, "````markdown\n```\nbreakout\n````") {
		t.Errorf("the raw text is not fenced apart:\n%s", body)
	}
}

// The acceptance table: valid, failing its schema, empty; a missing
// report, a repository that failed to clone, one not run yet; and a
// campaign of groups with for_each targets.
func TestGolden(t *testing.T) {
	cases := map[string]*report.Table{
		"task": report.New("task/auth-audit", json.RawMessage(auditSpec), []state.Report{
			{Repository: "billing", Status: state.ReportValid, Frontmatter: json.RawMessage(`{"auth_library":"oauth2-proxy","score":8,"issues":[{"severity":"low","location":"main.go:3"}]}`),
				Body: "# Authentication audit: billing\n\nUses **oauth2-proxy**; one low finding.\n"},
			{Repository: "payments", Status: state.ReportInvalid, Frontmatter: json.RawMessage(`{"auth_library":"custom","score":11}`),
				Raw: "---\nauth_library: custom\nscore: 11\n---\n\n# Audit\n", Error: "frontmatter does not match output.schema: /score: maximum: got 11, want 10",
				ErrorKind: protocol.ReportSchemaInvalid, ValidationErrors: []string{"/score: maximum: got 11, want 10"}},
			{Repository: "search", Status: state.ReportEmpty, Warning: protocol.ReportEmptyWarning},
			{Repository: "ledger", Status: state.ReportMissing, Error: "REPORT.md was not written; the agent's output ends:\nI could not find any authentication code",
				ErrorKind: protocol.ReportMissing},
			{Repository: "legacy", Status: state.ReportFailed, Error: "clone file:///srv/legacy.git: repository not found"},
			{Repository: "web", Status: state.ReportPending},
		}),
		"campaign": report.New("campaign/api-endpoint-audit", nil, []state.Report{
			{Unit: "team-a", Repository: "monolith", Target: "users-api", Status: state.ReportValid,
				Frontmatter: json.RawMessage(`{"endpoint":"/api/users","has_rate_limiting":true,"issue_count":2}`), Body: "# users-api\n\nTwo issues.\n"},
			{Unit: "team-a", Repository: "monolith", Target: "orders-api", Status: state.ReportValid,
				Frontmatter: json.RawMessage(`{"endpoint":"/api/orders","has_rate_limiting":false,"issue_count":0}`), Body: "# orders-api\n"},
			{Unit: "team-b", Repository: "team-b", Status: state.ReportSkipped},
		}),
	}
	for name, tb := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string]string{}
			for f, content := range tb.Files() {
				files[f] = content
			}
			var text, bodies, js, csv bytes.Buffer
			if err := tb.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			if err := tb.WriteText(&bodies, true); err != nil {
				t.Fatal(err)
			}
			if err := tb.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := tb.WriteCSV(&csv); err != nil {
				t.Fatal(err)
			}
			files["table.txt"], files["table-with-bodies.txt"], files["table.json"], files["table.csv"] = text.String(), bodies.String(), js.String(), csv.String()
			golden(t, filepath.Join("testdata", name), files)
		})
	}
}

// golden compares files with the directory dir, or rewrites it with
// -update.
func golden(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if *update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if len(entries) != len(files) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %q; the table makes %d files (run go test -update if the change is intended)", dir, names, len(files))
	}
	for name, content := range files {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v (run go test -update if the change is intended)", err)
			continue
		}
		if string(want) != content {
			t.Errorf("%s differs (run go test -update if the change is intended):\n%s", filepath.Join(dir, name), content)
		}
	}
}
