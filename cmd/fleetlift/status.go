package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/visible"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func newStatusCmd() *cobra.Command {
	var f temporalFlags
	var diff bool
	var output string
	cmd := &cobra.Command{
		Use:   "status [ID]",
		Short: "Show runs, or one run's state per repository",
		Long: `Without ID, lists fleetlift's runs. With ID (campaign/<id>, task/<id>, or a bare
definition id), shows the run's phase, summary and per-repository results.
With --diff, also the patches of every result awaiting approval: what an
approval would push.

-o json prints the same as one JSON object (format_version 1; docs/running.md
documents its fields): {"format_version", "runs": [...]} for the list, and
{"format_version", "id", "workflow", "phase", ..., "repositories",
"awaiting_approval"} for one run.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "human" && output != "json" {
				return fmt.Errorf("unknown output format %q: use human or json", output)
			}
			w := cmd.OutOrStdout()
			if len(args) == 0 {
				c, err := f.dial(cmd.Context())
				if err != nil {
					return err
				}
				defer c.Close()
				runs, err := listRuns(cmd.Context(), c, f.namespace)
				if err != nil {
					return err
				}
				if output == "json" {
					return writeJSON(w, jsonRunList{FormatVersion: statusFormatVersion, Runs: runs})
				}
				return writeRunList(w, runs)
			}
			c, id, err := f.dialRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := readState(cmd.Context(), c, id)
			if err != nil {
				return err
			}
			if output == "json" {
				return writeJSON(w, st.json(st.waiting(cmd.Context(), c), diff))
			}
			st.write(w)
			st.writeAwaiting(cmd.Context(), c, w)
			if diff {
				st.writeDiffs(cmd.Context(), c, w)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&diff, "diff", false, "print the patches awaiting approval")
	cmd.Flags().StringVarP(&output, "output", "o", "human", "output format: human or json")
	return cmd
}

// waiting is the tasks under s that await approval: the task, or a
// campaign's running units that do.
func (s *runState) waiting(ctx context.Context, c client.Client) []*workflow.TaskState {
	var tasks []*workflow.TaskState
	switch {
	case s.task != nil:
		tasks = append(tasks, s.task)
	case s.campaign != nil:
		for _, u := range s.campaign.Units {
			if t := unitTask(ctx, c, u); t != nil {
				tasks = append(tasks, t)
			}
		}
	}
	var out []*workflow.TaskState
	for _, t := range tasks {
		if t.Phase == workflow.TaskAwaitingApproval && t.Result != nil {
			out = append(out, t)
		}
	}
	return out
}

// writeAwaiting prints the digest of every result awaiting approval, what
// a decision must name.
func (s *runState) writeAwaiting(ctx context.Context, c client.Client, w io.Writer) {
	w = visible.Writer(w)
	waiting := s.waiting(ctx, c)
	if len(waiting) == 0 {
		return
	}
	fmt.Fprintln(w, "\nresults awaiting approval (decide with `fleetlift approve|reject|steer "+s.id+" --digest DIGEST`):")
	for _, t := range waiting {
		fmt.Fprintf(w, "  %s  %s\n", t.ID, t.ResultDigest)
	}
}

// writeDiffs prints the patches of the results awaiting approval: the
// task's, or those of a campaign's running units. A patch is what the
// work wrote: its control characters are shown, not obeyed, so that no
// line of it can hide another from the approver.
func (s *runState) writeDiffs(ctx context.Context, c client.Client, w io.Writer) {
	w = visible.Writer(w)
	shown := 0
	for _, t := range s.waiting(ctx, c) {
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

// listRuns reads every run that is not a campaign's child, newest first.
func listRuns(ctx context.Context, c client.Client, ns string) ([]jsonRunEntry, error) {
	var runs []jsonRunEntry
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns, PageSize: 200, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.Executions {
			if e.ParentExecution != nil {
				continue
			}
			runs = append(runs, runEntry(e))
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return runs, nil
		}
	}
}

// searchPhase is the phase a run keeps current in its search attributes
// (workflow.SearchPhase), "" when it carries none.
func searchPhase(sa *commonpb.SearchAttributes) string {
	var phase string
	if p, ok := sa.GetIndexedFields()[workflow.SearchPhase.GetName()]; ok && converterFor().FromPayload(p, &phase) == nil {
		return phase
	}
	return ""
}

// runEntry is a run as the list shows it, with what its memo records.
func runEntry(e *workflowpb.WorkflowExecutionInfo) jsonRunEntry {
	r := jsonRunEntry{
		ID: e.Execution.WorkflowId, RunID: e.Execution.RunId, Workflow: e.Type.Name,
		Status:  strings.ToLower(strings.TrimPrefix(e.Status.String(), "WORKFLOW_EXECUTION_STATUS_")),
		Started: e.StartTime.AsTime().UTC().Format(time.RFC3339),
	}
	if e.CloseTime != nil && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		r.Closed = e.CloseTime.AsTime().UTC().Format(time.RFC3339)
	}
	memo := e.GetMemo().GetFields()
	for key, dst := range map[string]any{workflow.MemoKind: &r.Kind, workflow.MemoID: &r.Definition, workflow.MemoDigest: &r.Digest, workflow.MemoGeneration: &r.Generation, workflow.MemoPhase: &r.Phase} {
		if p, ok := memo[key]; ok {
			_ = converterFor().FromPayload(p, dst)
		}
	}
	// The phase kept current in the search attributes (a task's
	// awaiting_approval), else as the memo records it (a campaign's
	// paused, or how it ended: completed_with_failures, …), else the
	// workflow's status; a run that failed, was cancelled or terminated
	// is that.
	if phase := searchPhase(e.GetSearchAttributes()); phase != "" {
		r.Phase = phase
	}
	if r.Phase == "" || (e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED) {
		r.Phase = r.Status
	}
	return r
}

// statusFormatVersion is the version of status -o json's format.
const statusFormatVersion = 1

// jsonRunList is status -o json without ID.
type jsonRunList struct {
	FormatVersion int            `json:"format_version"`
	Runs          []jsonRunEntry `json:"runs"`
}

// jsonRunEntry is one run in the list.
type jsonRunEntry struct {
	ID         string `json:"id"`
	RunID      string `json:"run_id"`
	Workflow   string `json:"workflow"`
	Kind       string `json:"kind,omitempty"`
	Definition string `json:"definition,omitempty"`
	Status     string `json:"status"`
	Phase      string `json:"phase"`
	Digest     string `json:"digest,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	Started    string `json:"started"`
	Closed     string `json:"closed,omitempty"`
}

