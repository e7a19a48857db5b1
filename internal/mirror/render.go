package mirror

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/markdown"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/report"
	"github.com/fleetlift/fleetlift/internal/state"
)

// File names on the status branch.
const (
	ReadmeFile   = "README.md"
	StatusFile   = "status.json"
	CampaignsDir = "campaigns"
	ReportsDir   = "reports"
)

// FormatVersion is the version of status.json's format.
const FormatVersion = 1

// Render returns the files of the status branch for s, by path: README.md,
// status.json and campaigns/<id>.md for each recorded campaign. watched
// is the watched branch, which the approval instructions name. Render is
// pure: equal statuses give equal files, whatever the order of their
// lists. URL user-info is redacted everywhere.
func Render(s reconcile.Status, watched string) map[string][]byte {
	v := prepare(s, watched)
	files := map[string][]byte{
		ReadmeFile: []byte(v.readme()),
		StatusFile: v.json(),
	}
	for _, c := range v.campaigns {
		files[PagePath(c.ID)] = []byte(v.page(c))
		if t := v.reports[c.ID]; t != nil {
			for name, content := range t.Files() {
				files[ReportDir(c.ID)+"/"+name] = []byte(content)
			}
		}
	}
	for p, b := range files {
		// What the fields missed (an error text quoting a URL): whole
		// files are redacted too. Every URL in them is followed by
		// whitespace, so this never joins two values.
		files[p] = []byte(git.Redact(string(b)))
	}
	return files
}

// PagePath is the path of a campaign's page: campaigns/<id>.md. An id
// that is not a plain file name is made one, with a hash of the id to
// keep it unique.
func PagePath(id string) string {
	return CampaignsDir + "/" + fileName(id) + ".md"
}

// ReportDir is the directory of a report-mode run's reports:
// reports/<id>, named as PagePath names the campaign's page. It holds
// report.PageFile, the table, and each report's body as a file of its
// own.
func ReportDir(id string) string {
	return ReportsDir + "/" + fileName(id)
}

