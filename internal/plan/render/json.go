package render

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// FormatVersion is the version of the JSON view's format.
const FormatVersion = 1

type jsonPlan struct {
	FormatVersion int            `json:"format_version"`
	HasChanges    bool           `json:"has_changes"`
	Summary       jsonSummary    `json:"summary"`
	Campaigns     []jsonCampaign `json:"campaigns"`
	Approvals     []jsonApproval `json:"approvals"`
	Errors        []jsonError    `json:"errors"`
	// Recorded is left out when the caller did not say.
	Recorded *jsonRecorded `json:"recorded_state,omitempty"`
}

type jsonRecorded struct {
	Source  string `json:"source"`
	Assumed string `json:"assumed,omitempty"`
}

type jsonSummary struct {
	Create           int `json:"create"`
	Update           int `json:"update"`
	Suspend          int `json:"suspend"`
	Resume           int `json:"resume"`
	Unchanged        int `json:"unchanged"`
	Reopen           int `json:"reopen"`
	Prune            int `json:"prune"`
	Orphaned         int `json:"orphaned"`
	Unknown          int `json:"unknown"`
	ApprovalsApplied int `json:"approvals_applied"`
	ApprovalsIgnored int `json:"approvals_ignored"`
	ApprovalsDone    int `json:"approvals_done"`
	Errors           int `json:"errors"`
}

type jsonCampaign struct {
	ID           string      `json:"id"`
	Kind         string      `json:"kind"`
	Action       string      `json:"action"`
	File         string      `json:"file"`
	PreviousFile string      `json:"previous_file,omitempty"`
	OldDigest    string      `json:"old_digest,omitempty"`
	NewDigest    string      `json:"new_digest,omitempty"`
	Strategy     string      `json:"strategy,omitempty"`
	Suspend      bool        `json:"suspend"`
	Phase        string      `json:"phase,omitempty"`
	Reason       string      `json:"reason,omitempty"`
	FieldsKnown  bool        `json:"fields_known"`
	Fields       []jsonField `json:"fields"`
	Repositories jsonRepos   `json:"repositories"`
	Cost         *jsonCost   `json:"cost,omitempty"`
	// Merge is the definition's pull_request.merge, as declared.
	Merge *spec.Merge `json:"merge,omitempty"`
	// KeepCurrent is the definition's pull_request.keep_current, as
	// declared; left out for never.
	KeepCurrent string `json:"keep_current,omitempty"`
	// Closes is what a prune closes.
	Closes *plan.Close `json:"closes,omitempty"`
	// Reopen names a reopen's units: those whose done_when regressed.
	Reopen []string `json:"reopen,omitempty"`
}

// jsonCost is plan.Cost; projected_usd and per_repository_usd are left
// out when no recorded run priced its calls.
type jsonCost struct {
	Repositories     int      `json:"repositories"`
	ProjectedUSD     *float64 `json:"projected_usd,omitempty"`
	PerRepositoryUSD *float64 `json:"per_repository_usd,omitempty"`
	From             string   `json:"from,omitempty"`
	BudgetUSD        float64  `json:"max_cost_per_campaign,omitempty"`
	PerTaskUSD       float64  `json:"max_cost_per_task,omitempty"`
}

type jsonField struct {
	Path string          `json:"path"`
	Old  json.RawMessage `json:"old,omitempty"`
	New  json.RawMessage `json:"new,omitempty"`
}

type jsonRepos struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
}

type jsonApproval struct {
	File          string `json:"file"`
	Target        string `json:"target"`
	Action        string `json:"action"`
	By            string `json:"by"`
	ResultDigest  string `json:"result_digest,omitempty"`
	Generation    int64  `json:"generation,omitempty"`
	Prompt        string `json:"prompt,omitempty"`
	Status        string `json:"status"`
	Reason        string `json:"reason,omitempty"`
	CurrentDigest string `json:"current_digest,omitempty"`
}

type jsonError struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// JSON writes the plan in the documented JSON format (see the package
// comment), indented, with a trailing newline.
func JSON(w io.Writer, p plan.Plan) error {
	s := p.Summary()
	out := jsonPlan{
		FormatVersion: FormatVersion,
		HasChanges:    p.HasChanges(),
		Summary: jsonSummary{
			Create: s.Create, Update: s.Update, Suspend: s.Suspend, Resume: s.Resume, Unchanged: s.Unchanged, Reopen: s.Reopen,
			Prune: s.Prune, Orphaned: s.Orphaned, Unknown: s.Unknown,
			ApprovalsApplied: s.ApprovalsApplied, ApprovalsIgnored: s.ApprovalsIgnored, ApprovalsDone: s.ApprovalsDone, Errors: s.Errors,
		},
		Campaigns: make([]jsonCampaign, 0, len(p.Changes)),
		Approvals: make([]jsonApproval, 0, len(p.Approvals)),
		Errors:    make([]jsonError, 0, len(p.Errors)),
	}
	if p.Recorded.Source != "" {
		out.Recorded = &jsonRecorded{Source: p.Recorded.Source, Assumed: p.Recorded.Assumed}
	}
	for _, c := range p.Changes {
		jc := jsonCampaign{
			ID: c.ID, Kind: string(c.Kind), Action: string(c.Action), File: c.File, PreviousFile: c.PreviousFile,
			OldDigest: c.OldDigest, NewDigest: c.NewDigest, Strategy: string(c.Strategy), Suspend: c.Suspend,
			Phase: string(c.Phase), Reason: c.Reason, FieldsKnown: c.FieldsKnown,
			Fields:       make([]jsonField, 0, len(c.Fields)),
			Repositories: jsonRepos{Added: nonNil(c.Repositories.Added), Removed: nonNil(c.Repositories.Removed)},
		}
		for _, f := range c.Fields {
			jc.Fields = append(jc.Fields, jsonField{Path: f.Path, Old: f.Old, New: f.New})
		}
		if cost := c.Cost; cost != nil {
			jc.Cost = &jsonCost{Repositories: cost.Repositories, From: cost.From, BudgetUSD: cost.Budget, PerTaskUSD: cost.PerTask}
			if projected, ok := cost.Projected(); ok {
				jc.Cost.ProjectedUSD, jc.Cost.PerRepositoryUSD = &projected, &cost.PerRepository
			}
		}
		jc.Merge, jc.KeepCurrent, jc.Closes, jc.Reopen = c.Merge, c.KeepCurrent, c.Closes, c.Reopen
		out.Campaigns = append(out.Campaigns, jc)
	}
	for _, a := range p.Approvals {
		r := a.Record
		out.Approvals = append(out.Approvals, jsonApproval{
			File: r.File, Target: r.Target, Action: string(r.Action), By: r.By, ResultDigest: r.ResultDigest,
			Generation: r.Generation, Prompt: r.Prompt, Status: string(a.Status), Reason: a.Reason, CurrentDigest: a.Current,
		})
	}
	for _, e := range p.Errors {
		out.Errors = append(out.Errors, jsonError{File: e.File, Line: e.Line, Column: e.Column, Field: e.Field, Message: e.Msg})
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// quote is s as a JSON string, without HTML escaping.
func quote(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
