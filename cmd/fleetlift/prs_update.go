package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/status/render"
)

// newPRsRegenerateCmd is `fleetlift prs update` or `fleetlift prs retry`.
func newPRsRegenerateCmd(action string) *cobra.Command {
	var f temporalFlags
	var repos []string
	var output string
	var wait time.Duration
	mode := status.KeepBehind
	cmd := &cobra.Command{
		Use:   action + " ID",
		Short: "Make the changes of a campaign's out-of-date pull requests again on their bases",
		Long: `Makes again the change of each open pull request of the campaign ID that is out
of date (conflicting with its base or behind it; with --repository, those
named, whatever their state): its repository's unit runs again, on the base
as it is now, and pushes to the same branch, so the pull request is brought
up to date with its change made anew rather than rebased. A change that
needs approval needs it again. A pull request someone else pushed to is
left alone: fleetlift never overwrites their commits. The pull requests are
read from their forges first; the command returns once the units are
queued (a campaign that has ended starts again with only them), and
` + "`fleetlift status`" + ` follows them.`,
		Example: `  fleetlift prs update campaign/slog-rollout
  fleetlift prs update slog-rollout --repository payments`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, id, err := f.dialRun(ctx, args[0])
			if err != nil {
				return err
			}
			defer c.Close()
			rd := runReader(c, f.namespace)
			st, err := rd.Status(ctx, id)
			if err != nil {
				return err
			}
			if why := dispatch.Regenerable(st); why != "" {
				return fmt.Errorf("%s: %s", id, why)
			}
			rctx, cancel := context.WithTimeout(ctx, wait)
			err = dispatch.RefreshPullRequests(rctx, c, st.Followers())
			cancel()
			if err != nil {
				return fmt.Errorf("%w (is a worker running?)", err)
			}
			outcomes, units := regenerable(rd.PullRequests(ctx, st), mode, repos)
			if len(units) > 0 {
				if _, err := dispatch.Regenerate(ctx, c, id, units); err != nil && !errors.Is(err, dispatch.ErrNothingToRerun) {
					return err
				}
			}
			if output == "json" {
				return render.ActJSON(cmd.OutOrStdout(), id, action, outcomes)
			}
			render.Act(cmd.OutOrStdout(), action, outcomes)
			return nil
		},
	}
	if action == status.ActRetry {
		mode = status.KeepFailing
		cmd.Short = "Make the changes of a campaign's pull requests whose checks failed again"
		cmd.Long = `Makes again the change of each open pull request of the campaign ID whose
checks failed (with --repository, of those named, whatever their checks): its
repository's unit runs again, on the base as it is now, and pushes to the
same branch. As ` + "`fleetlift prs update`" + `, it needs approval again where the
campaign requires it, and never overwrites a branch someone else pushed to.`
		cmd.Example = `  fleetlift prs retry slog-rollout`
	}
	f.register(cmd)
	cmd.Flags().StringSliceVar(&repos, "repository", nil, "only the pull requests of these repositories, as the definition names them, whatever their state (repeatable)")
	cmd.Flags().VarP(choiceVar(&output, "table", "table", "json"), "output", "o", "output format: table or json")
	cmd.Flags().DurationVar(&wait, "refresh-timeout", 2*time.Minute, "how long reading the pull requests from their forges may take")
	return cmd
}

// regenerable says of each pull request of prs (those of repos, when
// named) whether its change is made again as mode says, and lists the
// units to run again. A pull request named in repos is made again
// whatever its state, if it is open and fleetlift's alone.
func regenerable(prs []status.FollowedPR, mode string, repos []string) ([]status.ActOutcome, []string) {
	var out []status.ActOutcome
	var units []string
	for _, p := range prs {
		if len(repos) > 0 && !slices.Contains(repos, p.Repo) {
			continue
		}
		if why, _ := status.RegenerateBlocker(p, mode, len(repos) > 0); why != "" {
			out = append(out, status.ActOutcome{Repo: p.Repo, URL: p.URL, Outcome: status.ActSkipped, Reason: why})
			continue
		}
		out = append(out, status.ActOutcome{Repo: p.Repo, URL: p.URL, Outcome: status.ActDone})
		if !slices.Contains(units, p.Unit) {
			units = append(units, p.Unit)
		}
	}
	return out, units
}