var plainName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$`)

func fileName(s string) string {
	if plainName.MatchString(s) && !strings.Contains(s, "..") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && (r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
		if b.Len() >= 64 {
			break
		}
	}
	sum := sha256.Sum256([]byte(s))
	name := strings.TrimLeft(b.String(), "-")
	if name == "" {
		name = "x"
	}
	return name + "-" + hex.EncodeToString(sum[:4])
}

// view is a status made ready to show: sorted, redacted, with the counts
// every file uses.
type view struct {
	revision  string
	time      time.Time
	watched   string
	campaigns []state.Campaign
	errors    []jsonError
	outcomes  []jsonOutcome
	approvals []jsonApproval
	// leftAlone are the recorded campaigns the plan leaves alone:
	// orphaned or unknown.
	leftAlone []plan.Change
	pending   int
	// reports are the report tables of the campaigns that have reports,
	// by id.
	reports map[string]*report.Table
}

func prepare(s reconcile.Status, watched string) *view {
	v := &view{revision: s.Revision, time: s.Time.UTC().Truncate(time.Second), watched: watched, reports: map[string]*report.Table{}}
	for _, c := range s.Campaigns {
		if len(c.Reports) > 0 {
			// The spec, which clean leaves out, names the columns.
			v.reports[c.ID] = report.New(c.ID, c.Spec, c.Reports)
		}
		c = clean(c)
		v.pending += len(c.PendingApprovals)
		v.campaigns = append(v.campaigns, c)
	}
	slices.SortStableFunc(v.campaigns, func(a, b state.Campaign) int { return strings.Compare(a.ID, b.ID) })

	for _, e := range s.Plan.Errors {
		if e == nil {
			continue
		}
		v.errors = append(v.errors, jsonError{File: git.Redact(e.File), Line: e.Line, Column: e.Column,
			Field: git.Redact(e.Field), Message: git.Redact(e.Msg)})
	}
	slices.SortFunc(v.errors, func(a, b jsonError) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column),
			strings.Compare(a.Field, b.Field), strings.Compare(a.Message, b.Message))
	})

	for _, o := range s.Outcomes {
		j := jsonOutcome{ID: git.Redact(o.ID), Approval: git.Redact(o.Approval), Action: o.Action}
		if o.Err != nil {
			j.Error = git.Redact(o.Err.Error())
		}
		v.outcomes = append(v.outcomes, j)
	}
	slices.SortFunc(v.outcomes, func(a, b jsonOutcome) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), strings.Compare(a.Approval, b.Approval),
			strings.Compare(a.Action, b.Action), strings.Compare(a.Error, b.Error))
	})

	for _, a := range s.Plan.Approvals {
		r := a.Record
		v.approvals = append(v.approvals, jsonApproval{
			File: git.Redact(r.File), Target: git.Redact(r.Target), Action: string(r.Action), By: git.Redact(r.By),
			ResultDigest: r.ResultDigest, Generation: r.Generation, Status: string(a.Status), Reason: git.Redact(a.Reason), CurrentDigest: a.Current,
		})
	}
	slices.SortFunc(v.approvals, func(a, b jsonApproval) int {
		return cmp.Or(strings.Compare(a.Target, b.Target), strings.Compare(a.File, b.File))
	})

	for _, c := range s.Plan.Changes {
		if c.Action == plan.Orphaned || c.Action == plan.Unknown {
			c.Reason = git.Redact(c.Reason)
			v.leftAlone = append(v.leftAlone, c)
		}
	}
	slices.SortFunc(v.leftAlone, func(a, b plan.Change) int { return strings.Compare(a.ID, b.ID) })
	return v
}

// clean returns a sorted, redacted copy of c without its spec: the spec
// is in the campaigns repository at c.SourceRevision, and may name
// repository URLs.
func clean(c state.Campaign) state.Campaign {
	c = c.Clone()
	c.Spec = nil
	c.File = git.Redact(c.File)
	c.WorkflowID = git.Redact(c.WorkflowID)
	c.RunID = git.Redact(c.RunID)
	for i := range c.Repos {
		r := &c.Repos[i]
		r.Name, r.Branch, r.PullRequestURL = git.Redact(r.Name), git.Redact(r.Branch), git.Redact(r.PullRequestURL)
		if r.PullRequest != nil {
			r.PullRequest.Error = git.Redact(r.PullRequest.Error)
			r.PullRequest.DoneNote = git.Redact(r.PullRequest.DoneNote)
		}
	}
	slices.SortStableFunc(c.Repos, func(a, b state.Repo) int { return strings.Compare(a.Name, b.Name) })
	for i := range c.PendingApprovals {
		p := &c.PendingApprovals[i]
		p.Target, p.WorkflowID = git.Redact(p.Target), git.Redact(p.WorkflowID)
		if !p.Since.IsZero() {
			p.Since = p.Since.UTC()
		}
		p.Repos = slices.Clone(p.Repos)
		for j := range p.Repos {
			r := &p.Repos[j]
			r.Name = git.Redact(r.Name)
			r.Files = slices.Clone(r.Files)
			for k := range r.Files {
				r.Files[k].Path = git.Redact(r.Files[k].Path)
			}
			slices.SortStableFunc(r.Files, func(a, b state.PendingFile) int { return strings.Compare(a.Path, b.Path) })
		}
		slices.SortStableFunc(p.Repos, func(a, b state.PendingRepo) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortStableFunc(c.PendingApprovals, func(a, b state.PendingApproval) int {
		return cmp.Or(strings.Compare(a.Target, b.Target), strings.Compare(a.ResultDigest, b.ResultDigest))
	})
	for i, a := range c.AppliedApprovals {
		c.AppliedApprovals[i] = git.Redact(a)
	}
	slices.Sort(c.AppliedApprovals)
	slices.SortStableFunc(c.Reports, func(a, b state.Report) int {
		return cmp.Or(strings.Compare(a.Unit, b.Unit), strings.Compare(a.Repository, b.Repository), strings.Compare(a.Target, b.Target))
	})
	return c
}

func (v *view) failed() []jsonOutcome {
	var out []jsonOutcome
	for _, o := range v.outcomes {
		if o.Error != "" {
			out = append(out, o)
		}
	}
	return out
}

func (v *view) ignored() []jsonApproval {
	var out []jsonApproval
	for _, a := range v.approvals {
		if a.Status == string(plan.ApprovalIgnored) {
			out = append(out, a)
		}
	}
	return out
}

// Message is the commit message of a status commit.
func Message(s reconcile.Status) string {
	pending := 0
	for _, c := range s.Campaigns {
		pending += len(c.PendingApprovals)
	}
	return fmt.Sprintf("fleetlift status at %s: %s, %d awaiting approval\n", short(s.Revision), plural(len(s.Campaigns), "campaign"), pending)
}

// status.json

type jsonStatus struct {
	FormatVersion int              `json:"format_version"`
	Revision      string           `json:"revision"`
	Time          time.Time        `json:"time"`
	Summary       jsonSummary      `json:"summary"`
	Campaigns     []state.Campaign `json:"campaigns"`
	Errors        []jsonError      `json:"errors"`
	Outcomes      []jsonOutcome    `json:"outcomes"`
	Approvals     []jsonApproval   `json:"approvals"`
}

type jsonSummary struct {
	Campaigns        int `json:"campaigns"`
	AwaitingApproval int `json:"awaiting_approval"`
	FailedActions    int `json:"failed_actions"`
	Errors           int `json:"errors"`
}

type jsonError struct {
	File    string `json:"file"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

