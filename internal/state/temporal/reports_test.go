package temporal

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/state"
)

// What a run recorded of a repository shows as its reports: what
// `fleetlift reports` and the status mirror list.
func TestReportsOf(t *testing.T) {
	valid := &protocol.Report{Frontmatter: map[string]any{"score": 8}, Body: "# Audit", Raw: "---\nscore: 8\n---\n# Audit"}
	tests := []struct {
		name string
		in   reportOutcome
		want []state.Report
	}{
		{"valid report", reportOutcome{Repository: "api", Status: "success", Report: valid},
			[]state.Report{{Repository: "api", Status: state.ReportValid, Frontmatter: json.RawMessage(`{"score":8}`), Body: "# Audit"}}},
		{"schema violation keeps the raw text and the violations",
			reportOutcome{Unit: "api", Repository: "api", Status: "failed", Error: "frontmatter does not match output.schema", ErrorKind: protocol.ReportSchemaInvalid,
				Report: &protocol.Report{Frontmatter: map[string]any{"score": 11}, Raw: "---\nscore: 11\n---\n", ValidationErrors: []string{"/score: maximum: got 11, want 10"}}},
			[]state.Report{{Unit: "api", Repository: "api", Status: state.ReportInvalid, Frontmatter: json.RawMessage(`{"score":11}`), Raw: "---\nscore: 11\n---\n",
				Error: "frontmatter does not match output.schema", ErrorKind: protocol.ReportSchemaInvalid, ValidationErrors: []string{"/score: maximum: got 11, want 10"}}}},
		{"empty report is flagged",
			reportOutcome{Repository: "web", Status: "success", Report: &protocol.Report{Warning: protocol.ReportEmptyWarning}},
			[]state.Report{{Repository: "web", Status: state.ReportEmpty, Warning: protocol.ReportEmptyWarning}}},
		{"missing report",
			reportOutcome{Repository: "web", Status: "failed", Error: "REPORT.md was not written", ErrorKind: protocol.ReportMissing},
			[]state.Report{{Repository: "web", Status: state.ReportMissing, Error: "REPORT.md was not written", ErrorKind: protocol.ReportMissing}}},
		{"clone failed", reportOutcome{Repository: "gone", Status: "failed", Error: "clone: not found"},
			[]state.Report{{Repository: "gone", Status: state.ReportFailed, Error: "clone: not found"}}},
		{"still running", reportOutcome{Repository: "api", Status: "running"},
			[]state.Report{{Repository: "api", Status: state.ReportPending}}},
		{"a target whose report is the transformation repository's", reportOutcome{Repository: "server", Status: "success"}, nil},
		{"for_each targets in their order", reportOutcome{Repository: "monolith", Status: "failed", Error: "1 of 2 reports failed",
			ForEach: []protocol.ForEachResult{
				{Name: "users-api", Report: valid},
				{Name: "orders-api", Error: "REPORT.md was not written", ErrorKind: protocol.ReportMissing},
			}},
			[]state.Report{
				{Repository: "monolith", Target: "users-api", Status: state.ReportValid, Frontmatter: json.RawMessage(`{"score":8}`), Body: "# Audit"},
				{Repository: "monolith", Target: "orders-api", Status: state.ReportMissing, Error: "REPORT.md was not written", ErrorKind: protocol.ReportMissing},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reportsOf(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("reportsOf =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}
