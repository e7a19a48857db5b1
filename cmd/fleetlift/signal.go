package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/visible"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// newTaskSignalCmd makes approve, reject and steer: for a task they signal
// it; for a campaign they signal each of its tasks awaiting approval (or
// only --repository). With --git they commit approval records to a clone
// of the campaigns repository instead (approvegit.go).
func newTaskSignalCmd(name, short string, signal string) *cobra.Command {
	var f temporalFlags
	var g gitFlags
	var prompt, unit string
	cmd := &cobra.Command{
		Use:   name + " ID --digest D | " + name + " --git CLONE [ID | --target T --digest D]",
		Short: short,
		Long:  taskSignalLong(name),
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if signal == workflow.SignalSteer && prompt == "" {
				return usageErrorf("steer needs --prompt: what the agent should do differently")
			}
			if g.clone != "" {
				d := &gitDecision{action: name, prompt: prompt, unit: unit, flags: &g, out: visible.Writer(cmd.OutOrStdout())}
				return d.run(cmd.Context(), &f, args)
			}
			if err := onlyWithGit(cmd); err != nil {
				return err
			}
			if len(args) != 1 {
				return usageErrorf("%s needs the run's ID", name)
			}
			digests := commaList(g.digest)
			if len(digests) == 0 {
				return usageErrorf("%s needs --digest: the digest of the result you decide on, as `fleetlift status %s` shows it (a decision names exactly what it decides)", name, args[0])
			}
			c, id, err := f.dialRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			targets, err := awaitingTasks(cmd.Context(), c, id, unit)
			if err != nil {
				return err
			}
			if len(targets) == 0 {
				return fmt.Errorf("%s has no task awaiting approval", id)
			}
			chosen, err := chooseByDigest(id, targets, digests)
			if err != nil {
				return err
			}
			for _, t := range chosen {
				d := workflow.DecisionSignal{ResultDigest: t.digest}
				var arg any = d
				if signal == workflow.SignalSteer {
					arg = workflow.SteerSignal{Prompt: prompt, DecisionSignal: d}
				}
				if err := c.SignalWorkflow(cmd.Context(), t.id, "", signal, arg); err != nil {
					return fmt.Errorf("%s %s: %w", name, t.id, err)
				}
				fmt.Fprintf(visible.Writer(cmd.OutOrStdout()), "%s: sent %s for result %s\n", t.id, name, t.digest)
			}
			return nil
		},
	}
	f.register(cmd)
	g.register(cmd)
	cmd.Flags().StringVar(&unit, "repository", "", "only this repository (or group) of a campaign")
	if signal == workflow.SignalSteer {
		cmd.Flags().StringVar(&prompt, "prompt", "", "feedback for the agent (required)")
	}
	return cmd
}

func taskSignalLong(name string) string {
	return `Without --git, ` + name + ` signals the run in Temporal directly: the task, or the
tasks of a campaign (only --repository's with that flag), whose result awaiting
approval has the digest --digest names (repeat it for several); ` + "`fleetlift status ID`" + `
shows each result's digest. A decision that names no result, or a result that
has changed since, is refused.

With --git CLONE, a local clone of the campaigns repository, ` + name + ` decides
the GitOps way: for each result awaiting approval it writes an approval record
(approvals/<target>.yaml), checks it as the reconciler will, and commits it to
the clone's current branch with your own Git configuration and identity. The
results and their digests come from Temporal (the run ID; --repository picks
one); offline, name one with --target and --digest, as ` + "`fleetlift status`" + ` or the
approval pull request shows them. A different record already at that path is
replaced only with --force.

The record's by, your forge login, is --by, else
` + "`git config fleetlift.login`" + `, else ` + "`git config user.name`" + `. The reconciler counts a
record only when the commit that brings it onto the watched branch is by that
login (Git name, e-mail or the e-mail's local part) and the login may approve
the campaign.

--push then pushes the current branch to its upstream. --pull-request pushes
the commit (made on the current branch all the same) to
fleetlift/approval-record/<target>-<digest> on the branch's remote and opens a
pull request against the watched branch, on the forge the clone's
fleetlift.yaml selects among those you allow: --forge-type and --forge-url
(or $` + envForgeType + ` and $` + envForgeURL + `) with the token in $` + envForgeToken + `
(or the variable --forge-token-env names), or --forge. The repository never
says where a token goes. Without --push or --pull-request, it commits and says
how to push.`
}

