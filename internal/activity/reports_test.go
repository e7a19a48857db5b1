package activity_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

const scoreSchema = `{
  "type": "object",
  "required": ["score"],
  "properties": {
    "score": {"type": "integer", "minimum": 1, "maximum": 10},
    "target": {"type": "string"}
  }
}`

func report(fm map[string]any) *protocol.Report {
	return &protocol.Report{Frontmatter: fm, Body: "findings", Raw: "---\n...\n---\nfindings"}
}

// The control plane, not the sandbox, decides whether a report matches
// output.schema: ReadResult checks every report's frontmatter, fails the
// ones that do not match, and replaces whatever the sandbox said.
func TestReadResultChecksReports(t *testing.T) {
	score := func(v any) map[string]any { return map[string]any{"score": v} }
	svc := func(rr protocol.RepositoryResult) protocol.RepositoryResult {
		rr.Name = "svc"
		if rr.Status == "" {
			rr.Status = "success"
		}
		return rr
	}
	tests := []struct {
		name   string
		recipe bool
		// in is the phase the agent wrote: complete unless set.
		in    protocol.Phase
		repos []protocol.RepositoryResult
		// want are the repositories' status, error and error kind, and
		// each report's validation errors, as "status|error|kind|errors".
		want  []string
		phase protocol.Phase
	}{
		{
			name:  "a matching report",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Report: report(score(8))})},
			want:  []string{"success|||"},
			phase: protocol.PhaseComplete,
		},
		{
			name:  "a violation fails the repository and so the result",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Report: report(score(11))})},
			want: []string{"failed|frontmatter does not match output.schema: /score: maximum: got 11, want 10|schema_invalid|" +
				"/score: maximum: got 11, want 10"},
			phase: protocol.PhaseFailed,
		},
		{
			name:  "every violation is listed",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Report: report(map[string]any{"target": 5})})},
			want: []string{"failed|frontmatter does not match output.schema: /target: got number, want string; missing property 'score'|schema_invalid|" +
				"/target: got number, want string;missing property 'score'"},
			phase: protocol.PhaseFailed,
		},
		{
			name: "the sandbox's verdict is not taken",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Report: &protocol.Report{
				Frontmatter: score(8), Raw: "x", Body: "x", ValidationErrors: []string{"/score: said by the sandbox"}}})},
			want:  []string{"success|||"},
			phase: protocol.PhaseComplete,
		},
		{
			// result.json leaves an empty mapping out.
			name:  "empty frontmatter over a body is checked as an empty mapping",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Report: report(nil)})},
			want:  []string{"failed|frontmatter does not match output.schema: missing property 'score'|schema_invalid|missing property 'score'"},
			phase: protocol.PhaseFailed,
		},
		{
			name: "an empty report is flagged by the agent, not checked",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Report: &protocol.Report{
				Raw: "", Warning: protocol.ReportEmptyWarning}})},
			want:  []string{"success|||"},
			phase: protocol.PhaseComplete,
		},
		{
			name: "a repository the agent failed keeps its error",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Status: "failed", Error: "agent exited with status 2",
				Report: report(score(0))})},
			want:  []string{"failed|agent exited with status 2||/score: minimum: got 0, want 1"},
			phase: protocol.PhaseComplete, // the agent said so; nothing new failed the result
		},
		{
			name: "one report of two failing fails only its repository",
			repos: []protocol.RepositoryResult{
				{Name: "api", Status: "success", Report: report(score(3))},
				{Name: "web", Status: "success", Report: report(score("high"))},
			},
			want: []string{"success|||",
				"failed|frontmatter does not match output.schema: /score: got string, want integer|schema_invalid|/score: got string, want integer"},
			phase: protocol.PhaseComplete,
		},
		{
			name: "a for_each entry that fails fails its repository",
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{
				ForEach: []protocol.ForEachResult{
					{Name: "users", Report: report(score(2))},
					{Name: "orders", Report: report(score(12))},
				}})},
			want:  []string{"failed|1 of 2 reports failed||;/score: maximum: got 12, want 10"},
			phase: protocol.PhaseFailed,
		},
		{
			name: "for_each entries that fail count with those the agent failed",
			in:   protocol.PhaseFailed,
			repos: []protocol.RepositoryResult{svc(protocol.RepositoryResult{Status: "failed", Error: protocol.ReportsFailed(1, 3),
				ForEach: []protocol.ForEachResult{
					{Name: "users", Report: report(score(2))},
					{Name: "orders", Report: report(score(12))},
					{Name: "carts", Error: "REPORT.md was not written", ErrorKind: protocol.ReportMissing},
				}})},
			want:  []string{"failed|2 of 3 reports failed||;/score: maximum: got 12, want 10;"},
			phase: protocol.PhaseFailed,
		},
		{
			name:   "a report over targets is judged by the transformation repository",
			recipe: true,
			repos: []protocol.RepositoryResult{
				{Name: "api", Status: "success"},
				{Name: "recipe", Status: "success", Report: report(score(-1))},
			},
			want:  []string{"success|||", "failed|frontmatter does not match output.schema: /score: minimum: got -1, want 1|schema_invalid|/score: minimum: got -1, want 1"},
			phase: protocol.PhaseFailed,
		},
	}
	a, env := newActivities(t)
	ref := start(t, a, env, "reports", "awaiting_input")
	waitFor(t, a, env, ref, protocol.PhaseAwaitingInput)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := cmp.Or(tt.in, protocol.PhaseComplete)
			r := protocol.Result{Status: in, Repositories: tt.repos}
			if in == protocol.PhaseFailed {
				r.Error = "svc: " + tt.repos[0].Error
			}
			data, _ := json.Marshal(r)
			if err := a.Sandbox.CopyTo(t.Context(), ref.ID, bytes.NewReader(data), ".fleetlift/"+protocol.ResultFile); err != nil {
				t.Fatal(err)
			}
			m := protocol.Manifest{Mode: protocol.ModeReport, Output: &protocol.Output{Schema: json.RawMessage(scoreSchema)}}
			if tt.recipe {
				m.Transformation = &protocol.Repository{Name: "recipe"}
			}
			v, err := env.ExecuteActivity(a.ReadResult, activity.ReadResultInput{Sandbox: ref, Reports: activity.ReportCheckOf(m)})
			if err != nil {
				t.Fatal(err)
			}
			var got protocol.Result
			if err := v.Get(&got); err != nil {
				t.Fatal(err)
			}
			var states []string
			for _, rr := range got.Repositories {
				var errs []string
				if rr.Report != nil {
					errs = rr.Report.ValidationErrors
				}
				for _, fr := range rr.ForEach {
					if fr.Report != nil {
						errs = append(errs, strings.Join(fr.Report.ValidationErrors, ","))
					} else {
						errs = append(errs, "")
					}
				}
				states = append(states, strings.Join([]string{rr.Status, rr.Error, rr.ErrorKind, strings.Join(errs, ";")}, "|"))
			}
			if !slices.Equal(states, tt.want) || got.Status != tt.phase {
				t.Fatalf("result %s, repositories\n%q\nwant %s,\n%q", got.Status, states, tt.phase, tt.want)
			}
			if tt.phase == protocol.PhaseFailed && got.Error == "" {
				t.Errorf("a failed result without an error")
			}
			if len(got.Repositories[0].ForEach) > 0 {
				if fr := got.Repositories[0].ForEach[1]; fr.ErrorKind != protocol.ReportSchemaInvalid || !strings.Contains(fr.Error, "/score") {
					t.Errorf("the for_each entry that fails: %+v", fr)
				}
			}
		})
	}
}

