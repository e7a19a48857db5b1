package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// Options change how a plan is shown.
type Options struct {
	// Color marks symbols and names with ANSI colours (Human only). Set it
	// only when writing to a terminal.
	Color bool
}

// SummaryLine is the plan's last line, as terraform's:
// "Plan: 2 to create, 1 to update, 0 to prune, 1 orphaned." or
// "No changes.". Suspend and resume count as updates.
func SummaryLine(p plan.Plan) string {
	if p.Empty() {
		return "No changes."
	}
	s := p.Summary()
	if s.Reopen > 0 {
		return fmt.Sprintf("Plan: %d to create, %d to update, %d to reopen, %d to prune, %d orphaned.",
			s.Create, s.Update+s.Suspend+s.Resume, s.Reopen, s.Prune, s.Orphaned)
	}
	return fmt.Sprintf("Plan: %d to create, %d to update, %d to prune, %d orphaned.",
		s.Create, s.Update+s.Suspend+s.Resume, s.Prune, s.Orphaned)
}

// approvalsLine counts approval records, or is "" when there are none.
func approvalsLine(p plan.Plan) string {
	s := p.Summary()
	if s.ApprovalsApplied+s.ApprovalsIgnored+s.ApprovalsDone == 0 {
		return ""
	}
	if s.ApprovalsDone > 0 {
		return fmt.Sprintf("Approvals: %d to apply, %d ignored, %d carried out.", s.ApprovalsApplied, s.ApprovalsIgnored, s.ApprovalsDone)
	}
	return fmt.Sprintf("Approvals: %d to apply, %d ignored.", s.ApprovalsApplied, s.ApprovalsIgnored)
}

// assumedLine says what the plan assumed for want of the recorded state,
// or is "" when it read it.
func assumedLine(p plan.Plan) string {
	if p.Recorded.Assumed == "" {
		return ""
	}
	return "Assumed: " + p.Recorded.Assumed
}

