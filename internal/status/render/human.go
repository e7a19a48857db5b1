package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/visible"
)

// Human prints the run's state. Its messages, errors, repository names
// and file paths come from the run: their control characters are shown,
// not obeyed. An error too long for its table cell is printed in full
// below the table: the end of an error is often its remedy.
func Human(w io.Writer, s *status.Run) {
	HumanRetry(w, s, "")
}

// HumanRetry is Human with retry, the command that runs a campaign's
// failed repositories again where the reader is ("": `fleetlift retry
// ID --failed-only`).
func HumanRetry(w io.Writer, s *status.Run, retry string) {
	if retry == "" {
		retry = fmt.Sprintf("fleetlift retry %s --failed-only", s.ID)
	}
	tabs := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cut := human(visible.Writer(tabs), s, retry)
	tabs.Flush()
	if len(cut) == 0 {
		return
	}
	vw := visible.Writer(w)
	fmt.Fprintln(vw, "errors in full:")
	for _, e := range cut {
		fmt.Fprintf(vw, "  %s: %s\n", e.name, strings.ReplaceAll(strings.TrimSpace(e.err), "\n", "\n    "))
	}
}

// cutError is a repository's error its table cell does not hold whole.
type cutError struct{ name, err string }

// cell is err as a table cell, and err is added to cut when the cell
// does not hold it whole.
func cell(cut *[]cutError, name, err string) string {
	c := OneLine(err)
	if c != strings.TrimSpace(err) {
		*cut = append(*cut, cutError{name, err})
	}
	return c
}

