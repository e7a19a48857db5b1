package temporal

import (
	"encoding/json"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/state"
)

// reportOutcome is what a run recorded of one repository.
type reportOutcome struct {
	// Unit is the campaign's unit the repository ran in; empty for a
	// Task.
	Unit       string
	Repository string
	// Status is the agent's: success, failed, skipped, or pending and
	// running while it works.
	Status    string
	Error     string
	ErrorKind string
	Report    *protocol.Report
	ForEach   []protocol.ForEachResult
}

// reportsOf returns the reports of one repository: one per for_each
// target, in their order, or one. A target of a report over targets that
// succeeded has none: its report is the transformation repository's.
func reportsOf(o reportOutcome) []state.Report {
	base := state.Report{Unit: o.Unit, Repository: o.Repository}
	if len(o.ForEach) > 0 {
		out := make([]state.Report, 0, len(o.ForEach))
		for _, fe := range o.ForEach {
			r := base
			r.Target = fe.Name
			out = append(out, fill(r, fe.Report, fe.Error, fe.ErrorKind, ""))
		}
		return out
	}
	if o.Report == nil && o.Error == "" && o.Status == "success" {
		return nil
	}
	return []state.Report{fill(base, o.Report, o.Error, o.ErrorKind, o.Status)}
}

// fill completes r from what the agent collected: rep, the error and its
// kind, and (for a whole repository) the agent's status.
func fill(r state.Report, rep *protocol.Report, errMsg, kind, status string) state.Report {
	r.Error, r.ErrorKind = errMsg, kind
	if rep != nil {
		if rep.Frontmatter != nil {
			if b, err := json.Marshal(rep.Frontmatter); err == nil {
				r.Frontmatter = b
			}
		}
		r.Body = rep.Body
		r.Warning = rep.Warning
		r.ValidationErrors = append([]string(nil), rep.ValidationErrors...)
	}
	switch {
	case kind == protocol.ReportMissing:
		r.Status = state.ReportMissing
	case kind == protocol.ReportFrontmatterInvalid || kind == protocol.ReportSchemaInvalid:
		r.Status = state.ReportInvalid
	case errMsg != "" || status == "failed":
		r.Status = state.ReportFailed
	case rep == nil && status == "skipped":
		r.Status = state.ReportSkipped
	case rep == nil:
		r.Status = state.ReportPending
	case strings.Contains(rep.Warning, protocol.ReportEmptyWarning):
		r.Status = state.ReportEmpty
	default:
		r.Status = state.ReportValid
	}
	if rep != nil && r.Status != state.ReportValid && r.Status != state.ReportEmpty {
		// What the agent wrote is the diagnostic of a report that failed.
		r.Raw = rep.Raw
	}
	return r
}
