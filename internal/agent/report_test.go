package agent_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// scoreSchema makes a report need frontmatter; whether the frontmatter
// matches it is the worker's to check (activity.ReportCheck).
const scoreSchema = `{"required": ["score"], "properties": {"score": {"maximum": 10}}}`

func TestParseReport(t *testing.T) {
	tests := []struct {
		name     string
		raw      string
		wantFM   map[string]any
		wantBody string
		wantKind string
	}{
		{"no frontmatter", "# Just prose\n", nil, "# Just prose", ""},
		{"frontmatter and body", "---\nscore: 3\nissues:\n  - severity: high\n---\n\n# Audit\n\nText.\n",
			map[string]any{"score": 3, "issues": []any{map[string]any{"severity": "high"}}}, "# Audit\n\nText.", ""},
		{"empty frontmatter", "---\n---\nbody\n", map[string]any{}, "body", ""},
		{"rule in the body is not a delimiter", "---\na: 1\n---\nintro\n---\nmore\n", map[string]any{"a": 1}, "intro\n---\nmore", ""},
		{"dates become strings", "---\nwhen: 2024-01-15\n---\n", map[string]any{"when": "2024-01-15T00:00:00Z"}, "", ""},
		{"unclosed", "---\nscore: 3\n# no end\n", nil, "", protocol.ReportFrontmatterInvalid},
		{"invalid YAML", "---\nscore: [1, 2\n---\n", nil, "", protocol.ReportFrontmatterInvalid},
		{"duplicate key", "---\na: 1\na: 2\n---\n", nil, "", protocol.ReportFrontmatterInvalid},
		{"not a mapping", "---\n- a\n- b\n---\n", nil, "", protocol.ReportFrontmatterInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := agent.ParseReport(tt.raw)
			if rep == nil || rep.Raw != tt.raw {
				t.Fatalf("report %+v does not keep the raw text", rep)
			}
			var re *agent.ReportError
			if tt.wantKind != "" {
				if !errors.As(err, &re) || re.Kind != tt.wantKind {
					t.Fatalf("error %v, want kind %s", err, tt.wantKind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.Frontmatter, tt.wantFM) || rep.Body != tt.wantBody {
				t.Fatalf("frontmatter %#v body %q; want %#v %q", rep.Frontmatter, rep.Body, tt.wantFM, tt.wantBody)
			}
		})
	}
}

func TestReportMode(t *testing.T) {
	tests := []struct {
		name    string
		command []string // deterministic; nil means the stand-in agent with prompt
		prompt  string
		capture string
		phase   protocol.Phase
		kind    string
		errPart string
		score   any
		rawPart string
		// warning is the report's Warning.
		warning string
	}{
		{
			name:    "valid frontmatter",
			command: sh(`printf -- '---\nscore: 8\ntarget: svc\n---\n\n# Audit\n\nAll good.\n' > REPORT.md`),
			phase:   protocol.PhaseComplete,
			score:   8,
			rawPart: "All good.",
		},
		{
			name:    "invalid YAML",
			command: sh(`printf -- '---\nscore: [8\n---\nbody\n' > REPORT.md`),
			phase:   protocol.PhaseFailed,
			kind:    protocol.ReportFrontmatterInvalid,
			errPart: "not valid YAML",
			rawPart: "score: [8",
		},
		{
			// The control plane checks the frontmatter against the
			// schema (activity.ReportCheck): the agent only parses it.
			name:    "a schema violation is left to the control plane",
			command: sh(`printf -- '---\nscore: 11\n---\nbody\n' > REPORT.md`),
			phase:   protocol.PhaseComplete,
			score:   11,
			rawPart: "score: 11",
		},
		{
			name:    "empty REPORT.md is flagged, not failed",
			command: sh(`: > REPORT.md`),
			phase:   protocol.PhaseComplete,
			warning: protocol.ReportEmptyWarning,
		},
		{
			name:    "a report with neither data nor text is flagged, not failed",
			command: sh(`printf -- '---\n---\n\n' > REPORT.md`),
			phase:   protocol.PhaseComplete,
			warning: protocol.ReportEmptyWarning,
			rawPart: "---\n---",
		},
		{
			name:    "no frontmatter although there is a schema",
			command: sh(`echo 'just prose' > REPORT.md`),
			phase:   protocol.PhaseFailed,
			kind:    protocol.ReportFrontmatterInvalid,
			errPart: "no YAML frontmatter",
		},
		{
			name:    "missing REPORT.md, with what the agent said instead",
			command: sh(`echo 'I forgot to write the report'`),
			phase:   protocol.PhaseFailed,
			kind:    protocol.ReportMissing,
			errPart: "REPORT.md was not written; the agent's output ends:\nI forgot to write the report",
		},
		{
			name:    "REPORT.md linked to /etc/passwd is not read",
			command: sh(`ln -s /etc/passwd REPORT.md`),
			phase:   protocol.PhaseFailed,
			kind:    protocol.ReportMissing,
			errPart: "symbolic link",
		},
		{
			name:    "report on standard output",
			prompt:  "Audit this. print-report",
			capture: "stdout",
			phase:   protocol.PhaseComplete,
			score:   7,
			rawPart: "Asked: Audit this. print-report",
		},
		{
			name:    "nothing on standard output",
			prompt:  "do-nothing",
			capture: "stdout",
			// The stand-in prints "nothing to do": a report without frontmatter.
			phase: protocol.PhaseFailed,
			kind:  protocol.ReportFrontmatterInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"main.go": "package main\n"})
			m := manifest(repo("svc", remote))
			m.Mode = protocol.ModeReport
			m.PullRequest = nil
			m.Output = &protocol.Output{Schema: json.RawMessage(scoreSchema), Capture: tt.capture}
			if tt.command != nil {
				m.Execution.Command = tt.command
			} else {
				m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: tt.prompt}
			}
			res := run(t, o, m)
			r := repoResult(t, res, "svc")
			if tt.kind != "" {
				if res.Status != tt.phase || r.Status != "failed" || r.ErrorKind != tt.kind || !strings.Contains(r.Error, tt.errPart) {
					t.Fatalf("phase %s, repository %s %s %q; want failed %s %q", res.Status, r.Status, r.ErrorKind, r.Error, tt.kind, tt.errPart)
				}
			} else {
				if res.Status != tt.phase || r.Status != "success" || r.Error != "" {
					t.Fatalf("phase %s, repository %s %q", res.Status, r.Status, r.Error)
				}
				if r.Report == nil || tt.score != nil && fmt.Sprint(r.Report.Frontmatter["score"]) != fmt.Sprint(tt.score) {
					t.Fatalf("report %+v, want score %v", r.Report, tt.score)
				}
			}
			if r.Report != nil && r.Report.Warning != tt.warning {
				t.Errorf("warning %q, want %q", r.Report.Warning, tt.warning)
			}
			if r.Report != nil && r.Report.ValidationErrors != nil {
				t.Errorf("the agent judged the report against the schema: %q", r.Report.ValidationErrors)
			}
			if tt.rawPart != "" && (r.Report == nil || !strings.Contains(r.Report.Raw, tt.rawPart)) {
				t.Errorf("raw report %+v lacks %q", r.Report, tt.rawPart)
			}
			if r.Report != nil && strings.Contains(r.Report.Raw, "root:") {
				t.Fatal("the report holds /etc/passwd")
			}
			if refs := gittest.Run(t, remote, "for-each-ref", "--format=%(refname)"); refs != "refs/heads/main" {
				t.Fatalf("a report run pushed: %s", refs)
			}
		})
	}
}

