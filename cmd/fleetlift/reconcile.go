package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/leader"
	"github.com/fleetlift/fleetlift/internal/metrics"
	"github.com/fleetlift/fleetlift/internal/mirror"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/reconcile/reviews"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/visible"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// reconcileFlags configure the reconciler.
type reconcileFlags struct {
	repo, branch, path string
	interval           time.Duration
	watch              bool
	once               bool
	webhookListen      string
	webhookSecretEnv   string
	webhookRepos       []string
	noStatus           bool
	statusBranch       string
	approvalTimeout    time.Duration
	hostTimeout        time.Duration
	leaderElect        bool
	// forges are the forges the repository config may select.
	forges     forgeFlags
	loadBudget time.Duration
	// metrics, set by the command (see observe), records the passes and
	// webhook deliveries; nil: not kept.
	metrics *metrics.Metrics
	mf      metricsFlags
}

func (r *reconcileFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&r.repo, "repo", "", "the campaigns repository: a path, file://, https:// or ssh URL")
	fl.StringVar(&r.branch, "branch", "main", "the branch to launch from; the repository config's watch.branch must agree")
	fl.StringVar(&r.path, "path", "", "the definitions directory inside the repository (default: the config's watch.path, else the root)")
	fl.DurationVar(&r.interval, "interval", 30*time.Second, "poll interval: a pass runs at least this often")
	fl.BoolVar(&r.watch, "watch", true, "for a local repository, also react to commits as they happen (fsnotify)")
	fl.BoolVar(&r.once, "once", false, "run one pass, print what it did, and exit")
	fl.StringVar(&r.webhookListen, "webhook-listen", "", "address for the GitHub/Gitea webhook receiver of the campaigns and target repositories, e.g. :8080 (off when empty)")
	fl.StringVar(&r.webhookSecretEnv, "webhook-secret-env", "FLEETLIFT_WEBHOOK_SECRET", "environment variable holding the webhook secret")
	fl.StringSliceVar(&r.webhookRepos, "webhook-repo", nil, "clone URL of the campaigns repository as the forge knows it (default: --repo when it is a URL)")
	fl.BoolVar(&r.noStatus, "no-status", false, "do not write the status mirror branch")
	fl.StringVar(&r.statusBranch, "status-branch", "", "branch of the campaigns repository the status mirror is written to (default: the config's status.branch)")
	fl.DurationVar(&r.approvalTimeout, "approval-timeout", 0, "cancel a task that waits longer than this for approval (0: wait)")
	registerHostTimeout(cmd, &r.hostTimeout)
	fl.BoolVar(&r.leaderElect, "leader-elect", false, "run as one of several replicas: only the holder of a lease in Temporal reconciles (the replicas run the lease themselves)")
	r.forges.register(cmd)
	registerLoadBudget(cmd, &r.loadBudget)
	r.mf.register(cmd)
}

// observe starts the command's logging and metrics (see observe) and
// hands the metrics to the reconciler and the forges.
func (r *reconcileFlags) observe(cmd *cobra.Command, f *temporalFlags) (*observability, error) {
	o, err := observe(cmd, &r.mf, f)
	if err != nil {
		return nil, err
	}
	r.metrics, r.forges.metrics = o.metrics, o.metrics
	return o, nil
}

func newReconcileCmd() *cobra.Command {
	var f temporalFlags
	var rf reconcileFlags
	cmd := &cobra.Command{
		Use:   "reconcile --repo PATH|URL",
		Short: "Watch a campaigns repository and make the runs in Temporal follow it",
		Long: `Reconcile watches the campaigns repository's branch (--branch) and, on each
pass, plans the definitions there against the runs recorded in Temporal and
carries the plan out: new campaigns start, changed ones update or restart as
their sync_policy says, suspended ones stop starting tasks, removed ones are
cancelled where pruning is allowed, and approval records are handed to the
runs waiting for them. A pass runs every --interval, on each commit to a local
repository, and on each verified webhook delivery (--webhook-listen) from the
campaigns repository. Deliveries from a repository where a run has an open
pull request have the followers of those pull requests read them at once.

Approval pull requests, reviews and team membership go to a forge only when
you allow it: --forge-type and --forge-url (or $` + envForgeType + ` and
$` + envForgeURL + `), with its token in $` + DefaultForgeTokenEnv + ` (or the variable
--forge-token-env names), or one --forge per forge. The repository config's
forge section selects one of them; it never chooses a URL or a token.

It needs a Temporal server (--temporal-address) and workers; ` + "`fleetlift up`" + ` runs
all of it in one process.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o, err := rf.observe(cmd, &f)
			if err != nil {
				return err
			}
			defer o.stop()
			c, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			return runReconciler(ctx, cmd, c, &f, &rf)
		},
	}
	f.register(cmd)
	rf.register(cmd)
	return cmd
}

func newUpCmd() *cobra.Command {
	var f temporalFlags
	var rf reconcileFlags
	var wf workerFlags
	var ui string
	cmd := &cobra.Command{
		Use:   "up --repo PATH|URL",
		Short: "Run everything in one process: embedded Temporal, a worker and the reconciler",
		Long: `Up runs fleetlift's whole loop on this machine with no external service: the
embedded Temporal server (persisting under --state-dir), a worker with its
sandboxes (--sandbox: local processes, or Docker containers where an engine
answers), and the reconciler watching the campaigns repository (--repo).
Commit a campaign to the watched branch and it starts; commit an approval
record and the waiting task goes on. Stop it with Ctrl-C; runs resume where
they were when it starts again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o, err := rf.observe(cmd, &f)
			if err != nil {
				return err
			}
			defer o.stop()
			wf.metrics = o.metrics
			c, closeAll, err := f.dialOrEmbed(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeAll()
			if ui != "" {
				stopUI, err := serveUI(cmd, ui, &f)
				if err != nil {
					return err
				}
				defer stopUI()
			}
			src, fs, err := openCampaigns(ctx, &f, &rf)
			if err != nil {
				return err
			}
			wf.forge = fs
			w, err := newWorker(ctx, cmd.ErrOrStderr(), c, &f, &wf)
			if err != nil {
				return err
			}
			if err := w.Start(); err != nil {
				return fmt.Errorf("start worker: %w", err)
			}
			defer w.Stop()
			return runReconcilerOn(ctx, cmd, c, &f, &rf, src, fs)
		},
	}
	f.register(cmd)
	rf.register(cmd)
	metricsDefault(cmd, &rf.mf)
	wf.register(cmd)
	registerUI(cmd, &ui)
	return cmd
}