// jsonRun is status ID -o json.
type jsonRun struct {
	FormatVersion int    `json:"format_version"`
	ID            string `json:"id"`
	Workflow      string `json:"workflow"`
	Closed        bool   `json:"closed"`
	Phase         string `json:"phase"`
	Message       string `json:"message,omitempty"`
	Error         string `json:"error,omitempty"`
	// Notes say what of the definition the task's sandboxes could not
	// apply (a credentials secret_ref in a local sandbox).
	Notes     []string     `json:"notes,omitempty"`
	Suspended bool         `json:"suspended,omitempty"`
	Summary   *jsonSummary `json:"summary,omitempty"`
	// ModelUsage is what the run's agents used of their models, as the
	// worker's gateway counted it.
	ModelUsage       *protocol.ModelUsage `json:"model_usage,omitempty"`
	Repositories     []jsonRepo           `json:"repositories"`
	AwaitingApproval []jsonAwaiting       `json:"awaiting_approval"`
}

type jsonSummary struct {
	Total        int `json:"total"`
	Completed    int `json:"completed"`
	Failed       int `json:"failed"`
	Skipped      int `json:"skipped"`
	Cancelled    int `json:"cancelled"`
	Running      int `json:"running"`
	PullRequests int `json:"pull_requests"`
	Reports      int `json:"reports"`
}

