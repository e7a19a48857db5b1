package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/visible"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func newStatusCmd() *cobra.Command {
	var f temporalFlags
	var diff bool
	cmd := &cobra.Command{
		Use:   "status [ID]",
		Short: "Show runs, or one run's state per repository",
		Long: `Without ID, lists fleetlift's runs. With ID (campaign/<id>, task/<id>, or a bare
definition id), shows the run's phase, summary and per-repository results.
With --diff, also the patches of every result awaiting approval: what an
approval would push.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				c, err := f.dial(cmd.Context())
				if err != nil {
					return err
				}
				defer c.Close()
				return listRuns(cmd.Context(), c, f.namespace, cmd.OutOrStdout())
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
			st.write(cmd.OutOrStdout())
			st.writeAwaiting(cmd.Context(), c, cmd.OutOrStdout())
			if diff {
				st.writeDiffs(cmd.Context(), c, cmd.OutOrStdout())
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&diff, "diff", false, "print the patches awaiting approval")
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

func listRuns(ctx context.Context, c client.Client, ns string, w io.Writer) error {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: ns, PageSize: 200})
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	vw := visible.Writer(tw)
	fmt.Fprintln(vw, "ID\tTYPE\tSTATUS\tSTARTED")
	for _, e := range resp.Executions {
		if e.ParentExecution != nil {
			continue
		}
		fmt.Fprintf(vw, "%s\t%s\t%s\t%s\n", e.Execution.WorkflowId, e.Type.Name, listStatus(e),
			e.StartTime.AsTime().Local().Format("2006-01-02 15:04:05"))
	}
	return tw.Flush()
}

// listStatus is a run's status in the list: a campaign's phase as its
// memo records it (paused, or how it ended: completed_with_failures, …),
// else the workflow's status.
func listStatus(e *workflowpb.WorkflowExecutionInfo) string {
	status := strings.ToLower(strings.TrimPrefix(e.Status.String(), "WORKFLOW_EXECUTION_STATUS_"))
	if e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && e.Status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return status
	}
	p, ok := e.GetMemo().GetFields()[workflow.MemoPhase]
	var phase string
	if !ok || converterFor().FromPayload(p, &phase) != nil || phase == "" {
		return status
	}
	return phase
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
	v, err := c.QueryWorkflow(ctx, id, "", workflow.QueryStatus)
	if err != nil {
		return nil, fmt.Errorf("query %s (is a worker running?): %w", id, err)
	}
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
		s = s[:117] + "..."
	}
	return s
}