// awaiting is a task workflow awaiting approval of the result digest.
type awaiting struct {
	id, digest string
}

// awaitingTasks lists the task workflows under id that await approval.
func awaitingTasks(ctx context.Context, c client.Client, id, unit string) ([]awaiting, error) {
	rd := runReader(c, "")
	st, err := rd.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	if st.Task != nil {
		if st.Task.Phase != status.TaskAwaitingApproval {
			return nil, fmt.Errorf("%s is %s, not awaiting approval", id, st.Task.Phase)
		}
		return []awaiting{{id, st.Task.ResultDigest}}, nil
	}
	var out []awaiting
	for _, u := range st.Campaign.Units {
		if unit != "" && u.Key != unit {
			continue
		}
		if t := rd.UnitTask(ctx, u); t != nil && t.Phase == status.TaskAwaitingApproval {
			out = append(out, awaiting{u.WorkflowID, t.ResultDigest})
		}
	}
	return out, nil
}

// minDigestPrefix is the shortest digest prefix a decision may name.
const minDigestPrefix = 12

// chooseByDigest picks the tasks whose result the digests name: each digest
// (or unique prefix of at least minDigestPrefix characters, "sha256:"
// aside) must name a result awaiting approval, else nothing is decided.
func chooseByDigest(id string, tasks []awaiting, digests []string) ([]awaiting, error) {
	var chosen []awaiting
	for _, want := range digests {
		want = strings.TrimSpace(want)
		if len(strings.TrimPrefix(want, "sha256:")) < minDigestPrefix {
			return nil, fmt.Errorf("--digest %q is too short: give at least %d characters of the digest `fleetlift status %s` shows", want, minDigestPrefix, id)
		}
		var matched []awaiting
		for _, t := range tasks {
			if strings.HasPrefix(t.digest, want) || strings.HasPrefix(strings.TrimPrefix(t.digest, "sha256:"), want) {
				matched = append(matched, t)
			}
		}
		switch {
		case len(matched) == 0:
			return nil, fmt.Errorf("no result awaiting approval in %s has digest %s: it may have changed since you looked (`fleetlift status %s` shows the current ones)", id, want, id)
		case len(matched) > 1:
			return nil, fmt.Errorf("--digest %s names more than one result in %s: give more of it", want, id)
		}
		chosen = append(chosen, matched...)
	}
	return chosen, nil
}

// newCampaignSignalCmd makes continue and abort.
func newCampaignSignalCmd(name, short, signal string) *cobra.Command {
	var f temporalFlags
	var skip bool
	cmd := &cobra.Command{
		Use:   name + " ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, id, err := f.dialRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			var arg any
			if signal == workflow.SignalContinue {
				arg = workflow.ContinueSignal{SkipRemaining: skip}
			}
			if err := c.SignalWorkflow(cmd.Context(), id, "", signal, arg); err != nil {
				return fmt.Errorf("%s %s: %w", name, id, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: sent %s\n", id, name)
			return nil
		},
	}
	f.register(cmd)
	if signal == workflow.SignalContinue {
		cmd.Flags().BoolVar(&skip, "skip-remaining", false, "finish without starting the repositories not yet started")
	}
	return cmd
}

func newRetryCmd() *cobra.Command {
	var f temporalFlags
	var failedOnly bool
	cmd := &cobra.Command{
		Use:   "retry ID --failed-only",
		Short: "Run a campaign's failed repositories again",
		Long: `While the campaign runs, it queues its failed repositories to run again. When it
has finished, a new run of the same campaign starts with only the failed
repositories, keeping the results of the others.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !failedOnly {
				return usageErrorf("retry needs --failed-only (retrying everything is `fleetlift run` again)")
			}
			c, id, err := f.dialRun(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			n, err := dispatch.RetryFailed(cmd.Context(), c, id)
			if errors.Is(err, dispatch.ErrNothingToRerun) {
				return fmt.Errorf("%s has no failed repositories", id)
			}
			if err != nil {
				return err
			}
			if n == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: failed repositories queued to run again\n", id)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: started again for %d failed repositories\n", id, n)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&failedOnly, "failed-only", false, "retry only the repositories that failed")
	return cmd
}

// commaList splits a comma-separated list, dropping blanks.
func commaList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
