package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/status/render"
)

func newPRsCmd() *cobra.Command {
	var f temporalFlags
	var output string
	var states []string
	var refresh bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "prs [ID]",
		Short: "List the pull requests runs opened and what became of each",
		Long: `Lists the pull requests a run opened (ID: campaign/<id>, task/<id>, or a bare
definition id), or every run's without ID, with what became of each on its
forge: open, draft, merged or closed; the review decision; the head commit's
checks together; whether it merges (conflicting, behind its base); and
whether someone other than fleetlift pushed to its branch. A worker reads
them from their forges every few minutes (its --pull-requests-every), within
the forge's request budget; one not read yet shows as "unread". --refresh has
them read now, and waits for it.

-o json prints {"format_version": 1, "pull_requests": [...], "counts": {...}}
(docs/pull-requests.md documents its fields).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, s := range states {
				if !slices.Contains(render.PRStates, s) {
					return usageErrorf("--state %s: want %s", s, orList(render.PRStates))
				}
			}
			ctx := cmd.Context()
			c, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			rd := runReader(c, f.namespace)
			var ids []string
			if len(args) == 1 {
				id, err := rd.Resolve(ctx, args[0])
				if err != nil {
					return err
				}
				ids = []string{id}
			} else {
				runs, err := rd.Runs(ctx)
				if err != nil {
					return err
				}
				for _, r := range runs {
					if (r.Workflow == "Campaign" || r.Workflow == "Task") && r.Definition != "" && !slices.Contains(ids, r.ID) {
						ids = append(ids, r.ID)
					}
				}
				slices.Sort(ids)
			}
			var out []render.RunPRs
			for _, id := range ids {
				st, err := rd.Status(ctx, id)
				if err != nil {
					if len(args) == 1 {
						return err
					}
					// A run that ended without a result (failed,
					// terminated) opened nothing to list.
					continue
				}
				if refresh {
					rctx, cancel := context.WithTimeout(ctx, wait)
					err := dispatch.RefreshPullRequests(rctx, c, st.Followers())
					cancel()
					if err != nil {
						return fmt.Errorf("%w (is a worker running?)", err)
					}
				}
				prs := rd.PullRequests(ctx, st)
				if len(states) > 0 {
					prs = slices.DeleteFunc(prs, func(p status.FollowedPR) bool { return !slices.Contains(states, render.PRState(p)) })
				}
				if len(prs) > 0 {
					out = append(out, render.RunPRs{Run: id, PRs: prs})
				}
			}
			if output == "json" {
				return render.PRsJSON(cmd.OutOrStdout(), out)
			}
			render.PRs(cmd.OutOrStdout(), out)
			return nil
		},
	}
	cmd.AddCommand(newPRsActCmd(status.ActMerge), newPRsActCmd(status.ActClose),
		newPRsRegenerateCmd(status.ActUpdate), newPRsRegenerateCmd(status.ActRetry))
	f.register(cmd)
	cmd.Flags().VarP(choiceVar(&output, "table", "table", "json"), "output", "o", "output format: table or json")
	cmd.Flags().StringSliceVar(&states, "state", nil, "list only pull requests in these states: "+strings.Join(render.PRStates, ", ")+" (repeatable)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "have a worker read them from their forges now, and wait for it")
	cmd.Flags().DurationVar(&wait, "refresh-timeout", 2*time.Minute, "how long reading the pull requests from their forges may take")
	return cmd
}

// newPRsActCmd is `fleetlift prs merge` or `fleetlift prs close`.
func newPRsActCmd(action string) *cobra.Command {
	var f temporalFlags
	var req status.ActRequest
	var output string
	req.Action = action
	cmd := &cobra.Command{
		Use:   action + " ID",
		Short: "Merge the pull requests of a run that are approved, green and mergeable",
		Long: `Merges the pull requests the run ID opened (all, or those of --repository) that
may be merged, as their forges have them now: open and no draft, merging
cleanly with their base, no failed or running checks, approved by a reviewer
(--unapproved: or not) with no changes requested. Each is merged at the head
just read: one someone pushed to since is refused, not merged unseen. The
forge's branch protection and merge queues apply as they do to a person; a
pull request it refuses is reported, and the others go on. A worker merges
them, with its credentials and within the forge's budget of writes; the
command waits for it and prints what became of each.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, id, err := f.dialRun(ctx, args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			st, err := runReader(c, f.namespace).Status(ctx, id)
			if err != nil {
				return err
			}
			outcomes, err := dispatch.ActOnPullRequests(ctx, c, st.Followers(), req)
			if err != nil {
				return fmt.Errorf("%w (is a worker running?)", err)
			}
			if output == "json" {
				return render.ActJSON(cmd.OutOrStdout(), id, action, outcomes)
			}
			render.Act(cmd.OutOrStdout(), action, outcomes)
			for _, o := range outcomes {
				if o.Outcome == status.ActFailed {
					return exitError{code: exitFailed}
				}
			}
			return nil
		},
	}
	if action == status.ActClose {
		cmd.Short = "Close the open pull requests of a run, with a comment"
		cmd.Long = `Closes the open pull requests the run ID opened (all, or those of --repository)
without merging them, leaving --comment on each, and deletes their branches
with --delete-branch (on the local forge, closing is deleting the branch).
A worker closes them, with its credentials and within the forge's budget of
writes; the command waits for it and prints what became of each.`
		cmd.Flags().StringVar(&req.Comment, "comment", "", "a comment to leave on each pull request closed")
	} else {
		cmd.Flags().StringVar(&req.Method, "method", "", "merge, squash or rebase (default: merge; the local forge merges only)")
		cmd.Flags().BoolVar(&req.Unapproved, "unapproved", false, "also merge pull requests no reviewer approved (never one with changes requested)")
	}
	cmd.Flags().StringSliceVar(&req.Repos, "repository", nil, "only the pull requests of these repositories, as the definition names them (repeatable)")
	cmd.Flags().BoolVar(&req.DeleteBranch, "delete-branch", false, "delete each branch once its pull request is merged or closed")
	cmd.Flags().VarP(choiceVar(&output, "table", "table", "json"), "output", "o", "output format: table or json")
	f.register(cmd)
	return cmd
}
