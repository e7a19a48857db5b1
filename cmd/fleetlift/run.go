package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"golang.org/x/term"

	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/repoquery"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	runfollow "github.com/fleetlift/fleetlift/internal/status/follow"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func newRunCmd() *cobra.Command {
	var f temporalFlags
	var wf workerFlags
	var ff forgeFlags
	var file string
	var noWorker, detach, failedOnly bool
	var approvalTimeout, hostTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "run --file FILE",
		Short: "Run one Task or Campaign definition now and show its progress",
		Long: `Run submits the definition in FILE (a Task or a Campaign) and follows it to the
end, printing per-repository progress and a result table. Without a Temporal
server at --temporal-address (default 127.0.0.1:7233) it starts the embedded one,
and it runs a worker in this process unless --no-worker is given.

A run that needs approval waits: see the result and its digest with
` + "`fleetlift status ID --diff`" + ` from another terminal, then decide with
` + "`fleetlift approve ID --digest D`" + ` (or reject, steer --prompt).

Stopped before its end (Ctrl-C) with the embedded server and a worker in
this process, the run stops too and is kept in the state directory: the
same command again goes on with it where it stopped. Another version of the
same definition is refused while it is there.

Local repositories (file:// URLs and absolute paths) are cloned only from
under a directory given with --allow-file-root.

Pull requests are opened on the forge --forge-type and --forge-url allow (or
FLEETLIFT_FORGE_TYPE and FLEETLIFT_FORGE_URL), with the token in
$FLEETLIFT_FORGE_TOKEN (or the variable --forge-token-env names); without
one, branches are pushed to the repositories themselves.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf("--file is required")
			}
			if failedOnly && noWorker && !detach {
				return usageErrorf("--failed-only runs the failed repositories with this process's worker: drop --no-worker, or add --detach")
			}
			if detach && !listening(f.address) {
				// The embedded server, and a worker in this process,
				// would stop as the command returns, and the run with
				// them.
				return fmt.Errorf("--detach leaves the run to a Temporal server and workers that outlive this command, and nothing listens at %s: start them first (`fleetlift up`, or `fleetlift server` and `fleetlift worker`), or run without --detach", f.address)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			def, err := loadOne(ctx, file)
			if err != nil {
				return err
			}
			opts := workflow.Options{ApprovalTimeout: approvalTimeout, HostTimeout: hostTimeout}
			// The forge the operator allows opens the pull requests; with
			// none, branches are pushed to the repositories themselves
			// (the local forge).
			fs, err := workerForge(&ff)
			if err != nil {
				return err
			}
			if fs != nil {
				opts.Forge = fs.Type
				wf.forge = fs
			}
			if def.Unresolved() {
				if *def, err = resolveOne(ctx, file, *def, fs); err != nil {
					return err
				}
			}
			start, err := workflow.ForDefinition(*def, opts)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			c, closeAll, err := f.dialOrEmbed(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closeAll()
			// Stopped after the worker: another `fleetlift run`'s
			// embedded server may stop under this one.
			defer f.standIn(ctx, cmd.ErrOrStderr())()
			// News of this process's worker's activities: the follow
			// reads the run when there is some.
			var news *runfollow.News
			// Detached, the run is the server's workers' to run: one
			// in this process would stop as the command returns.
			if !noWorker && !detach {
				news = runfollow.NewNews()
				wf.activityNews, wf.unitStarted, wf.unitEnded = news.Tell, news.UnitStarted, news.UnitEnded
				w, err := newWorker(ctx, cmd.ErrOrStderr(), c, &f, &wf)
				if err != nil {
					return err
				}
				if err := w.Start(); err != nil {
					return fmt.Errorf("start worker: %w", err)
				}
				defer w.Stop()
			}
			if failedOnly {
				if err := retryFailed(ctx, c, start, *def, out); err != nil {
					return err
				}
			} else {
				run, resumed, err := submit(ctx, c, start, *def, opts)
				if err != nil {
					return err
				}
				if resumed {
					fmt.Fprintf(out, "going on with %s (run %s): it was already running this definition\n", start.WorkflowID, run.GetRunID())
				} else {
					fmt.Fprintf(out, "started %s (run %s)\n", start.WorkflowID, run.GetRunID())
				}
			}
			if detach {
				return nil
			}
			return follow(ctx, c, f.namespace, start.WorkflowID, out, runfollow.Options{TTY: isTerminal(out), News: news,
				GoesOn: goesOn(&f, noWorker), Retry: retryHint(&f, cmd)})
		},
	}
	f.register(cmd)
	wf.register(cmd)
	ff.register(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "definition file (.yaml, .yml or .cue)")
	cmd.Flags().BoolVar(&noWorker, "no-worker", false, "do not run a worker in this process (workers run elsewhere)")
	cmd.Flags().BoolVar(&failedOnly, "failed-only", false, "run only the repositories that failed in the campaign's last run of this definition again, keeping the others' results (as fleetlift retry --failed-only does)")
	cmd.Flags().BoolVar(&detach, "detach", false, "start and return, leaving the run to the server's workers (no worker in this process; the server must be running); follow with: fleetlift status ID")
	cmd.Flags().DurationVar(&approvalTimeout, "approval-timeout", 0, "cancel a task that waits longer than this for approval (0: wait)")
	registerHostTimeout(cmd, &hostTimeout)
	return cmd
}

// loadOne loads and validates one definition file.
func loadOne(ctx context.Context, file string) (*spec.Definition, error) {
	pool, err := spec.NewSelfPool()
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	dir, name := filepath.Split(file)
	if dir == "" {
		dir = "."
	}
	res, err := (&spec.Loader{Eval: pool}).LoadFiles(ctx, os.DirFS(dir), name)
	if err != nil {
		return nil, err
	}
	if len(res.Errors) > 0 {
		for _, e := range res.Errors {
			e.File = filepath.Join(dir, e.File)
		}
		return nil, res.Errors
	}
	if len(res.Definitions) != 1 {
		return nil, fmt.Errorf("%s holds no definition", file)
	}
	return &res.Definitions[0], nil
}

// resolveOne resolves the repositories_from of d, loaded from file,
// against fs, the forge the operator allows (nil: the local forge).
func resolveOne(ctx context.Context, file string, d spec.Definition, fs *forgeSetup) (spec.Definition, error) {
	rs := &repoquery.Resolver{}
	if fs != nil {
		c := *fs
		if err := c.connect(nil); err != nil {
			return d, err
		}
		rs = c.resolver()
	}
	defs, errs := rs.Definitions(ctx, []spec.Definition{d}, nil)
	if len(errs) > 0 {
		for _, e := range errs {
			e.File = filepath.Join(filepath.Dir(file), e.File)
		}
		return d, spec.Errors(errs)
	}
	return defs[0], nil
}

// submit starts the workflow, a finished one again with the next
// generation. A run already going for the same id with the same
// definition (one a `fleetlift run` stopped before its end left in the
// database) is gone on with, and resumed says so; one going with another
// definition is an error.
func submit(ctx context.Context, c client.Client, s workflow.Start, d spec.Definition, opts workflow.Options) (run client.WorkflowRun, resumed bool, err error) {
	gen := int64(1)
	prev, err := c.DescribeWorkflowExecution(ctx, s.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil:
		gen = dispatch.Generation(prev.WorkflowExecutionInfo) + 1
	case !errors.As(err, &nf):
		return nil, false, fmt.Errorf("look up %s: %w", s.WorkflowID, err)
	}
	run, err = dispatch.StartRun(ctx, c, d, opts, "", gen)
	if errors.Is(err, dispatch.ErrAlreadyRunning) || errors.Is(err, dispatch.ErrAlreadyStarted) {
		run, err = goOn(ctx, c, s, d, opts)
		return run, err == nil, err
	}
	return run, false, err
}

// goOn is the run of s going already, when it runs d: a campaign run in
// pages is sent its pages of units again (it takes those its start never
// sent, should the process that started it have stopped first).
func goOn(ctx context.Context, c client.Client, s workflow.Start, d spec.Definition, opts workflow.Options) (client.WorkflowRun, error) {
	cur, err := c.DescribeWorkflowExecution(ctx, s.WorkflowID, "")
	if err != nil {
		return nil, fmt.Errorf("look up %s: %w", s.WorkflowID, err)
	}
	info := cur.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, fmt.Errorf("%s was started meanwhile, and has ended: see it with `fleetlift status %s`", s.WorkflowID, s.WorkflowID)
	}
	gen := dispatch.Generation(info)
	if dispatch.SpecDigest(info) != d.Digest {
		stop := "`fleetlift reject " + s.WorkflowID + "` when it awaits approval"
		if s.Campaign != nil {
			stop = "`fleetlift abort " + s.WorkflowID + "`"
		}
		return nil, fmt.Errorf("%s is already running another version of this definition (generation %d): go on with it with the file it started from, or stop it (%s) before running this one",
			s.WorkflowID, gen, stop)
	}
	runID := info.GetExecution().GetRunId()
	if s.Campaign != nil {
		if _, pieces := workflow.Split(*s.Campaign); len(pieces) > 0 {
			t := &dispatch.Temporal{Client: c, Options: opts}
			rec := state.Campaign{ID: d.ID, WorkflowID: s.WorkflowID, RunID: runID, Generation: gen, AwaitingPieces: 1}
			if err := t.ResendPieces(ctx, d, rec); err != nil {
				return nil, err
			}
		}
	}
	return c.GetWorkflow(ctx, s.WorkflowID, runID), nil
}

// retryFailed runs the failed repositories of campaign s again, as
// `fleetlift retry --failed-only` does, when its last run was of d.
func retryFailed(ctx context.Context, c client.Client, s workflow.Start, d spec.Definition, out io.Writer) error {
	if s.Campaign == nil {
		return usageErrorf("--failed-only runs a campaign's failed repositories again; %s is a task: run it without --failed-only", d.ID)
	}
	prev, err := c.DescribeWorkflowExecution(ctx, s.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return fmt.Errorf("%s has not run: run it without --failed-only", s.WorkflowID)
	case err != nil:
		return fmt.Errorf("look up %s: %w", s.WorkflowID, err)
	}
	if dispatch.SpecDigest(prev.GetWorkflowExecutionInfo()) != d.Digest {
		return fmt.Errorf("%s last ran another version of this definition: run this one whole (without --failed-only), or retry with the file it last ran", s.WorkflowID)
	}
	n, err := dispatch.RetryFailed(ctx, c, s.WorkflowID)
	switch {
	case errors.Is(err, dispatch.ErrNothingToRerun):
		return fmt.Errorf("%s has no failed repositories", s.WorkflowID)
	case err != nil:
		return err
	case n == 0:
		fmt.Fprintf(out, "%s: its failed repositories queued to run again\n", s.WorkflowID)
	default:
		fmt.Fprintf(out, "started %s again for %d failed repositories\n", s.WorkflowID, n)
	}
	return nil
}

// retryHint is the command that runs a campaign's failed repositories
// again after this run: this one with --failed-only, where the server
// stopped with it; otherwise `fleetlift retry` ("") with the server's
// workers.
func retryHint(f *temporalFlags, cmd *cobra.Command) string {
	if !f.embedded {
		return ""
	}
	return againFailedOnly(cmd)
}

// againFailedOnly is the command line of cmd (`fleetlift run` with the
// flags it was given) with --failed-only.
func againFailedOnly(cmd *cobra.Command) string {
	line := []string{"fleetlift", "run"}
	cmd.Flags().Visit(func(fl *pflag.Flag) {
		if fl.Name == "failed-only" || fl.Name == "detach" {
			return
		}
		if fl.Value.Type() == "bool" {
			if fl.Value.String() == "true" {
				line = append(line, "--"+fl.Name)
			} else {
				line = append(line, "--"+fl.Name+"=false")
			}
			return
		}
		values := []string{fl.Value.String()}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			values = sv.GetSlice()
		}
		for _, v := range values {
			if v == "" || strings.ContainsAny(v, " \t'\"\\$`;&|<>()*?[]#~") {
				v = "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
			}
			line = append(line, "--"+fl.Name, v)
		}
	})
	return strings.Join(append(line, "--failed-only"), " ")
}

// goesOn says how a run goes on once `fleetlift run` stops following it:
// with the embedded server this process started, and a worker in it,
// only when the same command runs again.
func goesOn(f *temporalFlags, noWorker bool) string {
	switch {
	case f.embedded:
		return fmt.Sprintf("it stopped with this process and is kept in %s: run the same command again to go on with it",
			filepath.Join(f.stateDir, "temporal.db"))
	case !noWorker:
		return "it goes on where a worker runs (`fleetlift worker`), or here when you run the same command again"
	}
	return ""
}

// follow follows run id to its end (runfollow.Run, shown as o says),
// then a report's reports; it exits 1 when the run fell short.
func follow(ctx context.Context, c client.Client, namespace, id string, w io.Writer, o runfollow.Options) error {
	o.Ended = func(w io.Writer) { writeRunReports(ctx, c, namespace, id, w) }
	err := runfollow.Run(ctx, runReader(c, namespace), id, w, o)
	switch {
	case errors.Is(err, runfollow.ErrInterrupted):
		return errInterrupted
	case errors.Is(err, runfollow.ErrFellShort):
		return exitError{code: 1}
	}
	return err
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
