package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/status/render"
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
"awaiting_approval"} for one run.

Without a Temporal server at --temporal-address it starts the embedded one on
--state-dir's database for as long as it reads, so the runs of a
` + "`fleetlift run`" + ` can be read after it stopped.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			// Runs are read from the embedded server's database even
			// after the `fleetlift run` that ran them stopped it.
			c, closeAll, err := f.dialOrEmbed(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeAll()
			if len(args) == 0 {
				runs, err := runReader(c, f.namespace).Runs(cmd.Context())
				if err != nil {
					return err
				}
				if output == "json" {
					return render.ListJSON(w, runs)
				}
				return render.List(w, runs)
			}
			rd := runReader(c, f.namespace)
			id, err := rd.Resolve(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if f.embedded {
				if err := unattended(cmd.Context(), c, id); err != nil {
					return err
				}
			}
			st, err := rd.Status(cmd.Context(), id)
			if err != nil {
				return err
			}
			st.PullRequests = rd.PullRequests(cmd.Context(), st)
			if output == "json" {
				return render.JSON(w, st, rd.Awaiting(cmd.Context(), st), diff)
			}
			render.Human(w, st)
			waiting := rd.Awaiting(cmd.Context(), st)
			render.Awaiting(w, id, waiting)
			if diff {
				render.Diffs(w, waiting)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&diff, "diff", false, "print the patches awaiting approval")
	cmd.Flags().VarP(choiceVar(&output, "human", "human", "json"), "output", "o", "output format: human or json")
	return cmd
}

// unattended is an error for run id when it is running on the embedded
// server this command just started: no worker runs it (the `fleetlift
// run` or `up` that did stopped before its end, taking its server and
// worker with it), and its state, which a worker answers for, cannot be
// read.
func unattended(ctx context.Context, c client.Client, id string) error {
	d, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return err
	}
	if d.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil
	}
	return fmt.Errorf("%s is running, and nothing runs it now: the fleetlift command that ran it (`fleetlift run`, or `up`) stopped before its end, with its server and worker; run that command again to go on with it (or start `fleetlift server` and `fleetlift worker`)", id)
}
