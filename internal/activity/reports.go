package activity

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/outputschema"
)

// ReportCheck is what ReadResult checks a result's reports against: the
// manifest's output.schema, and whether the transformation repository's
// result alone (the last) judges the outcome (protocol.Judged).
//
// The control plane checks reports itself (seed 001's collection step):
// the agent parses a report's frontmatter, but the sandbox it runs in
// could say anything about whether that matches the schema.
type ReportCheck struct {
	Schema json.RawMessage
	// OverTargets is set for a report over targets.
	OverTargets bool `json:",omitempty"`
}

// ReportCheckOf is m's ReportCheck: nil when m has no output.schema.
func ReportCheckOf(m protocol.Manifest) *ReportCheck {
	if !m.Output.HasSchema() {
		return nil
	}
	return &ReportCheck{Schema: m.Output.Schema, OverTargets: m.ReportOverTargets()}
}

// check validates the frontmatter of every report in r against the
// schema, replacing whatever validation errors the sandbox wrote. A
// report that fails fails its repository (or its for_each entry, and
// then its repository) with kind schema_invalid, unless the agent failed
// it already; and when that leaves every judged repository failed, the
// result fails.
//
// A report the agent kept as empty (protocol.ReportEmptyWarning) is not
// checked, nor one it failed for being missing or unparsable; one whose
// frontmatter is larger than a result records (maxFrontmatterBytes)
// fails unchecked.
func (c *ReportCheck) check(r *protocol.Result) {
	s, cerr := outputschema.Compile(c.Schema)
	// verdict is the error of rep, "" when it matches.
	verdict := func(rep *protocol.Report, kind string) string {
		if rep == nil {
			return ""
		}
		rep.ValidationErrors = nil
		if rep.Warning == protocol.ReportEmptyWarning || kind == protocol.ReportMissing || kind == protocol.ReportFrontmatterInvalid {
			return ""
		}
		if cerr != nil {
			return cerr.Error()
		}
		fm := rep.Frontmatter
		if fm == nil {
			// Frontmatter that parsed to nothing: an empty mapping,
			// which result.json leaves out.
			fm = map[string]any{}
		}
		// What a sandbox wrote is checked only as far as the worker
		// records it: a schema's violations are counted per value, and a
		// frontmatter of megabytes could hold millions of them.
		b, err := json.Marshal(fm)
		if err != nil {
			return "encode frontmatter: " + err.Error()
		}
		if len(b) > maxFrontmatterBytes {
			return fmt.Sprintf("the frontmatter is %d KiB, over the %d KiB the worker checks against output.schema: keep bulk data in the body",
				(len(b)+1023)>>10, maxFrontmatterBytes>>10)
		}
		problems, err := s.Validate(b)
		if err != nil {
			return "read frontmatter: " + err.Error()
		}
		if len(problems) == 0 {
			return ""
		}
		rep.ValidationErrors = problems
		return "frontmatter does not match output.schema: " + strings.Join(problems, "; ")
	}
	failedAny := false
	fail := func(rr *protocol.RepositoryResult, msg, kind string) {
		if rr.Status != "failed" {
			rr.Status, rr.Error, rr.ErrorKind = "failed", msg, kind
			failedAny = true
		}
	}
	for i := range r.Repositories {
		rr := &r.Repositories[i]
		if msg := verdict(rr.Report, rr.ErrorKind); msg != "" {
			fail(rr, msg, protocol.ReportSchemaInvalid)
		}
		before, after := 0, 0
		for j := range rr.ForEach {
			fr := &rr.ForEach[j]
			if fr.Error != "" {
				before++
			}
			if msg := verdict(fr.Report, fr.ErrorKind); msg != "" && fr.Error == "" {
				fr.Error, fr.ErrorKind = msg, protocol.ReportSchemaInvalid
			}
			if fr.Error != "" {
				after++
			}
		}
		if after > before {
			if rr.Status == "failed" && rr.Error == protocol.ReportsFailed(before, len(rr.ForEach)) {
				rr.Error = protocol.ReportsFailed(after, len(rr.ForEach))
			}
			// As the agent fails it: the entries say why.
			fail(rr, protocol.ReportsFailed(after, len(rr.ForEach)), "")
		}
	}
	if failedAny && r.Status == protocol.PhaseComplete {
		if phase, _, firstErr := protocol.Outcome(protocol.Judged(c.OverTargets, r.Repositories)); phase == protocol.PhaseFailed {
			r.Status, r.Error = phase, firstErr
		}
	}
}

// settle makes st, the agent's terminal status, say what r, its result
// after check, says: a result the control plane failed is not complete.
func (c *ReportCheck) settle(st *protocol.Status, r *protocol.Result) {
	if st.Phase == protocol.PhaseComplete && r.Status == protocol.PhaseFailed {
		msg, _, _ := protocol.Summarize(protocol.Judged(c.OverTargets, r.Repositories))
		st.Phase, st.Message = protocol.PhaseFailed, msg
	}
}

// checkSchema refuses a manifest whose output.schema cannot be used, as
// validate and plan do, before an agent works for nothing.
func checkSchema(m protocol.Manifest) error {
	if m.Output == nil {
		return nil
	}
	if _, err := outputschema.Compile(m.Output.Schema); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	return nil
}