func TestReportForEach(t *testing.T) {
	prompt := "Assess {{.Name}} ({{ .context }}) write-report\n\nContext again: {{.Context}}, name {{.name}}."
	forEach := []protocol.ForEachTarget{
		{Name: "users-api", Context: "Focus on src/api/users/"},
		{Name: "orders-api", Context: "Focus on src/api/orders/"},
	}
	tests := []struct {
		name           string
		transformation bool
		// owners are the results that carry the reports.
		owners []string
		// reportDir is where REPORT.md is written, relative to the workspace.
		reportDir string
	}{
		{"per repository", false, []string{"api", "web"}, "web"},
		{"transformation repository and targets", true, []string{"recipe"}, "."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			parent := t.TempDir()
			api := gittest.NewRemote(t, parent, "api", map[string]string{"src/api/users/h.go": "package users\n"})
			web := gittest.NewRemote(t, parent, "web", map[string]string{"index.html": "<p>\n"})
			m := manifest(repo("api", api), repo("web", web))
			if tt.transformation {
				recipe := gittest.NewRemote(t, parent, "recipe", map[string]string{"CLAUDE.md": "skills\n"})
				m.Repositories = nil
				tr := repo("recipe", recipe)
				m.Transformation = &tr
				m.Targets = []protocol.Repository{repo("api", api), repo("web", web)}
			}
			m.Mode = protocol.ModeReport
			m.PullRequest = nil
			m.ForEach = forEach
			m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: prompt}
			m.Output = &protocol.Output{Schema: json.RawMessage(scoreSchema)}
			res := run(t, o, m)
			if res.Status != protocol.PhaseComplete {
				t.Fatalf("phase %s: %s", res.Status, res.Error)
			}
			for _, owner := range tt.owners {
				r := repoResult(t, res, owner)
				if r.Status != "success" || len(r.ForEach) != len(forEach) {
					t.Fatalf("%s: %s with %d for_each results: %+v", owner, r.Status, len(r.ForEach), r)
				}
				for i, fe := range r.ForEach {
					want := forEach[i]
					if fe.Name != want.Name || fe.Error != "" || fe.Report == nil || fe.Report.Frontmatter["target"] != want.Name {
						t.Fatalf("%s for_each %d = %+v", owner, i, fe)
					}
					asked := "Asked: Assess " + want.Name + " (" + want.Context + ") write-report"
					if !strings.Contains(fe.Report.Body, asked) {
						t.Errorf("%s: the prompt was not filled in for %s: %q", owner, want.Name, fe.Report.Body)
					}
				}
			}
			log, err := os.ReadFile(filepath.Join(o.Workspace, tt.reportDir, "AGENT_LOG.md"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{
				"Context again: Focus on src/api/orders/, name orders-api.",
				"Write your report to " + filepath.Join(resolved(t, o.Workspace), tt.reportDir, "REPORT.md"),
				"YAML frontmatter between --- delimiters",
				`"required": ["score"]`,
			} {
				if !strings.Contains(string(log), want) {
					t.Errorf("prompt lacks %q:\n%s", want, log)
				}
			}
		})
	}
}

func resolved(t *testing.T, dir string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