type jsonOutcome struct {
	ID       string `json:"id"`
	Approval string `json:"approval,omitempty"`
	Action   string `json:"action"`
	Error    string `json:"error,omitempty"`
}

type jsonApproval struct {
	File          string `json:"file"`
	Target        string `json:"target"`
	Action        string `json:"action"`
	By            string `json:"by"`
	ResultDigest  string `json:"result_digest,omitempty"`
	Generation    int64  `json:"generation,omitempty"`
	Status        string `json:"status"`
	Reason        string `json:"reason,omitempty"`
	CurrentDigest string `json:"current_digest,omitempty"`
}

func (v *view) json() []byte {
	// Report bodies and raw texts are in the report files, not here.
	campaigns := make([]state.Campaign, len(v.campaigns))
	for i, c := range v.campaigns {
		c.Reports = slices.Clone(c.Reports)
		for j := range c.Reports {
			c.Reports[j].Body, c.Reports[j].Raw = "", ""
		}
		campaigns[i] = c
	}
	out := jsonStatus{
		FormatVersion: FormatVersion,
		Revision:      v.revision,
		Time:          v.time,
		Summary: jsonSummary{Campaigns: len(v.campaigns), AwaitingApproval: v.pending,
			FailedActions: len(v.failed()), Errors: len(v.errors)},
		Campaigns: nonNil(campaigns),
		Errors:    nonNil(v.errors),
		Outcomes:  nonNil(v.outcomes),
		Approvals: nonNil(v.approvals),
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		// Only strings, numbers, times and valid raw JSON: cannot fail.
		panic(fmt.Sprintf("encode status: %v", err))
	}
	return b.Bytes()
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// readTime reads the time out of a status.json; zero when it has none.
func readTime(data []byte) time.Time {
	var s struct {
		Time time.Time `json:"time"`
	}
	if json.Unmarshal(data, &s) != nil {
		return time.Time{}
	}
	return s.Time
}

// README.md

func (v *view) readme() string {
	var b strings.Builder
	b.WriteString("# fleetlift status\n\n")
	fmt.Fprintf(&b, "Revision %s of %s applied; status as of %s.\n\n", code(short(v.revision)), code(v.watched), stamp(v.time))
	counts := []string{plural(len(v.campaigns), "campaign"), fmt.Sprintf("%d awaiting approval", v.pending)}
	if n := len(v.failed()); n > 0 {
		counts = append(counts, plural(n, "failed action"))
	}
	if n := len(v.errors); n > 0 {
		counts = append(counts, plural(n, "definition error"))
	}
	fmt.Fprintf(&b, "**%s.**\n\n", strings.Join(counts, ", "))
	b.WriteString("The fleetlift reconciler writes this branch; do not edit it. " +
		"[status.json](status.json) holds the same status for machines.\n")

	b.WriteString("\n## Campaigns\n\n")
	if len(v.campaigns) == 0 {
		b.WriteString("No campaign or task is recorded.\n")
	} else {
		b.WriteString("| Campaign | Kind | Phase | Generation | Repos completed / failed / total | Pull requests | Awaiting approval |\n")
		b.WriteString("|---|---|---|--:|--:|---|--:|\n")
		for _, c := range v.campaigns {
			done, failed := 0, 0
			for _, r := range c.Repos {
				switch r.Status {
				case state.RepoCompleted:
					done++
				case state.RepoFailed:
					failed++
				}
			}
			fmt.Fprintf(&b, "| [%s](%s) | %s | %s | %d | %d / %d / %d | %s | %d |\n",
				cell(code(c.ID)), PagePath(c.ID), cell(text(string(c.Kind))), cell(text(phase(c))), c.Generation,
				done, failed, len(c.Repos), cell(text(pullRequests(c.Repos))), len(c.PendingApprovals))
		}
	}

	if v.pending > 0 {
		b.WriteString("\n## Awaiting approval\n")
		for _, c := range v.campaigns {
			for _, p := range c.PendingApprovals {
				fmt.Fprintf(&b, "\n### %s\n\n", code(p.Target))
				waiting(&b, p)
				if len(p.Repos) > 0 {
					b.WriteString("\n| Repository | Files | + | − |\n|---|--:|--:|--:|\n")
					for _, r := range p.Repos {
						add, del := 0, 0
						for _, f := range r.Files {
							add, del = add+f.Additions, del+f.Deletions
						}
						files := fmt.Sprint(len(r.Files))
						if r.Report {
							files += " (report)"
						}
						fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", cell(code(r.Name)), files, add, del)
					}
					fmt.Fprintf(&b, "\nThe files are listed in [%s](%s).\n", text(PagePath(c.ID)), PagePath(c.ID))
				}
				v.howToApprove(&b, p, c.Generation)
			}
		}
	}

	if len(v.reports) > 0 {
		b.WriteString("\n## Reports\n\n")
		for _, c := range v.campaigns {
			if t := v.reports[c.ID]; t != nil {
				fmt.Fprintf(&b, "- [%s](%s/%s): %s\n", code(c.ID), ReportDir(c.ID), report.PageFile, text(t.Summary()))
			}
		}
	}

	if ig := v.ignored(); len(ig) > 0 {
		b.WriteString("\n## Approval records that do not apply\n\n| File | Target | Action | By | Why |\n|---|---|---|---|---|\n")
		for _, a := range ig {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(code(a.File)), cell(code(a.Target)), cell(text(a.Action)),
				cell(text(a.By)), cell(text(a.Reason)))
		}
	}

	if len(v.leftAlone) > 0 {
		b.WriteString("\n## Recorded campaigns left alone\n\n")
		for _, c := range v.leftAlone {
			fmt.Fprintf(&b, "- %s is %s", code(c.ID), c.Action)
			if c.Reason != "" {
				b.WriteString(": " + text(c.Reason))
			}
			b.WriteString("\n")
		}
	}

	if failed := v.failed(); len(failed) > 0 {
		b.WriteString("\n## Failed actions\n\n")
		for _, o := range failed {
			fmt.Fprintf(&b, "- %s %s", text(o.Action), code(o.ID))
			if o.Approval != "" {
				fmt.Fprintf(&b, " (%s)", code(o.Approval))
			}
			fmt.Fprintf(&b, ": %s\n", text(o.Error))
		}
	}

	if len(v.errors) > 0 {
		b.WriteString("\n## Invalid definition files\n\nWhat these files define was not planned.\n\n")
		for _, e := range v.errors {
			loc := e.File
			if e.Line > 0 {
				loc = fmt.Sprintf("%s:%d:%d", e.File, e.Line, max(e.Column, 1))
			}
			msg := e.Message
			if e.Field != "" {
				msg = e.Field + ": " + msg
			}
			fmt.Fprintf(&b, "- %s: %s\n", code(loc), text(msg))
		}
	}
	return b.String()
}

