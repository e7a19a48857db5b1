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
	f.register(cmd)
	cmd.Flags().VarP(choiceVar(&output, "table", "table", "json"), "output", "o", "output format: table or json")
	cmd.Flags().StringSliceVar(&states, "state", nil, "list only pull requests in these states: "+strings.Join(render.PRStates, ", ")+" (repeatable)")
	cmd.Flags().BoolVar(&refresh, "refresh", false, "have a worker read them from their forges now, and wait for it")
	cmd.Flags().DurationVar(&wait, "refresh-timeout", 2*time.Minute, "how long --refresh waits for the reads")
	return cmd
}
