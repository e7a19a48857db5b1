package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/visible"
)

// humanWidth is how many characters of a value a field diff shows.
const humanWidth = 60

// humanRepos is how many repositories a list shows before "… and N more".
const humanRepos = 20

const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

type human struct {
	b     strings.Builder
	color bool
}

func (h *human) paint(code, s string) string {
	if !h.color || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (h *human) mark(sym string) string {
	switch sym {
	case "+", "✓":
		return h.paint(ansiGreen, sym)
	case "~":
		return h.paint(ansiYellow, sym)
	case "-", "!", "✗":
		return h.paint(ansiRed, sym)
	}
	return sym
}

func (h *human) line(indent int, s string) {
	h.b.WriteString(strings.Repeat(" ", indent))
	h.b.WriteString(s)
	h.b.WriteByte('\n')
}

// Human writes the plan for people at a terminal. Text from the campaigns
// repository and the recorded state (ids, files, values, errors, approval
// records) is passed through visible.String, so that it cannot act on the
// terminal; only the colours are Human's own.
func Human(w io.Writer, p plan.Plan, o Options) error {
	h := &human{color: o.Color}
	var shownChanges []plan.Change
	for _, c := range p.Changes {
		if shown(c) {
			shownChanges = append(shownChanges, c)
		}
	}
	if len(shownChanges) > 0 {
		h.line(0, "Campaigns:")
		h.line(0, "")
		for _, c := range shownChanges {
			h.change(c)
			h.line(0, "")
		}
	}
	if len(p.Errors) > 0 {
		h.line(0, "Errors:")
		h.line(0, "")
		for _, e := range p.Errors {
			h.line(2, h.mark("!")+" "+visible.String(e.Error()))
		}
		h.line(0, "")
	}
	if len(p.Approvals) > 0 {
		h.line(0, "Approvals:")
		h.line(0, "")
		for _, a := range p.Approvals {
			h.approval(a)
		}
		h.line(0, "")
	}
	for _, l := range []string{assumedLine(p), approvalsLine(p), errorsLine(p)} {
		if l != "" {
			h.line(0, visible.String(l))
		}
	}
	h.line(0, h.paint(ansiBold, SummaryLine(p)))
	_, err := io.WriteString(w, h.b.String())
	return err
}

func (h *human) change(c plan.Change) {
	h.line(2, h.mark(symbol(c.Action))+" "+h.paint(ansiBold, visible.String(c.ID))+" "+headline(c))
	about := origin(c)
	if e := effect(c); e != "" {
		about += ": " + e
	}
	h.line(6, visible.String(about))
	if c.PreviousFile != "" {
		h.line(6, "file renamed from "+visible.String(c.PreviousFile))
	}
	if l := digestLine(c); l != "" {
		h.line(6, visible.String(l))
	}
	if l := costLine(c); l != "" {
		h.line(6, visible.String(l))
	}
	if l := mergeLine(c); l != "" {
		h.line(6, visible.String(l))
	}
	if l := keepCurrentLine(c); l != "" {
		h.line(6, visible.String(l))
	}
	if l := closeLine(c); l != "" {
		h.line(6, visible.String(l))
	}
	for _, f := range c.Fields {
		h.line(6, h.field(f))
	}
	h.repos(c)
}

func (h *human) field(f plan.FieldDiff) string {
	old, cur := shorten(f.Old, f.New, humanWidth)
	switch {
	case f.Old == nil:
		return h.mark("+") + " " + visible.String(f.Path+": "+cur)
	case f.New == nil:
		return h.mark("-") + " " + visible.String(f.Path+": "+old)
	}
	return h.mark("~") + " " + visible.String(f.Path+": "+old+" → "+cur)
}

func (h *human) repos(c plan.Change) {
	r := c.Repositories
	if r.Empty() {
		return
	}
	if c.Action == plan.Create {
		h.line(6, fmt.Sprintf("repositories (%d):", len(r.Added)))
	} else {
		h.line(6, fmt.Sprintf("repositories: %d added, %d removed", len(r.Added), len(r.Removed)))
	}
	h.list("+", r.Added)
	h.list("-", r.Removed)
}

func (h *human) list(sym string, names []string) {
	for i, n := range names {
		if i == humanRepos && len(names) > humanRepos+1 {
			h.line(8, fmt.Sprintf("… and %d more (-o json lists them all)", len(names)-humanRepos))
			return
		}
		h.line(8, h.mark(sym)+" "+visible.String(n))
	}
}

func (h *human) approval(a plan.ApprovalChange) {
	r := a.Record
	s := fmt.Sprintf("%s %s", visible.String(string(r.Action)), h.paint(ansiBold, visible.String(r.Target)))
	var more string
	if r.By != "" {
		more += " by " + r.By
	}
	if r.File != "" {
		more += " (" + r.File + ")"
	}
	if r.Prompt != "" {
		q := clip([]rune(r.Prompt), 0, humanWidth)
		more += ": " + q
	}
	s += visible.String(more)
	switch a.Status {
	case plan.ApprovalApply:
		h.line(2, h.mark("✓")+" "+s)
	case plan.ApprovalDone:
		h.line(2, h.mark("✓")+" "+s)
		h.line(6, "done: "+visible.String(a.Reason))
	default:
		h.line(2, h.mark("✗")+" "+s)
		h.line(6, "ignored: "+visible.String(a.Reason))
	}
}