type jsonRepo struct {
	Name         string   `json:"name"`
	Status       string   `json:"status"`
	PullRequests []string `json:"pull_requests"`
	Files        []string `json:"files,omitempty"`
	Error        string   `json:"error,omitempty"`
	WorkflowID   string   `json:"workflow_id,omitempty"`
	Attempts     int      `json:"attempts,omitempty"`
	// SandboxesLost: a campaign's unit's sandboxes lost to crashes and
	// replaced in its latest run.
	SandboxesLost int                  `json:"sandboxes_lost,omitempty"`
	ModelUsage    *protocol.ModelUsage `json:"model_usage,omitempty"`
}

type jsonAwaiting struct {
	Task         string       `json:"task"`
	ResultDigest string       `json:"result_digest"`
	Changes      []jsonChange `json:"changes"`
}

type jsonChange struct {
	Repository string `json:"repository"`
	Path       string `json:"path"`
	Status     string `json:"status"`
	Additions  int    `json:"additions"`
	Deletions  int    `json:"deletions"`
	Truncated  bool   `json:"truncated,omitempty"`
	Diff       string `json:"diff,omitempty"`
}

// json is the run's state as status -o json shows it, with the results
// awaiting approval (their patches too, with diff).
func (s *runState) json(waiting []*workflow.TaskState, diff bool) jsonRun {
	out := jsonRun{FormatVersion: statusFormatVersion, ID: s.id, Closed: s.closed, Repositories: []jsonRepo{}, AwaitingApproval: []jsonAwaiting{}}
	if c := s.campaign; c != nil {
		out.Workflow, out.Phase, out.Message, out.Suspended = "Campaign", string(c.Phase), c.Message, c.Suspended
		sm := c.Summary
		out.ModelUsage = campaignUsage(c)
		out.Summary = &jsonSummary{Total: sm.Total, Completed: sm.Completed, Failed: sm.Failed, Skipped: sm.Skipped,
			Cancelled: sm.Cancelled, Running: sm.Running, PullRequests: sm.PRsCreated, Reports: sm.ReportsCollected}
		for _, u := range c.Units {
			r := jsonRepo{Name: u.Key, Status: string(u.Phase), PullRequests: []string{}, Error: u.Error, WorkflowID: u.WorkflowID,
				Attempts: u.Attempts, SandboxesLost: u.SandboxesLost, ModelUsage: u.ModelUsage}
			for _, pr := range u.PRs {
				r.PullRequests = append(r.PullRequests, pr.URL)
			}
			out.Repositories = append(out.Repositories, r)
		}
	} else if t := s.task; t != nil {
		out.Workflow, out.Phase, out.Message = "Task", string(t.Phase), t.Message
		out.ModelUsage = taskUsage(t)
		out.Notes = taskNotes(t)
		switch {
		case t.Final != nil:
			out.Error = t.Final.Error
			for _, rr := range t.Final.Repositories {
				r := jsonRepo{Name: rr.Name, Status: rr.Status, PullRequests: []string{}, Files: rr.FilesModified, Error: rr.Error}
				if rr.PullRequest != nil {
					r.PullRequests = append(r.PullRequests, rr.PullRequest.URL)
				}
				out.Repositories = append(out.Repositories, r)
			}
		case t.Result != nil:
			for _, rr := range t.Result.Repositories {
				out.Repositories = append(out.Repositories, jsonRepo{Name: rr.Name, Status: rr.Status, PullRequests: []string{}, Files: rr.FilesModified, Error: rr.Error})
			}
		}
	}
	for _, t := range waiting {
		a := jsonAwaiting{Task: t.ID, ResultDigest: t.ResultDigest, Changes: []jsonChange{}}
		for _, r := range t.Result.Repositories {
			for _, d := range r.Diffs {
				ch := jsonChange{Repository: r.Name, Path: d.Path, Status: d.Status, Additions: d.Additions, Deletions: d.Deletions, Truncated: d.Truncated}
				if diff {
					ch.Diff = d.Diff
				}
				a.Changes = append(a.Changes, ch)
			}
		}
		out.AwaitingApproval = append(out.AwaitingApproval, a)
	}
	return out
}

