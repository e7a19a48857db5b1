package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/state/file"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/visible"
)

func newPlanCmd() *cobra.Command {
	var f temporalFlags
	var repo, ref, base, sub, stateArg, output string
	var detailed bool
	var commentOn int
	var forges forgeFlags
	var budget time.Duration
	cmd := &cobra.Command{
		Use:   "plan --repo PATH|URL",
		Short: "Show what applying the campaigns repository at a revision would change",
		Long: `Plan reads the campaigns repository at --ref (default HEAD), validates every
definition, and compares them with the recorded run state (--state): what would
be created, updated (with a per-field diff), suspended or resumed, and what is
orphaned or would be pruned. Invalid definitions show as errors for their file;
every other campaign is still planned.

With --base, it plans what merging --ref into --base would change: the check
for a pull request on the campaigns repository. Without recorded state, the
base's definitions count as applied.

--state auto (the default) reads the recorded state from Temporal when it can
be reached, and otherwise plans without it, saying so in the plan ("Assumed:
..."): a pull request's CI needs no server.

Exit status: 0 success; 1 error (including invalid definitions); with
--detailed-exitcode, 2 when there are changes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				return fmt.Errorf("--repo is required")
			}
			switch output {
			case "human", "json", "markdown":
			default:
				return fmt.Errorf("unknown output format %q: use human, json or markdown", output)
			}
			ctx := cmd.Context()
			src, err := source.Open(ctx, source.Options{URL: repo, CacheDir: filepath.Join(f.stateDir, "source")})
			if err != nil {
				return err
			}
			head, err := loadRevision(ctx, src, ref, sub, budget)
			if err != nil {
				return err
			}
			recorded, source, err := readRecorded(ctx, &f, stateArg)
			if err != nil {
				return err
			}
			if base != "" {
				prior, err := loadRevision(ctx, src, base, sub, budget)
				if err != nil {
					return err
				}
				recorded = overlayApplied(recorded, prior.Desired.Definitions)
			}
			p := plan.Compute(head.Desired, recorded, head.Policy())
			p.Recorded = source
			if source.Assumed != "" {
				if base != "" {
					p.Recorded.Assumed += fmt.Sprintf("; the definitions at %s count as applied, and no run's phase is known.", base)
				} else {
					p.Recorded.Assumed += "; nothing counts as applied: every definition shows as new."
				}
			}
			w := cmd.OutOrStdout()
			switch output {
			case "json":
				err = render.JSON(w, p)
			case "markdown":
				err = render.Markdown(visible.Writer(w), p)
			default:
				err = render.Human(w, p, render.Options{Color: isTerminal(w)})
			}
			if err != nil {
				return err
			}
			if commentOn > 0 {
				if err := commentPlan(ctx, src, &forges, repo, base, ref, commentOn, p); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "plan commented on pull request %d\n", commentOn)
			}
			switch {
			case len(p.Errors) > 0:
				return exitError{code: 1}
			case detailed && p.HasChanges():
				return exitError{code: 2}
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&repo, "repo", "", "the campaigns repository: a path, file://, https:// or ssh URL")
	cmd.Flags().StringVar(&ref, "ref", "HEAD", "the revision to plan: branch, tag or commit")
	cmd.Flags().StringVar(&base, "base", "", "plan what merging --ref into this revision would change")
	cmd.Flags().StringVar(&sub, "path", "", "the definitions directory inside the repository (default: the config's watch.path, else the root)")
	cmd.Flags().StringVar(&stateArg, "state", "auto", "recorded state: auto (Temporal when it can be reached, else none, and the plan says so), temporal, file:PATH or none")
	cmd.Flags().StringVarP(&output, "output", "o", "human", "output format: human, json or markdown")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 2 when there are changes, as terraform plan does")
	registerLoadBudget(cmd, &budget)
	cmd.Flags().IntVar(&commentOn, "comment-on", 0, "also post the plan (markdown) as a comment on this pull request of --repo, editing fleetlift's earlier plan comment (on the forge the config selects among --forge-type/--forge-url and --forge)")
	forges.register(cmd)
	return cmd
}

// registerLoadBudget adds --load-budget, the spec.Limits.RevisionBudget
// of reading one revision, to cmd.
func registerLoadBudget(cmd *cobra.Command, budget *time.Duration) {
	cmd.Flags().DurationVar(budget, "load-budget", spec.DefaultLimits.RevisionBudget,
		"the most time reading one revision of the campaigns repository may take: files not loaded by then are errors, and what they define is left as it is")
}

// loadRevision reads the desired state at ref within budget.
func loadRevision(ctx context.Context, src *source.Repo, ref, sub string, budget time.Duration) (*desired.Revision, error) {
	sha, err := src.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	root, err := src.FS(ctx, sha, "")
	if err != nil {
		return nil, err
	}
	pool, err := spec.NewSelfPool()
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	rev, err := desired.Read(ctx, &spec.Loader{Eval: pool, Limits: spec.Limits{RevisionBudget: budget}}, root, sha, sub)
	if err != nil {
		return nil, err
	}
	// The plan shows approval records as the reconciler would take them.
	if err := reconcile.GateApprovals(ctx, src, rev, nil); err != nil {
		return nil, err
	}
	return rev, nil
}

// autoDialTimeout bounds how long --state auto tries to reach Temporal
// before it plans without it.
const autoDialTimeout = 10 * time.Second

// readRecorded reads the recorded run state named by --state, and says
// where it came from. With auto, a Temporal that cannot be reached (a
// pull request's CI, a laptop without a server) means none: the plan says
// so, and what it assumed.
func readRecorded(ctx context.Context, f *temporalFlags, arg string) ([]state.Campaign, plan.Recorded, error) {
	switch {
	case arg == "none":
		return nil, plan.Recorded{Source: "none"}, nil
	case strings.HasPrefix(arg, "file:"):
		cs, err := file.New(strings.TrimPrefix(arg, "file:")).List(ctx)
		return cs, plan.Recorded{Source: arg}, err
	case arg == "temporal", arg == "auto":
		dctx := ctx
		if arg == "auto" {
			var cancel context.CancelFunc
			dctx, cancel = context.WithTimeout(ctx, autoDialTimeout)
			defer cancel()
		}
		c, err := f.dial(dctx)
		if err != nil && arg == "auto" {
			return nil, plan.Recorded{Source: "none", Assumed: fmt.Sprintf("no recorded state (Temporal at %s cannot be reached: %v)", f.address, errors.Unwrap(err))}, nil
		}
		if err != nil {
			return nil, plan.Recorded{}, fmt.Errorf("%w (or plan offline with --state none or --state file:PATH)", err)
		}
		defer c.Close()
		cs, err := (&statetemporal.Reader{Client: c, Namespace: f.namespace}).List(ctx)
		return cs, plan.Recorded{Source: "temporal"}, err
	}
	return nil, plan.Recorded{}, fmt.Errorf("unknown --state %q: use auto, temporal, file:PATH or none", arg)
}

// overlayApplied adds the base revision's definitions to the recorded
// state as if applied, where nothing is recorded for them: the plan then
// shows what merging changes. Their runs' phase is not known, so none is
// claimed.
func overlayApplied(recorded []state.Campaign, defs []spec.Definition) []state.Campaign {
	have := map[string]bool{}
	for _, c := range recorded {
		have[c.ID] = true
	}
	for _, d := range defs {
		if have[d.ID] {
			continue
		}
		c := state.Campaign{ID: d.ID, Kind: state.Kind(d.Kind), File: d.File, SpecDigest: d.Digest}
		var v any = d.Task
		if d.Campaign != nil {
			v = d.Campaign
			c.Prune, c.Suspended = d.Campaign.SyncPolicy.Prune, d.Campaign.Suspend
		}
		if b, err := json.Marshal(v); err == nil {
			c.Spec = b
		}
		recorded = append(recorded, c)
	}
	return recorded
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// planMarker marks fleetlift's plan comment on a pull request, so that a
// new plan edits it instead of adding another.
const planMarker = "<!-- fleetlift:plan -->"

// commentPlan posts the plan as markdown on pull request number of repo,
// on the forge the config selects among the operator's (read at base
// when given: the branch people trust, not the proposed change).
func commentPlan(ctx context.Context, src *source.Repo, forges *forgeFlags, repo, base, ref string, number int, p plan.Plan) error {
	at := base
	if at == "" {
		at = ref
	}
	fs, problems, err := readForge(ctx, src, at, forges)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("--comment-on needs the forge from the config at %s, which is invalid: %w", at, problems)
	}
	if fs.Hub == nil {
		return fmt.Errorf("--comment-on needs a forge with pull requests: the config at %s selects forge %s", at, fs.Type)
	}
	var b bytes.Buffer
	b.WriteString(planMarker + "\n")
	if err := render.Markdown(&b, p); err != nil {
		return err
	}
	return fs.Hub.UpsertComment(ctx, repo, number, planMarker, b.String())
}