// runReconciler builds the reconciler and runs it until ctx is done (or,
// with --once, for one pass).
func runReconciler(ctx context.Context, cmd *cobra.Command, c client.Client, f *temporalFlags, rf *reconcileFlags) error {
	src, fs, err := openCampaigns(ctx, f, rf)
	if err != nil {
		return err
	}
	return runReconcilerOn(ctx, cmd, c, f, rf, src, fs)
}

// openCampaigns opens the campaigns repository and reads which of the
// operator's forges its config selects.
func openCampaigns(ctx context.Context, f *temporalFlags, rf *reconcileFlags) (*source.Repo, *forgeSetup, error) {
	if rf.repo == "" {
		return nil, nil, usageErrorf("--repo is required")
	}
	src, err := source.Open(ctx, source.Options{URL: rf.repo, CacheDir: filepath.Join(f.stateDir, "source")})
	if err != nil {
		return nil, nil, err
	}
	// A config that does not load: the local forge, and the passes
	// report its problems and launch nothing.
	fs, _, err := readForge(ctx, src, rf.branch, &rf.forges)
	if err != nil {
		return nil, nil, err
	}
	return src, fs, nil
}

func runReconcilerOn(ctx context.Context, cmd *cobra.Command, c client.Client, f *temporalFlags, rf *reconcileFlags, src *source.Repo, fs *forgeSetup) error {
	logger := f.log
	if logger == nil {
		var err error
		if logger, err = processLogger(cmd); err != nil {
			return err
		}
	}
	pool, err := spec.NewSelfPool()
	if err != nil {
		return err
	}
	defer pool.Close()
	r := &reconcile.Reconciler{
		Source:   &reconcile.GitSource{Repo: src, Ref: rf.branch, Path: rf.path, Loader: &spec.Loader{Eval: pool, Limits: spec.Limits{RevisionBudget: rf.loadBudget}, Cache: spec.NewCache(0)}},
		State:    &statetemporal.Reader{Client: c, Namespace: f.namespace},
		Dispatch: &dispatch.Temporal{Client: c, Options: workflow.Options{ApprovalTimeout: rf.approvalTimeout, HostTimeout: rf.hostTimeout, Forge: fs.Type}},
		Branch:   rf.branch,
		Log:      logger,
		Notifier: dispatch.Notifications{Client: c},
	}
	if rf.metrics != nil {
		r.Observer = rf.metrics
	}
	if fs != nil && fs.Budget != nil {
		// Join the workers' budgets no worker in this process gave the
		// forge's requests (see forgeSetup.shareWrites).
		if id, _, ok := fs.shareWrites(c, -1, -1, 0, true, rf.metrics); ok {
			logger.Info("forge writes: joining the account's shared write budget while the workers run it; paced here otherwise", "forge", fs.Name, "budget", id)
		}
	}
	// watch.require_reviewed_merge: only commits merged from reviewed pull
	// requests launch. Wired without a forge too, so that such a config
	// launches nothing rather than everything. The requirement is kept in
	// Temporal, so that a restart does not forget it.
	gate := &reconcile.ReviewedMergeGate{Repository: rf.repo, Branch: rf.branch, Log: logger,
		Latch: &dispatch.Latch{Client: c, ID: workflow.ReviewedMergeLatchID(rf.repo, rf.branch),
			Name: fmt.Sprintf("watch.require_reviewed_merge of %s, branch %s", gitx.Redact(rf.repo), rf.branch)}}
	// The forge is the one selected at the start: a revision that selects
	// another launches nothing.
	if r.Gate, err = newForgeGate(&rf.forges, fs, gate); err != nil {
		return err
	}
	r.Repositories = fs.resolver()
	if fs.Hub != nil {
		gate.Hub = fs.Hub
		// Approvals are reviews of approval pull requests, besides
		// committed records; teams in approver rules are asked of the forge.
		r.Source.(*reconcile.GitSource).IsMember = fs.Hub.IsMember
		r.Reviews = &reviews.PullRequests{
			Hub: fs.Hub, Repository: rf.repo, Base: rf.branch, History: src, Log: logger,
			Git: &gitx.Git{TokenEnv: fs.TokenEnv, TokenOrigins: repoOrigins(rf.repo)},
		}
		logger.Info("forge", "name", fs.Name, "type", fs.Type, "url", fs.URL)
	}
	if !rf.noStatus {
		m, err := newStatusMirror(rf.repo, rf.branch, rf.statusBranch)
		if err != nil {
			return err
		}
		r.Mirror = m
	}
	if rf.once {
		res, err := r.Once(ctx)
		if err != nil {
			return err
		}
		printPass(cmd.OutOrStdout(), res)
		if len(res.Failed()) > 0 {
			return exitError{code: 1}
		}
		return nil
	}

	var hints []reconcile.Hints
	if local := source.LocalDir(rf.repo); local != "" && rf.watch {
		h, err := reconcile.WatchRepository(ctx, local, rf.branch)
		if err != nil {
			return err
		}
		hints = append(hints, h)
	}
	var e *leader.Elector
	if rf.leaderElect {
		e = &leader.Elector{Client: c, Log: logger}
	}
	if rf.webhookListen != "" {
		prs := dispatch.NewPullRequestHints(c, 0, logger)
		h, stopHooks, err := serveWebhooks(ctx, rf, logger, prs, c, e)
		if err != nil {
			return err
		}
		defer stopHooks()
		hints = append(hints, h)
		observers := passObservers{prs}
		if r.Observer != nil {
			observers = append(observers, r.Observer)
		}
		r.Observer = observers
		go prs.Run(ctx)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "reconciling %s (branch %s) every %s\n", gitx.Redact(rf.repo), rf.branch, rf.interval)
	loop := reconcile.LoopOptions{Interval: rf.interval, Hints: reconcile.Merge(ctx, hints...)}
	if e == nil {
		if rf.metrics != nil {
			rf.metrics.Reconciling(func() bool { return true })
		}
		return r.Run(ctx, loop)
	}
	// Several replicas: only the one holding the lease reconciles; it
	// stops the moment it may have lost it. The replicas run the lease
	// workflow themselves, so they elect a leader with no worker running.
	lw, err := leader.Serve(c)
	if err != nil {
		return err
	}
	defer lw.Stop()
	if rf.metrics != nil {
		rf.metrics.Reconciling(e.IsLeader)
	}
	return e.Run(ctx, func(lctx context.Context) {
		if err := r.Run(lctx, loop); err != nil {
			logger.Error("reconcile loop", "error", err)
		}
	})
}

