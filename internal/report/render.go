package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/fleetlift/fleetlift/internal/markdown"
	"github.com/fleetlift/fleetlift/internal/state"
)

// Widths of a cell in the text view and in the markdown page, in runes.
const (
	textCell     = 40
	markdownCell = 200
)

// fixed are the columns every view has around the frontmatter's, by
// whether the table has units and targets.
func (t *Table) head() (before []string, units, targets bool) {
	units, targets = t.hasUnits(), t.hasTargets()
	if units {
		before = append(before, "unit")
	}
	before = append(before, "repository")
	if targets {
		before = append(before, "target")
	}
	return append(before, "status"), units, targets
}

func (t *Table) lead(r Row, units, targets bool) []string {
	var out []string
	if units {
		out = append(out, r.Unit)
	}
	out = append(out, r.Repository)
	if targets {
		out = append(out, r.Target)
	}
	return append(out, string(r.Status))
}

// WriteText writes the table for a terminal, then the summary. With
// bodies, each report's text follows: its body, or what the agent wrote
// when it failed.
func (t *Table) WriteText(w io.Writer, bodies bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	before, units, targets := t.head()
	var hdr []string
	for _, h := range before {
		hdr = append(hdr, strings.ToUpper(h))
	}
	hdr = append(append(hdr, t.Columns...), "PROBLEMS", "BODY")
	fmt.Fprintln(tw, strings.Join(hdr, "\t"))
	for _, r := range t.Rows {
		cells := t.lead(r, units, targets)
		for _, c := range t.Columns {
			cells = append(cells, clip(tabless(r.Value(c)), textCell))
		}
		cells = append(cells, clip(tabless(strings.Join(r.Problems(), "; ")), 2*textCell), r.BodyFile)
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s\n", t.Summary())
	if !bodies {
		return nil
	}
	for _, r := range t.Rows {
		text := r.Body
		if text == "" {
			text = r.Raw
		}
		if text == "" {
			continue
		}
		fmt.Fprintf(w, "\n=== %s (%s)\n%s\n", r.title(), r.Status, strings.TrimRight(text, "\n"))
	}
	return nil
}

// tabless keeps a cell in its column.
func tabless(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

// title names a report: "team-a/api", "monolith (users-api)".
func (r Row) title() string {
	s := r.Repository
	if r.Unit != "" && r.Unit != r.Repository {
		s = r.Unit + "/" + s
	}
	if r.Target != "" {
		s += " (" + r.Target + ")"
	}
	return s
}

// jsonTable is the JSON view.
type jsonTable struct {
	ID      string                     `json:"id"`
	Columns []string                   `json:"columns"`
	Summary map[state.ReportStatus]int `json:"summary"`
	Reports []Row                      `json:"reports"`
}

// WriteJSON writes the table for scripts: the run, the columns, the count
// of each status, and every report with its frontmatter, body, errors and
// body file.
func (t *Table) WriteJSON(w io.Writer) error {
	out := jsonTable{ID: t.ID, Columns: t.Columns, Summary: t.counts(), Reports: t.Rows}
	if out.Columns == nil {
		out.Columns = []string{}
	}
	if out.Reports == nil {
		out.Reports = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// WriteCSV writes one line per report: unit, repository, target, status,
// the frontmatter's columns, the problems (joined with "; ") and the body
// file. A frontmatter string is as it is, any other value JSON.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	hdr := append(append([]string{"unit", "repository", "target", "status"}, t.Columns...), "problems", "body_file")
	if err := cw.Write(hdr); err != nil {
		return err
	}
	for _, r := range t.Rows {
		rec := []string{r.Unit, r.Repository, r.Target, string(r.Status)}
		for _, c := range t.Columns {
			v := ""
			if f, ok := r.fields[c]; ok {
				v = jsonText(f)
			}
			rec = append(rec, v)
		}
		rec = append(rec, strings.Join(r.Problems(), "; "), r.BodyFile)
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Markdown is the report page: the table, each report linked to its body
// file, and the problems of every report that has any.
func (t *Table) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Reports of %s\n\n", markdown.Code(t.ID))
	fmt.Fprintf(&b, "%s.\n", markdown.Text(t.Summary()))
	if len(t.Rows) == 0 {
		return b.String()
	}
	before, units, targets := t.head()
	b.WriteString("\n|")
	for _, h := range before {
		b.WriteString(" " + strings.ToUpper(h[:1]) + h[1:] + " |")
	}
	for _, c := range t.Columns {
		b.WriteString(" " + markdown.Cell(markdown.Code(c)) + " |")
	}
	b.WriteString(" Problems | Report |\n|")
	b.WriteString(strings.Repeat("---|", len(before)+len(t.Columns)+2))
	b.WriteString("\n")
	for _, r := range t.Rows {
		cells := t.lead(r, units, targets)
		for i := range cells {
			if i < len(cells)-1 {
				cells[i] = markdown.Code(cells[i])
			} else {
				cells[i] = statusText(r.Status)
			}
		}
		for _, c := range t.Columns {
			cells = append(cells, markdown.Text(clip(r.Value(c), markdownCell)))
		}
		cells = append(cells, markdown.Text(clip(strings.Join(r.Problems(), "; "), markdownCell)))
		link := ""
		if r.BodyFile != "" {
			link = fmt.Sprintf("[%s](%s)", markdown.Text(r.BodyFile), r.BodyFile)
		}
		cells = append(cells, link)
		b.WriteString("|")
		for _, c := range cells {
			b.WriteString(" " + markdown.Cell(c) + " |")
		}
		b.WriteString("\n")
	}
	// A report that was not collected has no file of its own: why, in
	// full (a missing report's error quotes the agent's output), is here.
	first := true
	for _, r := range t.Rows {
		if r.BodyFile != "" || r.Error == "" {
			continue
		}
		if first {
			b.WriteString("\n## Not collected\n")
			first = false
		}
		fmt.Fprintf(&b, "\n### %s: %s\n\n", markdown.Text(r.title()), string(r.Status))
		b.WriteString(markdown.Fence(strings.TrimRight(r.Error, "\n")+"\n", "text"))
	}
	return b.String()
}

func statusText(s state.ReportStatus) string {
	switch s {
	case state.ReportValid:
		return "valid"
	case state.ReportEmpty:
		return "**empty** (look at it)"
	case state.ReportInvalid, state.ReportMissing, state.ReportFailed:
		return "**" + string(s) + "**"
	}
	return string(s)
}

// Body is the markdown file of row i: which report it is, its
// frontmatter as a table, what is wrong with it, and the body as the
// agent wrote it, or (for a report that failed) its raw text in a fence.
func (t *Table) Body(i int) string {
	r := t.Rows[i]
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", markdown.Text(r.title()))
	fmt.Fprintf(&b, "[Reports of %s](%s): %s.\n", markdown.Code(t.ID), PageFile, statusText(r.Status))
	if len(r.fields) > 0 {
		b.WriteString("\n| Field | Value |\n|---|---|\n")
		for _, c := range t.Columns {
			if v, ok := r.fields[c]; ok {
				fmt.Fprintf(&b, "| %s | %s |\n", markdown.Cell(markdown.Code(c)), markdown.Cell(markdown.Text(jsonText(v))))
			}
		}
	}
	if p := r.Problems(); len(p) > 0 {
		b.WriteString("\n")
		for _, line := range p {
			fmt.Fprintf(&b, "- %s\n", markdown.Text(line))
		}
	}
	switch {
	case r.Status == state.ReportValid || r.Status == state.ReportEmpty:
		if r.Body != "" {
			b.WriteString("\n" + strings.TrimRight(r.Body, "\n") + "\n")
		}
	case r.Raw != "":
		b.WriteString("\nWhat the agent wrote:\n\n")
		b.WriteString(markdown.Fence(strings.TrimRight(r.Raw, "\n")+"\n", "markdown"))
	}
	return b.String()
}

// jsonText is a value in full: a string as it is, anything else as JSON.
func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Files are the page (PageFile) and every body file, by name.
func (t *Table) Files() map[string]string {
	files := map[string]string{PageFile: t.Markdown()}
	for i, r := range t.Rows {
		if r.BodyFile != "" {
			files[r.BodyFile] = t.Body(i)
		}
	}
	return files
}
