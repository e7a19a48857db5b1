package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/source"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// quiet is how long the negative check waits for a hint that must not
// come. It is the only fixed wait in these tests.
const quiet = 300 * time.Millisecond

// workTree returns a repository with a work tree whose main branch has
// one commit.
func workTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gittest.Run(t, dir, "init", "--quiet")
	gittest.Run(t, dir, "commit", "--quiet", "--allow-empty", "-m", "initial")
	return dir
}

func watch(t *testing.T, dir, branch string) reconcile.Hints {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hints, err := reconcile.WatchRepository(ctx, dir, branch)
	if err != nil {
		t.Fatalf("WatchRepository(%s, %s): %v", dir, branch, err)
	}
	return hints
}

func waitHint(t *testing.T, hints reconcile.Hints, after string) {
	t.Helper()
	select {
	case _, ok := <-hints:
		if !ok {
			t.Fatalf("hints closed; want a hint after %s", after)
		}
	case <-time.After(wait):
		t.Fatalf("no hint within %s after %s", wait, after)
	}
}

func TestWatchRepository(t *testing.T) {
	t.Run("commit on the watched branch", func(t *testing.T) {
		dir := workTree(t)
		hints := watch(t, dir, "main")
		gittest.Run(t, dir, "commit", "--quiet", "--allow-empty", "-m", "second")
		waitHint(t, hints, "a commit on main")
	})

	t.Run("update-ref of the watched branch", func(t *testing.T) {
		dir := workTree(t)
		first := gittest.Run(t, dir, "rev-parse", "HEAD")
		gittest.Run(t, dir, "commit", "--quiet", "--allow-empty", "-m", "second")
		hints := watch(t, dir, "main")
		gittest.Run(t, dir, "update-ref", "refs/heads/main", first)
		waitHint(t, hints, "update-ref refs/heads/main")
	})

	t.Run("other branches and the work tree do not hint", func(t *testing.T) {
		dir := workTree(t)
		hints := watch(t, dir, "main")
		gittest.Run(t, dir, "update-ref", "refs/heads/fleetlift/status", "HEAD")
		gittest.Run(t, dir, "update-ref", "refs/heads/feature", "HEAD")
		gittest.WriteFiles(t, dir, map[string]string{"campaigns/slog.yaml": camp{id: "slog"}.yaml()})
		select {
		case <-hints:
			t.Fatal("hint after changes to other branches and the work tree")
		case <-time.After(quiet):
		}
		// The watcher is alive: the negative check above means something.
		gittest.Run(t, dir, "commit", "--quiet", "--allow-empty", "-m", "second")
		waitHint(t, hints, "a commit on main")
	})

	t.Run("bare repository", func(t *testing.T) {
		bare := gittest.NewRemote(t, "", "campaigns", map[string]string{"README.md": "campaigns\n"})
		hints := watch(t, bare, "main")
		gittest.Commit(t, bare, "main", map[string]string{"campaigns/slog.yaml": camp{id: "slog"}.yaml()})
		waitHint(t, hints, "a push to main")
	})

	t.Run("branch with a slash, not there yet", func(t *testing.T) {
		dir := workTree(t)
		hints := watch(t, dir, "release/v1")
		gittest.Run(t, dir, "update-ref", "refs/heads/release/v1", "HEAD")
		waitHint(t, hints, "creating release/v1")
	})

	t.Run("closed when the context is done", func(t *testing.T) {
		dir := workTree(t)
		ctx, cancel := context.WithCancel(context.Background())
		hints, err := reconcile.WatchRepository(ctx, dir, "main")
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		deadline := time.After(wait)
		for {
			select {
			case _, ok := <-hints:
				if !ok {
					return
				}
			case <-deadline:
				t.Fatal("hints not closed after the context was cancelled")
			}
		}
	})

	t.Run("not a repository", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := reconcile.WatchRepository(context.Background(), dir, "main"); err == nil {
			t.Error("WatchRepository of an empty directory: no error")
		}
		if _, err := os.Stat(filepath.Join(dir, "refs")); err == nil {
			t.Error("WatchRepository of an empty directory created refs/ in it")
		}
	})
}

func TestMerge(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := make(chan struct{}), make(chan struct{})
	merged := reconcile.Merge(ctx, a, nil, b)
	for name, h := range map[string]chan struct{}{"a": a, "b": b} {
		send(t, h)
		waitHint(t, merged, "a hint on "+name)
	}
}

// TestWatchedRepositoryStartsCampaign runs the loop as `fleetlift up`
// does over a local campaigns repository: a push to the watched branch
// starts the campaign it adds, without waiting for the poll.
func TestWatchedRepositoryStartsCampaign(t *testing.T) {
	bare := gittest.NewRemote(t, "", "campaigns", map[string]string{
		"fleetlift.yaml":       config("main", false),
		"campaigns/first.yaml": camp{id: "first"}.yaml(),
	})
	repo, err := source.Open(context.Background(), source.Options{URL: bare, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness()
	h.r.Source = &reconcile.GitSource{Repo: repo, Ref: "main", Loader: &spec.Loader{Eval: spec.InProcess(1)}}
	h.recordStarts(t, state.PhaseRunning)
	hints := watch(t, bare, "main")
	passes, stop := loop(t, h, reconcile.LoopOptions{Interval: time.Hour, Hints: hints})

	if err := waitPass(t, passes, "at start"); err != nil {
		t.Fatal(err)
	}
	h.wantCalls(t, "first pass", "start first gen=1 rev="+gittest.Run(t, bare, "rev-parse", "main"))

	sha := gittest.Commit(t, bare, "main", map[string]string{"campaigns/second.yaml": camp{id: "second"}.yaml()})
	// The push may wake the loop more than once; wait for the pass that
	// sees it.
	for {
		if err := waitPass(t, passes, "after a push to main (the interval is an hour)"); err != nil {
			t.Fatal(err)
		}
		if calls := h.disp.take(); len(calls) > 0 {
			if want := "start second gen=1 rev=" + sha; len(calls) != 1 || calls[0] != want {
				t.Fatalf("after the push: dispatched %v, want [%s]", calls, want)
			}
			break
		}
	}
	stop()
}