// printPass says what one pass did.
func printPass(w io.Writer, res *reconcile.Result) {
	w = visible.Writer(w)
	s := res.Plan.Summary()
	fmt.Fprintf(w, "revision %s: %d created, %d updated, %d suspended, %d resumed, %d pruned, %d approvals applied, %d errors\n",
		shortSHA(res.Revision), s.Create, s.Update, s.Suspend, s.Resume, s.Prune, s.ApprovalsApplied, s.Errors)
	for _, e := range res.Plan.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	for _, o := range res.Outcomes {
		mark := "ok"
		if o.Err != nil {
			mark = "failed"
		}
		fmt.Fprintf(w, "%s\t%s\n", mark, o)
	}
	for _, a := range res.Plan.Approvals {
		if a.Status == plan.ApprovalIgnored {
			fmt.Fprintf(w, "ignored\t%s: %s\n", a.Record.File, a.Reason)
		}
	}
}

// newStatusMirror writes the status to the campaigns repository's status
// branch (--status-branch, else the config's status.branch), never to the
// watched one.
func newStatusMirror(repo, watched, branch string) (reconcile.Mirror, error) {
	m := &mirror.Branch{Git: &gitx.Git{TokenOrigins: repoOrigins(repo)}, Repository: repo, Branch: branch, Watched: watched}
	if branch != "" {
		if _, err := m.Ref(); err != nil {
			return nil, err
		}
	} else if watched == mirror.DefaultBranch {
		return nil, fmt.Errorf("the watched branch %s is the default status branch: set --status-branch", watched)
	}
	return m, nil
}

// repoOrigins is where git may send a token for the campaigns repository:
// its own origin, which the operator chose with --repo.
func repoOrigins(repo string) []string {
	if o, err := gitx.Origin(repo); err == nil {
		return []string{o}
	}
	return nil
}
