package main

import (
	"github.com/spf13/cobra"

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
"awaiting_approval"} for one run.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			if len(args) == 0 {
				c, err := f.dial(cmd.Context())
				if err != nil {
					return err
				}
				defer c.Close()
				runs, err := runReader(c, f.namespace).Runs(cmd.Context())
				if err != nil {
					return err
				}
				if output == "json" {
					return render.ListJSON(w, runs)
				}
				return render.List(w, runs)
			}
			c, id, err := f.dialRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			rd := runReader(c, f.namespace)
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
