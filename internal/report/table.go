package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fleetlift/fleetlift/internal/state"
)

// PageFile is the report page's name among its files (Files): a forge
// shows a directory's README.md when it is opened.
const PageFile = "README.md"

// Table is the reports of one run.
type Table struct {
	// ID names the run: "campaign/<id>" or "task/<id>".
	ID string
	// Columns are the frontmatter fields shown: the schema's required
	// properties in their order, its other properties sorted, then
	// fields the reports have beyond the schema, sorted.
	Columns []string
	Rows    []Row
}

// Row is one report and where its body goes.
type Row struct {
	state.Report
	// BodyFile is the name of the report's own markdown file beside the
	// page ("payments.md"); empty when it has no text to show.
	BodyFile string `json:"body_file,omitempty"`

	fields map[string]any
}

// New makes the table of run id's reports, sorted by unit, repository and
// target, so that the same reports make the same table whatever their
// order; spec is the run's normalised spec (the JSON of a spec.Task or
// spec.Campaign), which names the output schema, and may be empty.
func New(id string, spec json.RawMessage, reports []state.Report) *Table {
	t := &Table{ID: id}
	reports = slices.Clone(reports)
	slices.SortStableFunc(reports, func(a, b state.Report) int {
		return cmp.Or(strings.Compare(a.Unit, b.Unit), strings.Compare(a.Repository, b.Repository), strings.Compare(a.Target, b.Target))
	})
	seen := map[string]bool{}
	add := func(col string) {
		if !seen[col] {
			seen[col] = true
			t.Columns = append(t.Columns, col)
		}
	}
	required, properties := schemaFields(spec)
	for _, c := range required {
		add(c)
	}
	for _, c := range properties {
		add(c)
	}
	var extra []string
	names := map[string]bool{strings.ToLower(strings.TrimSuffix(PageFile, ".md")): true}
	for _, r := range reports {
		row := Row{Report: r, fields: decodeObject(r.Frontmatter)}
		for k := range row.fields {
			if !seen[k] && !slices.Contains(extra, k) {
				extra = append(extra, k)
			}
		}
		if r.Body != "" || r.Raw != "" || len(row.fields) > 0 {
			row.BodyFile = uniqueName(row.Report, names) + ".md"
		}
		t.Rows = append(t.Rows, row)
	}
	sort.Strings(extra)
	for _, c := range extra {
		add(c)
	}
	return t
}

// Only keeps the rows of for_each target name; it fails when no report is
// for that target.
func (t *Table) Only(target string) error {
	var rows []Row
	var known []string
	for _, r := range t.Rows {
		if r.Target == target {
			rows = append(rows, r)
		}
		if r.Target != "" && !slices.Contains(known, r.Target) {
			known = append(known, r.Target)
		}
	}
	if len(rows) == 0 {
		if len(known) == 0 {
			return fmt.Errorf("%s has no for_each targets", t.ID)
		}
		return fmt.Errorf("%s has no for_each target %q (it has %s)", t.ID, target, strings.Join(known, ", "))
	}
	t.Rows = rows
	return nil
}

// Summary counts the reports by status: "3 reports: 1 valid, 1 invalid,
// 1 empty".
func (t *Table) Summary() string {
	counts := t.counts()
	var parts []string
	for _, s := range statuses {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	head := fmt.Sprintf("%d reports", len(t.Rows))
	if len(t.Rows) == 1 {
		head = "1 report"
	}
	if len(parts) == 0 {
		return head
	}
	return head + ": " + strings.Join(parts, ", ")
}

// statuses is the order reports are counted in.
var statuses = []state.ReportStatus{state.ReportValid, state.ReportEmpty, state.ReportInvalid, state.ReportMissing,
	state.ReportFailed, state.ReportPending, state.ReportSkipped}

func (t *Table) counts() map[state.ReportStatus]int {
	counts := map[state.ReportStatus]int{}
	for _, r := range t.Rows {
		counts[r.Status]++
	}
	return counts
}

// hasUnits reports whether any report comes from a unit named other than
// its repository (a group), so that the unit is worth a column.
func (t *Table) hasUnits() bool {
	for _, r := range t.Rows {
		if r.Unit != "" && r.Unit != r.Repository {
			return true
		}
	}
	return false
}

func (t *Table) hasTargets() bool {
	for _, r := range t.Rows {
		if r.Target != "" {
			return true
		}
	}
	return false
}

// Problems is what is wrong with the report, or what to look at in it, on
// one line each: the validation errors, else the error, else the warning.
func (r Row) Problems() []string {
	switch {
	case len(r.ValidationErrors) > 0:
		return r.ValidationErrors
	case r.Error != "":
		return []string{firstLine(r.Error)}
	case r.Warning != "":
		return []string{firstLine(r.Warning)}
	}
	return nil
}

// Value is the frontmatter field col as text (see Text).
func (r Row) Value(col string) string {
	v, ok := r.fields[col]
	if !ok {
		return ""
	}
	return Text(v)
}

// Text shows a frontmatter value on one line: scalars as they are, a list
// of scalars joined with ", ", a list of objects as its length ("2
// items"), an object as compact JSON.
func Text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			switch e.(type) {
			case map[string]any, []any:
				if len(v) == 1 {
					return "1 item"
				}
				return fmt.Sprintf("%d items", len(v))
			}
			parts = append(parts, Text(e))
		}
		return strings.Join(parts, ", ")
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}

// decodeObject decodes a frontmatter, numbers kept as written.
func decodeObject(raw json.RawMessage) map[string]any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil
	}
	return m
}

// schemaFields reads the output schema's properties out of a normalised
// spec: the required ones in their order, and the others sorted.
func schemaFields(spec json.RawMessage) (required, others []string) {
	if len(spec) == 0 {
		return nil, nil
	}
	type output struct {
		Schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"schema"`
	}
	type work struct {
		Execution struct {
			Agentic *struct {
				Output *output `json:"output"`
			} `json:"agentic"`
		} `json:"execution"`
	}
	var s struct {
		work
		Template *work `json:"template"`
	}
	if json.Unmarshal(spec, &s) != nil {
		return nil, nil
	}
	w := s.work
	if s.Template != nil {
		w = *s.Template
	}
	if w.Execution.Agentic == nil || w.Execution.Agentic.Output == nil {
		return nil, nil
	}
	sch := w.Execution.Agentic.Output.Schema
	for _, r := range sch.Required {
		if !slices.Contains(required, r) {
			required = append(required, r)
		}
	}
	for p := range sch.Properties {
		if !slices.Contains(required, p) {
			others = append(others, p)
		}
	}
	sort.Strings(others)
	return required, others
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// uniqueName names r's body file: its unit (when a group), repository and
// target joined by "__", made a plain file name and unique among taken
// (compared without case, as some file systems do).
func uniqueName(r state.Report, taken map[string]bool) string {
	var parts []string
	if r.Unit != "" && r.Unit != r.Repository {
		parts = append(parts, r.Unit)
	}
	parts = append(parts, r.Repository)
	if r.Target != "" {
		parts = append(parts, r.Target)
	}
	base := strings.Trim(unsafeName.ReplaceAllString(strings.Join(parts, "__"), "-"), ".-")
	if base == "" {
		base = "report"
	}
	name := base
	for i := 2; taken[strings.ToLower(name)]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	taken[strings.ToLower(name)] = true
	return name
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// clip shortens s to n runes, saying so with "…".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