// An agent that finished with a report the control plane fails did not
// complete: AwaitAgentResult says failed, with the summary.
func TestAwaitResultFailsWhatTheCheckFails(t *testing.T) {
	a, env := newActivities(t)
	ref := start(t, a, env, "report-fails", "complete")
	waitFor(t, a, env, ref, protocol.PhaseComplete)
	data, _ := json.Marshal(protocol.Result{Status: protocol.PhaseComplete, Repositories: []protocol.RepositoryResult{
		{Name: "svc", Status: "success", Report: report(map[string]any{"score": 42})}}})
	if err := a.Sandbox.CopyTo(t.Context(), ref.ID, bytes.NewReader(data), ".fleetlift/"+protocol.ResultFile); err != nil {
		t.Fatal(err)
	}
	m := protocol.Manifest{Mode: protocol.ModeReport, Output: &protocol.Output{Schema: json.RawMessage(scoreSchema)}}
	v, err := env.ExecuteActivity(a.AwaitAgentResult, activity.WaitInput{Sandbox: ref, Phases: []protocol.Phase{protocol.PhaseComplete},
		Reports: activity.ReportCheckOf(m)})
	if err != nil {
		t.Fatal(err)
	}
	var out activity.AgentOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != protocol.PhaseFailed || out.Status.Message != "0 succeeded, 1 failed, 0 skipped" ||
		out.Result.Status != protocol.PhaseFailed || !strings.Contains(out.Result.Error, "svc: frontmatter does not match output.schema: /score: maximum") {
		t.Fatalf("status %+v, result %s %q", out.Status, out.Result.Status, out.Result.Error)
	}
}

// A manifest whose output.schema no agent could use is refused before an
// agent gets it, without retry.
func TestSubmitManifestRefusesAnUnusableSchema(t *testing.T) {
	a, env := newActivities(t)
	ref := provision(t, a, env, activity.ProvisionInput{SandboxID: "bad-schema"})
	m := protocol.Manifest{TaskID: "bad-schema", Mode: protocol.ModeReport,
		Output: &protocol.Output{Schema: json.RawMessage(`{"type": "no-such-type"}`)}}
	_, err := env.ExecuteActivity(a.SubmitManifest, activity.SubmitManifestInput{Sandbox: ref, Manifest: m})
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) || ae.Type() != activity.ErrManifestInvalid || !ae.NonRetryable() || !strings.Contains(err.Error(), "output.schema is not a usable JSON Schema") {
		t.Fatalf("SubmitManifest: %v; want a non-retryable %s naming the schema", err, activity.ErrManifestInvalid)
	}
	if rc, err := a.Sandbox.CopyFrom(t.Context(), ref.ID, ".fleetlift/"+protocol.ManifestFile); err == nil {
		rc.Close()
		t.Error("the manifest reached the sandbox")
	}
}