// writeJSON writes v indented, with a trailing newline. Text from runs
// keeps its value, with every character a terminal would act on escaped.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(visible.JSON(b.Bytes()))
	return err
}

// writeRunList prints the list for people.
func writeRunList(w io.Writer, runs []jsonRunEntry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	vw := visible.Writer(tw)
	fmt.Fprintln(vw, "ID\tTYPE\tSTATUS\tSTARTED")
	for _, r := range runs {
		started, _ := time.Parse(time.RFC3339, r.Started)
		fmt.Fprintf(vw, "%s\t%s\t%s\t%s\n", r.ID, r.Workflow, r.Phase, started.Local().Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}

// resolveID accepts a workflow id or a bare definition id.
func resolveID(ctx context.Context, c client.Client, id string) (string, error) {
	candidates := []string{id}
	if !strings.HasPrefix(id, "campaign/") && !strings.HasPrefix(id, "task/") {
		candidates = []string{"campaign/" + id, "task/" + id, id}
	}
	for _, cand := range candidates {
		_, err := c.DescribeWorkflowExecution(ctx, cand, "")
		if err == nil {
			return cand, nil
		}
		var nf *serviceerror.NotFound
		if !errors.As(err, &nf) {
			return "", fmt.Errorf("look up %s: %w", cand, err)
		}
	}
	return "", fmt.Errorf("no run %q (tried %s)", id, strings.Join(candidates, ", "))
}

// runState is what status and run show: a campaign's or a task's state.
type runState struct {
	id       string
	closed   bool
	campaign *workflow.CampaignState
	task     *workflow.TaskState
}

// readState queries a running workflow, or reads a closed one's result.
func readState(ctx context.Context, c client.Client, id string) (*runState, error) {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", id, err)
	}
	info := d.WorkflowExecutionInfo
	st := &runState{id: id, closed: info.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING}
	isCampaign := info.Type.Name == "Campaign"
	if st.closed && info.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		run := c.GetWorkflow(ctx, id, "")
		if isCampaign {
			var cs workflow.CampaignState
			err = run.Get(ctx, &cs)
			// How it ended, also for a run recorded before campaigns
			// told their endings apart.
			cs = workflow.Final(cs)
			st.campaign = &cs
		} else {
			var r workflow.TaskResult
			err = run.Get(ctx, &r)
			st.task = &workflow.TaskState{ID: r.ID, Phase: r.Phase, Final: &r}
		}
		return st, err
	}
	if st.closed {
		return nil, fmt.Errorf("%s ended %s", id, strings.ToLower(strings.TrimPrefix(info.Status.String(), "WORKFLOW_EXECUTION_STATUS_")))
	}
	st, err = queryState(ctx, c, id, isCampaign)
	if err == nil && st.campaign != nil {
		*st.campaign = workflow.WithRunsProgress(*st.campaign, activity.RunsProgressOf(d.PendingActivities))
	}
	return st, err
}

// queryState asks a running Campaign (or Task) for its state.
func queryState(ctx context.Context, c client.Client, id string, isCampaign bool) (*runState, error) {
	v, err := c.QueryWorkflow(ctx, id, "", workflow.QueryStatus)
	if err != nil {
		return nil, fmt.Errorf("query %s (is a worker running?): %w", id, err)
	}
	st := &runState{id: id}
	if isCampaign {
		st.campaign = &workflow.CampaignState{}
		err = v.Get(st.campaign)
	} else {
		st.task = &workflow.TaskState{}
		err = v.Get(st.task)
	}
	return st, err
}

// unitTask is the live state of a campaign unit's task while it runs
// (awaiting approval, say), or nil when the unit is not running or its task
// cannot be read.
func unitTask(ctx context.Context, c client.Client, u workflow.UnitResult) *workflow.TaskState {
	if u.Phase != workflow.TaskRunning || u.WorkflowID == "" {
		return nil
	}
	st, err := readState(ctx, c, u.WorkflowID)
	if err != nil || st.task == nil {
		return nil
	}
	return st.task
}

