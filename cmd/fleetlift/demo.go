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

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

func newDemoCmd() *cobra.Command {
	var dir string
	var keep bool
	var timeout time.Duration
	var wf workerFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show the GitOps loop end to end on this machine, with no external service",
		Long: `Demo makes a campaigns repository and three target repositories under --dir,
starts what ` + "`fleetlift up`" + ` starts (embedded Temporal, a worker, sandboxes,
the reconciler watching the campaigns repository), and then walks the loop:

  1. commits a campaign to the campaigns repository's main branch;
  2. the reconciler sees the commit and starts it; each repository's change
     waits for approval;
  3. commits approval records, as the approver;
  4. the reconciler hands them to the waiting tasks; branches appear on the
     target repositories;
  5. prints the status mirror the reconciler wrote to the fleetlift/status
     branch.

Everything it makes stays under --dir for you to look at.

Its sandboxes are local processes unless --sandbox says otherwise: the demo
needs nothing but this binary and git. (With --sandbox docker the agent runs
as uid 1000 in containers, so --dir must be writable by that user.)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return runDemo(ctx, cmd, dir, keep, &wf)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", filepath.Join(os.TempDir(), "fleetlift-loop-demo"), "where to make the repositories (a directory an earlier demo made is emptied first)")
	cmd.Flags().BoolVar(&keep, "keep-running", false, "after the walk-through, keep running the loop until interrupted")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "give up after this long")
	wf.register(cmd)
	return cmd
}

func runDemo(ctx context.Context, cmd *cobra.Command, dir string, keep bool, wf *workerFlags) error {
	out := cmd.OutOrStdout()
	step := func(format string, args ...any) { fmt.Fprintf(out, "\n==> "+format+"\n", args...) }
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := resetDemoDir(dir); err != nil {
		return err
	}
	step("making a campaigns repository and three target repositories under %s", dir)
	targets, err := demo.Targets(ctx, dir)
	if err != nil {
		return err
	}
	campaigns := filepath.Join(dir, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		return err
	}
	fmt.Fprintf(out, "campaigns repository: %s\ntargets: %s\n", campaigns, strings.Join(targets, ", "))

	// What `fleetlift up` runs, on a port of its own so that a server the
	// user already runs is left alone.
	addr, err := listen.FreeAddr("127.0.0.1")
	if err != nil {
		return err
	}
	f := &temporalFlags{address: addr, namespace: devserver.Namespace, stateDir: filepath.Join(dir, "state")}
	step("starting the embedded Temporal server, a worker and the reconciler (fleetlift up)")
	c, closeAll, err := f.dialOrEmbed(ctx, out)
	if err != nil {
		return err
	}
	defer closeAll()
	// The demo's repositories are local, under dir.
	wf.fileRoots = append(wf.fileRoots, dir)
	if wf.providerName == "" {
		wf.providerName = sandboxLocal
	}
	w, err := newWorker(ctx, cmd.ErrOrStderr(), c, f, wf)
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer w.Stop()
	rf := &reconcileFlags{repo: campaigns, branch: "main", interval: 2 * time.Second, watch: true}
	logs := &syncbuf.Buffer{}
	loopCtx, stopLoop := context.WithCancel(ctx)
	defer stopLoop()
	loopDone := make(chan error, 1)
	go func() {
		sub := &cobra.Command{}
		sub.SetOut(io.Discard)
		sub.SetErr(logs)
		loopDone <- runReconciler(loopCtx, sub, c, f, rf)
	}()

	step("committing campaigns/go-version.yaml to main, as %s", demo.Author)
	if err := os.WriteFile(filepath.Join(campaigns, "campaigns", "go-version.yaml"), []byte(demo.Campaign(targets)), 0o644); err != nil {
		return err
	}
	if err := demo.Git(ctx, campaigns, demo.Author, "add", "campaigns/go-version.yaml"); err != nil {
		return err
	}
	if err := demo.Git(ctx, campaigns, demo.Author, "commit", "-q", "-m", "Raise the go directive everywhere"); err != nil {
		return err
	}

	reader := &statetemporal.Reader{Client: c, Namespace: f.namespace}
	step("waiting for the reconciler to start it and for each repository's change to await approval")
	var rec state.Campaign
	err = waitFor(ctx, func() (bool, error) {
		got, err := reader.Get(ctx, "demo-go-version")
		if errors.Is(err, state.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		rec = got
		return len(got.PendingApprovals) == len(targets), nil
	})
	if err != nil {
		return demoFailed(out, logs, err)
	}
	for _, p := range rec.PendingApprovals {
		var files []string
		for _, r := range p.Repos {
			for _, fl := range r.Files {
				files = append(files, fmt.Sprintf("%s/%s +%d -%d", r.Name, fl.Path, fl.Additions, fl.Deletions))
			}
		}
		fmt.Fprintf(out, "awaiting approval: %s (%s) %s\n", p.Target, approval.ShortDigest(p.ResultDigest), strings.Join(files, ", "))
	}

	step("committing approval records to main, as %s", demo.Approver)
	for _, p := range rec.PendingApprovals {
		// As approve --git writes it.
		d := approval.NewDraft(approval.Record{Target: p.Target, Action: approval.Approve, ResultDigest: p.ResultDigest, By: demo.Approver}, "")
		if err := os.WriteFile(filepath.Join(campaigns, filepath.FromSlash(d.File)), d.Encode(), 0o644); err != nil {
			return err
		}
		if err := demo.Git(ctx, campaigns, demo.Approver, "add", d.File); err != nil {
			return err
		}
	}
	if err := demo.Git(ctx, campaigns, demo.Approver, "commit", "-q", "-m", "Approve the go directive changes"); err != nil {
		return err
	}

	step("waiting for the approved changes to be pushed")
	err = waitFor(ctx, func() (bool, error) {
		got, err := reader.Get(ctx, "demo-go-version")
		if err != nil {
			return false, err
		}
		rec = got
		return got.Phase.Done(), nil
	})
	if err != nil {
		return demoFailed(out, logs, err)
	}
	fmt.Fprintf(out, "campaign %s\n", rec.Phase)
	for _, r := range rec.Repos {
		fmt.Fprintf(out, "  %-10s %-10s %s\n", r.Name, r.Status, r.PullRequestURL)
	}
	for _, t := range targets {
		branches, _ := demo.Output(ctx, "", demo.Author, "ls-remote", "--heads", t, "fleetlift/*")
		fmt.Fprintf(out, "%s: %s", filepath.Base(t), branches)
	}

	step("the status mirror on the campaigns repository's fleetlift/status branch")
	err = waitFor(ctx, func() (bool, error) {
		readme, err := demo.Output(ctx, campaigns, demo.Author, "show", "fleetlift/status:README.md")
		if err != nil {
			return false, nil
		}
		if strings.Contains(readme, "| Campaign | completed |") {
			fmt.Fprint(out, readme)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return demoFailed(out, logs, err)
	}
	fmt.Fprintf(out, "\nThe demo's repositories are under %s; see `git -C %s log --oneline main fleetlift/status`.\n", dir, campaigns)
	if keep {
		fmt.Fprintf(out, "The loop keeps running: commit to %s and watch. Ctrl-C stops it.\n", campaigns)
		<-ctx.Done()
	}
	stopLoop()
	if err := <-loopDone; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// demoMarker marks a directory the demo made, so that only such a
// directory is ever emptied.
const demoMarker = ".fleetlift-demo"

// resetDemoDir empties dir for a new demo: only when it is missing, empty,
// or made by an earlier demo.
func resetDemoDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	case len(entries) == 0:
	default:
		if _, err := os.Stat(filepath.Join(dir, demoMarker)); err != nil {
			return fmt.Errorf("%s is not empty and was not made by `fleetlift demo`: choose another --dir", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, demoMarker), []byte("made by fleetlift demo; emptied by the next one\n"), 0o644)
}

// demoFailed prints the reconciler's log, which says why.
func demoFailed(out io.Writer, logs *syncbuf.Buffer, err error) error {
	fmt.Fprintf(out, "\nthe reconciler's log:\n%s\n", logs.String())
	return err
}

// waitFor polls cond every 200ms until it holds, fails, or ctx ends.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting: %w", context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
