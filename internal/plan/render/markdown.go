package render

import (
	"fmt"
	"github.com/fleetlift/fleetlift/internal/markdown"
	"html"
	"io"
	"strings"

	"github.com/fleetlift/fleetlift/internal/plan"
)

// markdownWidth is how many characters of a value a field diff shows.
const markdownWidth = 100

// markdownRepos is how many repositories a list shows before "… and N
// more", so that a comment stays within a forge's size limit.
const markdownRepos = 50

// Markdown writes the plan as a pull-request comment.
func Markdown(w io.Writer, p plan.Plan) error {
	var b strings.Builder
	b.WriteString("### fleetlift plan\n\n")
	b.WriteString("**" + SummaryLine(p) + "**\n")
	for _, l := range []string{assumedLine(p), approvalsLine(p), errorsLine(p)} {
		if l != "" {
			b.WriteString("\n" + text(l) + "\n")
		}
	}

	var listed []plan.Change
	for _, c := range p.Changes {
		if shown(c) {
			listed = append(listed, c)
		}
	}
	if len(listed) > 0 {
		b.WriteString("\n| | Campaign | Kind | Action | File |\n|:-:|---|---|---|---|\n")
		for _, c := range listed {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", code(symbol(c.Action)), cell(code(c.ID)), c.Kind, action(c), cell(code(c.File)))
		}
		if n := p.Summary().Unchanged - renamedUnchanged(listed); n > 0 {
			fmt.Fprintf(&b, "\n%s unchanged.\n", plural(n, "other campaign"))
		}
		for _, c := range listed {
			details(&b, c)
		}
	}

	if len(p.Errors) > 0 {
		b.WriteString("\n#### Errors\n\n")
		for _, e := range p.Errors {
			loc := e.File
			if e.Line > 0 {
				loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, max(e.Column, 1))
			}
			msg := e.Msg
			if e.Field != "" {
				msg = e.Field + ": " + msg
			}
			fmt.Fprintf(&b, "- %s: %s\n", code(loc), text(msg))
		}
	}

	if len(p.Approvals) > 0 {
		b.WriteString("\n#### Approvals\n\n| | Target | Action | By | File | Result |\n|:-:|---|---|---|---|---|\n")
		for _, a := range p.Approvals {
			r := a.Record
			mark, result := "✓", "applies"
			switch a.Status {
			case plan.ApprovalDone:
				result = "done: " + a.Reason
			case plan.ApprovalIgnored:
				mark, result = "✗", "ignored: "+a.Reason
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mark, cell(code(r.Target)), r.Action, cell(text(r.By)), cell(code(r.File)), cell(text(result)))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func renamedUnchanged(cs []plan.Change) int {
	n := 0
	for _, c := range cs {
		if c.Action == plan.Unchanged {
			n++
		}
	}
	return n
}

// action names the action in the table: "update (in_place)".
func action(c plan.Change) string {
	switch {
	case c.Action == plan.Update && c.Phase.Done():
		return "update (new run)"
	case c.Action == plan.Update, c.SpecChanged() && (c.Action == plan.Suspend || c.Action == plan.Resume):
		return fmt.Sprintf("%s (%s)", c.Action, c.Strategy)
	case c.Action == plan.Create && c.Suspend:
		return "create (suspended)"
	case c.Action == plan.Unchanged && c.PreviousFile != "":
		return "unchanged (renamed)"
	}
	return string(c.Action)
}

func details(b *strings.Builder, c plan.Change) {
	fmt.Fprintf(b, "\n<details><summary><code>%s %s</code> %s</summary>\n\n",
		html.EscapeString(symbol(c.Action)), html.EscapeString(c.ID), html.EscapeString(headline(c)))
	about := origin(c)
	if e := effect(c); e != "" {
		about += ": " + e
	}
	b.WriteString(text(about) + "\n")
	if c.PreviousFile != "" {
		b.WriteString("\nFile renamed from " + code(c.PreviousFile) + ".\n")
	}
	if l := digestLine(c); l != "" {
		b.WriteString("\n" + text(l) + "\n")
	}
	if l := costLine(c); l != "" {
		b.WriteString("\n" + text(l) + "\n")
	}
	if l := mergeLine(c); l != "" {
		b.WriteString("\n" + text(l) + "\n")
	}
	if l := keepCurrentLine(c); l != "" {
		b.WriteString("\n" + text(l) + "\n")
	}
	if l := closeLine(c); l != "" {
		b.WriteString("\n" + text(l) + "\n")
	}
	if len(c.Fields) > 0 {
		var d strings.Builder
		for _, f := range c.Fields {
			old, cur := shorten(f.Old, f.New, markdownWidth)
			if f.Old != nil {
				d.WriteString("- " + f.Path + ": " + old + "\n")
			}
			if f.New != nil {
				d.WriteString("+ " + f.Path + ": " + cur + "\n")
			}
		}
		b.WriteString("\n" + fence(d.String(), "diff"))
	}
	if r := c.Repositories; !r.Empty() {
		if c.Action == plan.Create {
			fmt.Fprintf(b, "\nRepositories (%d):\n\n", len(r.Added))
		} else {
			fmt.Fprintf(b, "\nRepositories: %d added, %d removed\n\n", len(r.Added), len(r.Removed))
		}
		var d strings.Builder
		list := func(sym string, names []string) {
			for i, n := range names {
				if i == markdownRepos && len(names) > markdownRepos+1 {
					fmt.Fprintf(&d, "%s … and %d more\n", sym, len(names)-markdownRepos)
					return
				}
				d.WriteString(sym + " " + n + "\n")
			}
		}
		list("+", r.Added)
		list("-", r.Removed)
		b.WriteString(fence(d.String(), "diff"))
	}
	b.WriteString("\n</details>\n")
}

// The Markdown quoting every renderer shares.
var (
	code  = markdown.Code
	fence = markdown.Fence
	text  = markdown.Text
	cell  = markdown.Cell
)