// write prints the run's state. Its messages, errors, repository names
// and file paths come from the run: their control characters are shown,
// not obeyed.
func (s *runState) write(w io.Writer) {
	tabs := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tabs.Flush()
	tw := visible.Writer(tabs)
	if c := s.campaign; c != nil {
		fmt.Fprintf(tw, "%s: %s", s.id, c.Phase)
		if c.Message != "" {
			fmt.Fprintf(tw, " (%s)", c.Message)
		}
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "REPOSITORY\tSTATUS\tPULL REQUEST\tERROR")
		for _, u := range c.Units {
			var prs []string
			for _, pr := range u.PRs {
				prs = append(prs, pr.URL)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Key, u.Phase, strings.Join(prs, " "), oneLine(u.Error))
		}
		sm := c.Summary
		fmt.Fprintf(tw, "%d repositories: %d completed, %d failed, %d skipped, %d cancelled, %d running; %d pull requests, %d reports\n",
			sm.Total, sm.Completed, sm.Failed, sm.Skipped, sm.Cancelled, sm.Running, sm.PRsCreated, sm.ReportsCollected)
		writeUsage(tw, campaignUsage(c))
		if s.closed && sm.Failed > 0 {
			fmt.Fprintf(tw, "run the failed repositories again with `fleetlift retry %s --failed-only`\n", s.id)
		}
		return
	}
	t := s.task
	fmt.Fprintf(tw, "%s: %s", s.id, t.Phase)
	if t.Message != "" {
		fmt.Fprintf(tw, " (%s)", t.Message)
	}
	fmt.Fprintln(tw)
	for _, n := range taskNotes(t) {
		fmt.Fprintf(tw, "note: %s\n", n)
	}
	var repos []workflow.RepoResult
	switch {
	case t.Final != nil:
		repos = t.Final.Repositories
		if t.Final.Error != "" {
			fmt.Fprintf(tw, "error: %s\n", oneLine(t.Final.Error))
		}
	case t.Result != nil:
		for _, r := range t.Result.Repositories {
			repos = append(repos, workflow.RepoResult{Name: r.Name, Status: r.Status, FilesModified: r.FilesModified, Error: r.Error})
		}
	}
	writeUsage(tw, taskUsage(t))
	if len(repos) == 0 {
		return
	}
	fmt.Fprintln(tw, "REPOSITORY\tSTATUS\tFILES\tPULL REQUEST\tERROR")
	for _, r := range repos {
		pr := ""
		if r.PullRequest != nil {
			pr = r.PullRequest.URL
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Name, r.Status, len(r.FilesModified), pr, oneLine(r.Error))
	}
	if t.Phase == workflow.TaskAwaitingApproval && t.Result != nil {
		fmt.Fprintln(tw, "changes awaiting approval:")
		for _, r := range t.Result.Repositories {
			for _, d := range r.Diffs {
				fmt.Fprintf(tw, "  %s/%s\t+%d -%d\n", r.Name, d.Path, d.Additions, d.Deletions)
			}
		}
	}
}

func oneLine(s string) string {
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
func campaignUsage(c *workflow.CampaignState) *protocol.ModelUsage {
	var sum *protocol.ModelUsage
	for _, u := range c.Units {
		sum = sum.Plus(u.ModelUsage)
	}
	if sum != nil {
		// A refusal is a unit's, shown with it, not the campaign's.
		sum.Refused = ""
	}
	return sum
}

// taskUsage is what t used of its model: its result's once it has ended,
// else its latest result's.
func taskUsage(t *workflow.TaskState) *protocol.ModelUsage {
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
	fmt.Fprintf(w, "model: %d requests, %d tokens (%d input, %d output, %d cache writes, %d cache reads)\n",
		u.Requests, u.Tokens(), u.InputTokens, u.OutputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens)
	if u.Refused != "" {
		fmt.Fprintf(w, "model: the gateway refused a request: %s\n", oneLine(u.Refused))
	}
}

// taskNotes are t's notes: its result's once it has ended.
func taskNotes(t *workflow.TaskState) []string {
	if t.Final != nil && len(t.Final.Notes) > 0 {
		return t.Final.Notes
	}
	return t.Notes
}
