package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/plan/render"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/repoquery"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/state/file"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/visible"
)

func newPlanCmd() *cobra.Command {
	var f temporalFlags
	var repo, ref, base, sub, stateArg, output, commentOn string
	var detailed bool
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

--comment-on posts the plan (markdown) on a pull request of the campaigns
repository, on the forge the config selects (at --base, the branch people
trust) among those you allow (--forge-type/--forge-url, --forge). It keeps one
comment of its own there, found by a marker and edited in place: the plan,
with the errors when definitions are invalid, or why no plan could be made.
It also sets the fleetlift/plan commit status on the pull request's head (which
branch protection can require): pending while it plans, then success with the
plan's summary, failure when definitions are invalid, or error when no plan
could be made.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if repo == "" {
				return usageErrorf("--repo is required")
			}
			var target pullRequestRef
			if commentOn != "" {
				var err error
				if target, err = parseCommentOn(repo, commentOn); err != nil {
					return err
				}
			}
			ctx := cmd.Context()
			src, err := source.Open(ctx, source.Options{URL: repo, CacheDir: filepath.Join(f.stateDir, "source")})
			if err != nil {
				return err
			}
			// The forge to comment on comes first, so that a plan that
			// cannot be made is commented too.
			var c *planComment
			if commentOn != "" {
				if c, err = newPlanComment(ctx, src, &forges, base, ref, target); err != nil {
					return err
				}
			}
			p, err := makePlan(ctx, src, &f, &forges, ref, base, sub, stateArg, budget)
			if err != nil {
				if c != nil {
					if cerr := c.failed(ctx, err); cerr != nil {
						return fmt.Errorf("%w; and %v", err, cerr)
					}
				}
				return err
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
			if c != nil {
				if err := c.plan(ctx, p); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "plan commented on %s\n", c.target)
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
	cmd.Flags().VarP(choiceVar(&output, "human", "human", "json", "markdown"), "output", "o", "output format: human, json or markdown")
	cmd.Flags().BoolVar(&detailed, "detailed-exitcode", false, "exit 2 when there are changes, as terraform plan does")
	registerLoadBudget(cmd, &budget)
	cmd.Flags().StringVar(&commentOn, "comment-on", "", "also post the plan on this pull request, keeping one comment of fleetlift's up to date there: its number on --repo, or its URL (https://github.com/OWNER/NAME/pull/N) when --repo is a local clone")
	forges.register(cmd)
	return cmd
}

// makePlan plans ref (merged into base, when given) against the recorded
// state stateArg names.
func makePlan(ctx context.Context, src *source.Repo, f *temporalFlags, forges *forgeFlags, ref, base, sub, stateArg string, budget time.Duration) (plan.Plan, error) {
	// The recorded state is read while the revision loads: reaching
	// Temporal (or finding it gone) and listing its runs wait on the
	// network, the load on CUE.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type read struct {
		recorded []state.Campaign
		source   plan.Recorded
		err      error
	}
	reading := make(chan read, 1)
	go func() {
		var r read
		r.recorded, r.source, r.err = readRecorded(sctx, f, stateArg)
		reading <- r
	}()
	head, err := loadRevision(ctx, src, ref, sub, budget)
	if err != nil {
		return plan.Plan{}, err
	}
	r := <-reading
	recorded, source := r.recorded, r.source
	if r.err != nil {
		return plan.Plan{}, r.err
	}
	// Repository queries are resolved as the reconciler resolves them:
	// against the forge the revision's config selects, and pinned to a
	// run applied from the very revision planned.
	var rs *repoquery.Resolver
	resolve := func(rev *desired.Revision) *desired.Revision {
		if !slices.ContainsFunc(rev.Desired.Definitions, spec.Definition.Unresolved) {
			return rev
		}
		if rs == nil {
			// Both revisions of --base see one listing of each owner.
			rs = forges.resolver(rev.Config).Once()
		}
		return rs.Revision(ctx, rev, repoquery.Pinned(recorded, rev.SHA))
	}
	head = resolve(head)
	if base != "" {
		prior, err := loadRevision(ctx, src, base, sub, budget)
		if err != nil {
			return plan.Plan{}, err
		}
		prior = resolve(prior)
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
	return p, nil
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
	loader := &spec.Loader{Eval: pool, Limits: spec.Limits{RevisionBudget: budget}}
	rev, err := desired.Read(ctx, loader, root, sha, sub)
	if err != nil {
		return nil, err
	}
	// The plan shows approval records as the reconciler would take them.
	if err := reconcile.GateApprovals(ctx, src, reconcile.RepoApprovers{Repo: src, Loader: loader}, rev, nil); err != nil {
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