// youPlaceholder stands for the approver's login in the records the
// mirror shows how to write.
const youPlaceholder = "<you>"

// howToApprove shows the approval record that approves p, a result of
// generation gen.
func (v *view) howToApprove(b *strings.Builder, p state.PendingApproval, gen int64) {
	fmt.Fprintf(b, "\nTo approve, commit this file as %s to %s of the campaigns repository, with your login as `by`:\n\n",
		code(approval.RecordPath(p.Target)), code(v.watched))
	rec := approval.NewDraft(approval.Record{Target: p.Target, Action: approval.Approve, ResultDigest: p.ResultDigest, Generation: gen, By: youPlaceholder}, "")
	b.WriteString(fence(string(rec.Encode()), "yaml"))
	b.WriteString("\n`action: reject` discards the result; `action: steer` with a `prompt` sends the agent back to work.\n")
}

// howToResume shows the approval records that continue or abort the
// paused campaign c: they name its generation, so that they never act on
// a later run.
func (v *view) howToResume(b *strings.Builder, c state.Campaign) {
	b.WriteString("\n## Paused\n\n")
	fmt.Fprintf(b, "To resume, commit this file as %s to %s of the campaigns repository, with your login as `by`:\n\n",
		code(approval.RecordPath(c.ID)), code(v.watched))
	rec := approval.NewDraft(approval.Record{Target: c.ID, Action: approval.Continue, Generation: c.Generation, By: youPlaceholder}, "")
	b.WriteString(fence(string(rec.Encode()), "yaml"))
	b.WriteString("\n`action: abort` stops the campaign instead; `action: retry` runs its failed repositories again. " +
		"A record names the generation it decides about and does nothing to a later one.\n")
}