// errorsLine counts errors, or is "" when there are none.
func errorsLine(p plan.Plan) string {
	if len(p.Errors) == 0 {
		return ""
	}
	files := map[string]bool{}
	for _, e := range p.Errors {
		files[e.File] = true
	}
	return fmt.Sprintf("Errors: %s in %s; what they define was not planned.", plural(len(p.Errors), "error"), plural(len(files), "definition file"))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// shown reports whether a campaign has a block of its own: anything but
// unchanged, and unchanged ones whose file was renamed.
func shown(c plan.Change) bool {
	return c.Action != plan.Unchanged || c.PreviousFile != ""
}

// symbol marks an action.
func symbol(a plan.Action) string {
	switch a {
	case plan.Create:
		return "+"
	case plan.Update, plan.Suspend, plan.Resume, plan.Reopen:
		return "~"
	case plan.Prune, plan.Orphaned:
		return "-"
	case plan.Unknown:
		return "!"
	}
	return "="
}

// headline says what happens to a campaign: "will be created", "is
// orphaned".
// costLine says what an agentic change's run is projected to cost, and
// its bounds; "" for a change that starts no agent's work.
func costLine(c plan.Change) string {
	cost := c.Cost
	if cost == nil {
		return ""
	}
	repos := "1 repository"
	if cost.Repositories != 1 {
		repos = fmt.Sprintf("%d repositories", cost.Repositories)
	}
	var s string
	projected, ok := cost.Projected()
	if ok {
		s = fmt.Sprintf("cost: about %s projected (%s at %s each, from %s)", protocol.USD(projected), repos, protocol.USD(cost.PerRepository), cost.From)
	} else {
		s = fmt.Sprintf("cost: no projection for %s: no recorded run priced its model calls", repos)
	}
	var bounds []string
	switch {
	case cost.Budget > 0 && ok && projected >= cost.Budget:
		bounds = append(bounds, fmt.Sprintf("over max_cost_per_campaign %s: the campaign pauses once it is spent", protocol.USD(cost.Budget)))
	case cost.Budget > 0:
		bounds = append(bounds, "max_cost_per_campaign "+protocol.USD(cost.Budget))
	}
	if cost.PerTask > 0 {
		bounds = append(bounds, "max_cost_per_task "+protocol.USD(cost.PerTask))
	}
	if len(bounds) > 0 {
		s += "; " + strings.Join(bounds, "; ")
	}
	return s
}

func headline(c plan.Change) string {
	switch c.Action {
	case plan.Create:
		if c.Suspend {
			return "will be created, suspended"
		}
		return "will be created"
	case plan.Update:
		switch {
		case c.Phase.Done():
			return "will run again"
		case c.Strategy == "restart":
			return "will be restarted"
		}
		return "will be updated in place"
	case plan.Suspend:
		return "will be suspended"
	case plan.Resume:
		return "will be resumed"
	case plan.Prune:
		return "will be pruned"
	case plan.Reopen:
		return "will be reopened"
	case plan.Orphaned:
		return "is orphaned"
	case plan.Unknown:
		return "is unknown"
	}
	return "is unchanged"
}

// effect says what the action does to the run, for people.
func effect(c plan.Change) string {
	switch c.Action {
	case plan.Create:
		if c.Suspend {
			return "no task starts while it is suspended"
		}
		return ""
	case plan.Update:
		switch {
		case c.Phase.Done():
			// Its run has ended, however: nothing to update in place or
			// cancel.
			return "its run has ended; a new run starts with the new spec, in every repository"
		case c.Strategy != "restart":
			return "repositories not yet started take the new spec"
		case c.Phase == "":
			// Nothing recorded: the old spec is the base's (plan --base).
			return "a run of the old spec is cancelled and started again with the new spec"
		}
		return "its run is cancelled and started again with the new spec"
	case plan.Suspend:
		return "running tasks finish; no new task starts"
	case plan.Resume:
		return "tasks start again"
	case plan.Reopen:
		return "done_when no longer passes on the default branch of " + strings.Join(c.Reopen, ", ") +
			" (regressed after its pull request merged): their change is made again, as a new pull request"
	case plan.Prune:
		if c.Phase.Done() {
			return "removed from Git; its run is " + string(c.Phase) + ", its record is dropped"
		}
		return "removed from Git; its run is cancelled"
	}
	return c.Reason
}

// origin says what the campaign is and where it comes from:
// "Campaign from campaigns/slog.yaml (running)".
func origin(c plan.Change) string {
	var b strings.Builder
	b.WriteString(string(c.Kind))
	if b.Len() == 0 {
		b.WriteString("Definition")
	}
	if c.File != "" {
		b.WriteString(" from " + c.File)
	}
	if c.Phase != "" {
		b.WriteString(" (" + string(c.Phase) + ")")
	}
	return b.String()
}

// digestLine explains a spec change without a field diff, or is "".
func digestLine(c plan.Change) string {
	if !c.SpecChanged() {
		return ""
	}
	old := plan.ShortDigest(c.OldDigest)
	if old == "" {
		old = "unknown"
	}
	line := fmt.Sprintf("spec changed (digest %s → %s)", old, plan.ShortDigest(c.NewDigest))
	switch {
	case !c.FieldsKnown:
		return line + "; the recorded spec is not available for a field diff"
	case len(c.Fields) == 0 && c.Repositories.Empty():
		return line
	}
	return ""
}

// shorten fits two JSON values into about width characters each. Two long
// strings are shown around their first difference, so that what changed
// stays in view; other values are cut at the end. nil (absent) stays "".
func shorten(old, cur json.RawMessage, width int) (string, string) {
	if utf8.RuneCount(old) <= width && utf8.RuneCount(cur) <= width {
		return string(old), string(cur)
	}
	a, aok := str(old)
	b, bok := str(cur)
	if aok && bok {
		return window(a, b, width)
	}
	one := func(v json.RawMessage, s string, ok bool) string {
		if ok {
			return clip([]rune(s), 0, width)
		}
		return cut(v, width)
	}
	return one(old, a, aok), one(cur, b, bok)
}

// str decodes a JSON string.
func str(v json.RawMessage) (string, bool) {
	var s string
	if v == nil || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

func cut(v json.RawMessage, width int) string {
	if v == nil {
		return ""
	}
	r := []rune(string(v))
	if len(r) <= width {
		return string(r)
	}
	return string(r[:width-1]) + "…"
}

// window shows two strings from a little before their first difference,
// using the width when the difference is near the end.
func window(a, b string, width int) (string, string) {
	ra, rb := []rune(a), []rune(b)
	p := 0
	for p < len(ra) && p < len(rb) && ra[p] == rb[p] {
		p++
	}
	start := max(0, p-min(12, width/4))
	// Use the room on the left when what follows is short: start where
	// the rest of the longer string just fits.
	longest := ra
	if len(rb) > len(ra) {
		longest = rb
	}
	i, n := len(longest), 0
	for i > 0 && n+utf8.RuneCountInString(quoteRune(longest[i-1])) <= width-3 {
		n += utf8.RuneCountInString(quoteRune(longest[i-1]))
		i--
	}
	start = min(start, i)
	return clip(ra, start, width), clip(rb, start, width)
}

// clip quotes r[start:] in JSON, keeping about width characters of quoted
// text and marking what was left out with "…".
func clip(r []rune, start, width int) string {
	var body strings.Builder
	limit := width - 2 // the quotes
	if start > 0 {
		limit-- // the leading "…"
	}
	n, i := 0, start
	for ; i < len(r); i++ {
		q := quoteRune(r[i])
		room := 0
		if i < len(r)-1 {
			room = 1 // for the trailing "…"
		}
		if n+utf8.RuneCountInString(q)+room > limit {
			break
		}
		body.WriteString(q)
		n += utf8.RuneCountInString(q)
	}
	out := `"`
	if start > 0 {
		out += "…"
	}
	out += body.String()
	if i < len(r) {
		out += "…"
	}
	return out + `"`
}

// quoteRune is r as written inside a JSON string.
func quoteRune(r rune) string {
	switch r {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x20 {
		return fmt.Sprintf(`\u%04x`, r)
	}
	return string(r)
}

// keepCurrentLine says when a change's pull requests have their change
// made again on their bases, as its definition declares; "" for never.
func keepCurrentLine(c plan.Change) string {
	switch c.KeepCurrent {
	case spec.KeepCurrentConflicted:
		return "keep current: a pull request that conflicts with its base has its change made again on it (never over someone else's push)"
	case spec.KeepCurrentBehind:
		return "keep current: a pull request behind its base, or conflicting, has its change made again on it (never over someone else's push)"
	}
	return ""
}

// mergeLine says how a change's pull requests will merge by themselves,
// as its definition declares; "" when it declares nothing.
func mergeLine(c plan.Change) string {
	m := c.Merge
	if m == nil {
		return ""
	}
	how := map[string]string{"squash": "squashed", "rebase": "rebased"}[m.Method]
	if how == "" {
		how = "merged with a merge commit"
	}
	when := "approved, green and mergeable"
	if !m.RequireReview {
		when = "green and mergeable (no review required)"
	}
	s := fmt.Sprintf("merge: pull requests are %s once %s", how, when)
	if m.After > 0 {
		s += fmt.Sprintf(", %s after they are ready", time.Duration(m.After))
	}
	if m.DeleteBranch {
		s += "; branches deleted"
	}
	return s
}

// closeLine says which pull requests a prune closes, as the run's spec
// declares; "" when none.
func closeLine(c plan.Change) string {
	cl := c.Closes
	if cl == nil {
		return ""
	}
	s := fmt.Sprintf("pull requests: %d open, closed by the prune (pull_request.close)", cl.Open)
	if cl.Open == 1 {
		s = "pull requests: 1 open, closed by the prune (pull_request.close)"
	}
	if cl.DeleteBranch {
		s += "; branches deleted"
	}
	return s
}