// human writes s's state as a table to tw and returns the errors it cut.
func human(tw io.Writer, s *status.Run, retry string) []cutError {
	var cut []cutError
	if c := s.Campaign; c != nil {
		fmt.Fprintf(tw, "%s: %s", s.ID, c.Phase)
		if c.Message != "" {
			fmt.Fprintf(tw, " (%s)", c.Message)
		}
		fmt.Fprintln(tw)
		used := campaignUsage(c)
		// Each repository's cost, when the models' calls were priced.
		priced := used != nil && used.CostUSD > 0
		if priced {
			fmt.Fprintln(tw, "REPOSITORY\tSTATUS\tPULL REQUEST\tCOST\tERROR")
		} else {
			fmt.Fprintln(tw, "REPOSITORY\tSTATUS\tPULL REQUEST\tERROR")
		}
		for _, u := range c.Units {
			var prs []string
			for _, pr := range u.PRs {
				prs = append(prs, prCell(s.PullRequests, pr.URL))
			}
			cost := ""
			if priced {
				cost = "-\t"
				if u.ModelUsage != nil {
					cost = protocol.USD(u.ModelUsage.CostUSD) + "\t"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\n", u.Key, u.Phase, strings.Join(prs, " "), cost, cell(&cut, u.Key, u.Error))
		}
		sm := c.Summary
		fmt.Fprintf(tw, "%d repositories: %d completed, %d failed, %d skipped, %d cancelled, %d running; %d pull requests, %d reports\n",
			sm.Total, sm.Completed, sm.Failed, sm.Skipped, sm.Cancelled, sm.Running, sm.PRsCreated, sm.ReportsCollected)
		writeUsage(tw, used)
		if s.Closed && sm.Failed > 0 {
			fmt.Fprintf(tw, "run the failed repositories again with `%s`\n", retry)
		}
		return cut
	}
	t := s.Task
	fmt.Fprintf(tw, "%s: %s", s.ID, t.Phase)
	if t.Message != "" {
		fmt.Fprintf(tw, " (%s)", t.Message)
	}
	fmt.Fprintln(tw)
	for _, n := range taskNotes(t) {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	var repos []status.RepoResult
	switch {
	case t.Final != nil:
		repos = t.Final.Repositories
		if t.Final.Error != "" {
			fmt.Fprintf(tw, "error: %s\n", cell(&cut, t.ID, t.Final.Error))
		}
	case t.Result != nil:
		for _, r := range t.Result.Repositories {
			repos = append(repos, status.RepoResult{Name: r.Name, Status: r.Status, FilesModified: r.FilesModified, Error: r.Error})
		}
	}
	writeUsage(tw, taskUsage(t))
	if len(repos) == 0 {
		return cut
	}
	fmt.Fprintln(tw, "REPOSITORY\tSTATUS\tFILES\tPULL REQUEST\tERROR")
	for _, r := range repos {
		pr := ""
		if r.PullRequest != nil {
			pr = prCell(s.PullRequests, r.PullRequest.URL)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Name, r.Status, len(r.FilesModified), pr, cell(&cut, r.Name, r.Error))
	}
	if t.Phase == status.TaskAwaitingApproval && t.Result != nil {
		fmt.Fprintln(tw, "changes awaiting approval:")
		for _, r := range t.Result.Repositories {
			for _, d := range r.Diffs {
				fmt.Fprintf(tw, "  %s/%s\t+%d -%d\n", r.Name, d.Path, d.Additions, d.Deletions)
			}
		}
	}
	return cut
}

// Awaiting prints the digest of every result of run id awaiting approval
// (waiting), what a decision must name.
func Awaiting(w io.Writer, id string, waiting []*status.TaskState) {
	w = visible.Writer(w)
	if len(waiting) == 0 {
		return
	}
	fmt.Fprintln(w, "\nresults awaiting approval (decide with `fleetlift approve|reject|steer "+id+" --digest DIGEST`):")
	for _, t := range waiting {
		fmt.Fprintf(w, "  %s  %s\n", t.ID, t.ResultDigest)
	}
}

// Diffs prints the patches of the results awaiting approval (waiting). A
// patch is what the work wrote: its control characters are shown, not
// obeyed, so that no line of it can hide another from the approver.
func Diffs(w io.Writer, waiting []*status.TaskState) {
	w = visible.Writer(w)
	shown := 0
	for _, t := range waiting {
		for _, r := range t.Result.Repositories {
			for _, d := range r.Diffs {
				fmt.Fprintf(w, "\n=== %s: %s/%s (%s, +%d -%d)\n", t.ID, r.Name, d.Path, d.Status, d.Additions, d.Deletions)
				io.WriteString(w, strings.TrimRight(d.Diff, "\n")+"\n")
				if d.Truncated {
					fmt.Fprintln(w, "[the patch is cut here: it is longer than the agent keeps]")
				}
				shown++
			}
		}
	}
	if shown == 0 {
		fmt.Fprintln(w, "\nno changes await approval")
	}
}

// List prints the list of runs, with their start in local time.
func List(w io.Writer, runs []status.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	vw := visible.Writer(tw)
	fmt.Fprintln(vw, "ID\tTYPE\tSTATUS\tSTARTED")
	for _, r := range runs {
		started, _ := time.Parse(time.RFC3339, r.Started)
		fmt.Fprintf(vw, "%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.Phase, started.Local().Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}

// OneLine is s as a table cell: its first line, cut to 120 bytes.
func OneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	if len(s) > 120 {
		// Cut between characters, not inside one.
		n := 117
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "..."
	}
	return s
}

// campaignUsage is what c's units used of their models together.
// A refusal is a unit's, shown with it, not the campaign's (Summary.Use
// keeps none).
func campaignUsage(c *status.CampaignState) *protocol.ModelUsage {
	var s status.Summary
	for _, u := range c.Units {
		s.Use(u.ModelUsage, 1)
	}
	return s.ModelUsage
}

// taskUsage is what t used of its model: its result's once it has ended,
// else its latest result's.
func taskUsage(t *status.TaskState) *protocol.ModelUsage {
	switch {
	case t.Final != nil:
		return t.Final.ModelUsage
	case t.Result != nil:
		return t.Result.ModelUsage
	}
	return nil
}

// writeUsage says what was used of the model, if anything.
func writeUsage(w io.Writer, u *protocol.ModelUsage) {
	if u == nil {
		return
	}
	fmt.Fprintf(w, "model: %d requests, %d tokens (%d input, %d output, %d cache writes, %d cache reads)",
		u.Requests, u.Tokens(), u.InputTokens, u.OutputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens)
	if u.CostUSD > 0 {
		fmt.Fprintf(w, ", costing %s", protocol.USD(u.CostUSD))
	}
	fmt.Fprintln(w)
	if u.Unpriced != "" {
		fmt.Fprintf(w, "model: the worker's price table has no price for %s: the cost leaves those calls out\n", u.Unpriced)
	}
	if u.Refused != "" {
		fmt.Fprintf(w, "model: the gateway refused a request: %s\n", OneLine(u.Refused))
	}
}

// taskNotes are t's notes: its result's once it has ended.
func taskNotes(t *status.TaskState) []string {
	if t.Final != nil && len(t.Final.Notes) > 0 {
		return t.Final.Notes
	}
	return t.Notes
}

// prCell is the pull request at url as a table cell: its URL, and what
// became of it when its follower has read it (prs).
func prCell(prs []status.FollowedPR, url string) string {
	if st := prSummary(prs, url); st != "" {
		return url + " (" + st + ")"
	}
	return url
}