func waiting(b *strings.Builder, p state.PendingApproval) {
	fmt.Fprintf(b, "Result %s", code(p.ResultDigest))
	if !p.Since.IsZero() {
		fmt.Fprintf(b, ", waiting since %s", stamp(p.Since))
	}
	b.WriteString(".\n")
}

// campaigns/<id>.md

// usage says what a run's model calls used and cost; "" for none.
func usage(u *state.Usage) string {
	if u == nil {
		return ""
	}
	repos := "1 repository"
	if u.Repositories != 1 {
		repos = fmt.Sprintf("%d repositories", u.Repositories)
	}
	s := fmt.Sprintf("%s in %s for %s", plural(int(u.Tokens), "token"), plural(int(u.Requests), "call"), repos)
	if per, ok := u.CostPerRepository(); ok {
		s += fmt.Sprintf(", costing %s (%s a repository)", protocol.USD(u.CostUSD), protocol.USD(per))
	} else if u.CostUSD > 0 {
		s += ", costing " + protocol.USD(u.CostUSD)
	}
	if u.Unpriced != "" {
		s += "; no price for " + u.Unpriced
	}
	return s
}

func (v *view) page(c state.Campaign) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n\n", code(c.ID))
	fmt.Fprintf(&b, "[fleetlift status](../%s) at revision %s.\n\n", ReadmeFile, code(short(v.revision)))
	b.WriteString("| | |\n|---|---|\n")
	row := func(k, val string) {
		if val != "" {
			fmt.Fprintf(&b, "| %s | %s |\n", k, cell(val))
		}
	}
	row("Kind", text(string(c.Kind)))
	row("Phase", text(phase(c)))
	row("Message", text(c.Message))
	row("Model usage", text(usage(c.Usage)))
	row("Generation", fmt.Sprint(c.Generation))
	row("Definition", code(c.File))
	row("Applied from", code(short(c.SourceRevision)))
	row("Spec digest", code(c.SpecDigest))
	row("Workflow", code(c.WorkflowID))
	row("Run", code(c.RunID))
	if c.Prune {
		row("Prune", "allowed")
	}
	fmt.Fprintf(&b, "\n![Burndown: the repositories by where they stand, over time](%s.burndown.svg)\n", fileName(c.ID))

	b.WriteString("\n## Repositories\n\n")
	if len(c.Repos) == 0 {
		b.WriteString("No repository is recorded yet.\n")
	} else {
		b.WriteString("| Repository | Status | Branch | Pull request | State |\n|---|---|---|---|---|\n")
		for _, r := range c.Repos {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(code(r.Name)), cell(text(string(r.Status))),
				cell(code(r.Branch)), cell(link(r.PullRequestURL)), cell(text(prState(r))))
		}
	}

	if t := v.reports[c.ID]; t != nil {
		b.WriteString("\n## Reports\n\n")
		fmt.Fprintf(&b, "%s: the table and each report in [%s](../%s/%s).\n", text(t.Summary()),
			text(ReportDir(c.ID)+"/"), ReportDir(c.ID), report.PageFile)
	}

	if len(c.PendingApprovals) > 0 {
		b.WriteString("\n## Awaiting approval\n")
		for _, p := range c.PendingApprovals {
			fmt.Fprintf(&b, "\n### %s\n\n", code(p.Target))
			waiting(&b, p)
			if p.WorkflowID != "" {
				fmt.Fprintf(&b, "\nWorkflow %s.\n", code(p.WorkflowID))
			}
			if len(p.Repos) > 0 {
				b.WriteString("\n| Repository | File | + | − |\n|---|---|--:|--:|\n")
				for _, r := range p.Repos {
					if len(r.Files) == 0 {
						what := "no changes"
						if r.Report {
							what = "report"
						}
						fmt.Fprintf(&b, "| %s | %s | | |\n", cell(code(r.Name)), what)
					}
					for _, f := range r.Files {
						fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", cell(code(r.Name)), cell(code(f.Path)), f.Additions, f.Deletions)
					}
				}
			}
			v.howToApprove(&b, p, c.Generation)
		}
	}

	if c.Phase == state.PhasePaused && c.Kind == state.KindCampaign {
		v.howToResume(&b, c)
	}

	if len(c.AppliedApprovals) > 0 {
		b.WriteString("\n## Approval records carried out\n\n")
		for _, a := range c.AppliedApprovals {
			fmt.Fprintf(&b, "- %s\n", code(a))
		}
	}
	return b.String()
}

func phase(c state.Campaign) string {
	p := string(c.Phase)
	if p == "" {
		p = "unknown"
	}
	if c.Suspended && c.Phase != state.PhaseSuspended {
		p += " (suspended)"
	}
	return p
}

// prState is the state of r's pull request, with what decides whether
// an open one merges, as the worker last read it: "open, approved,
// checks failure (ci/build), conflicting".
func prState(r state.Repo) string {
	parts := []string{string(r.PullRequestState)}
	p := r.PullRequest
	if p != nil && p.Done != "" && r.PullRequestState == state.PullRequestMerged {
		return parts[0] + ", " + strings.ReplaceAll(p.Done, "_", " ")
	}
	if p == nil || r.PullRequestState != state.PullRequestOpen {
		return parts[0]
	}
	if p.Draft {
		parts = append(parts, "draft")
	}
	if p.Review != "" && p.Review != "none" {
		parts = append(parts, strings.ReplaceAll(p.Review, "_", " "))
	}
	if p.Checks != "" {
		c := "checks " + p.Checks
		if len(p.FailedChecks) > 0 {
			c += " (" + strings.Join(p.FailedChecks, ", ") + ")"
		}
		parts = append(parts, c)
	}
	if p.Mergeable == "conflicting" || p.Mergeable == "behind" {
		parts = append(parts, p.Mergeable)
	}
	if p.Foreign {
		parts = append(parts, "pushed to by others")
	}
	return strings.Join(parts, ", ")
}

// pullRequests counts pull requests by state: "2 open, 1 merged", and
// the merged by what done_when says: "3 merged (2 done, 1 regressed)".
func pullRequests(repos []state.Repo) string {
	counts, done := map[string]int{}, map[string]int{}
	for _, r := range repos {
		if r.PullRequestURL == "" {
			continue
		}
		if r.PullRequestState == state.PullRequestMerged && r.PullRequest != nil && r.PullRequest.Done != "" {
			done[r.PullRequest.Done]++
		}
		st := string(r.PullRequestState)
		if st == "" {
			st = "unknown"
		}
		counts[st]++
	}
	if len(counts) == 0 {
		return "—"
	}
	var parts []string
	for _, st := range []string{string(state.PullRequestOpen), string(state.PullRequestMerged), string(state.PullRequestClosed)} {
		if n := counts[st]; n > 0 {
			part := fmt.Sprintf("%d %s", n, st)
			var ds []string
			for _, d := range state.DoneStates {
				if done[d] > 0 && st == string(state.PullRequestMerged) {
					ds = append(ds, fmt.Sprintf("%d %s", done[d], strings.ReplaceAll(d, "_", " ")))
				}
			}
			if len(ds) > 0 {
				part += " (" + strings.Join(ds, ", ") + ")"
			}
			parts = append(parts, part)
			delete(counts, st)
		}
	}
	rest := make([]string, 0, len(counts))
	for st := range counts {
		rest = append(rest, st)
	}
	slices.Sort(rest)
	for _, st := range rest {
		parts = append(parts, fmt.Sprintf("%d %s", counts[st], st))
	}
	return strings.Join(parts, ", ")
}

// Markdown and YAML helpers.

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func stamp(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// link is an http(s) URL as a link, anything else (a local forge's
// "<path>#<branch>") as code.
func link(u string) string {
	l := strings.ToLower(u)
	if (strings.HasPrefix(l, "https://") || strings.HasPrefix(l, "http://")) && !strings.ContainsAny(u, " \t\n<>()[]`") {
		return "<" + u + ">"
	}
	return code(u)
}

// The Markdown quoting every renderer shares.
var (
	code  = markdown.Code
	fence = markdown.Fence
	text  = markdown.Text
	cell  = markdown.Cell
)
