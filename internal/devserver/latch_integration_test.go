package devserver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// mergedFrom is the forge: the pull request each commit of the
// campaigns repository was merged from, approved by someone other than
// its author.
type mergedFrom map[string]int

func (m mergedFrom) MergedPullRequest(_ context.Context, _, sha string) (*forge.PullRequest, []forge.Review, error) {
	n, ok := m[sha]
	if !ok {
		return nil, nil, nil
	}
	head := "head-of-" + sha
	return &forge.PullRequest{Number: n, State: forge.StateMerged, Base: "main", HeadSHA: head, Author: "bob"},
		[]forge.Review{{ID: 1, User: "alice", State: forge.ReviewApproved, CommitID: head, SubmittedAt: time.Now()}}, nil
}

// TestReviewedMergeLatchSurvivesRestart: a reviewed revision turns
// watch.require_reviewed_merge on; a commit pushed straight to main drops
// it, and the reconciler restarts. The new reconciler (a new gate and a
// new latch, on the same Temporal) still refuses the head: the
// requirement was kept in Temporal, not in the old process's memory.
// Only a reviewed merge turns it off, for every later reconciler too.
func TestReviewedMergeLatchSurvivesRestart(t *testing.T) {
	e := start(t)
	ctx := context.Background()
	const repo = "https://forge.example/acme/campaigns.git"
	// A worker runs the latch, as `fleetlift up` or `fleetlift worker` do:
	// it must keep running.
	w := worker.New(e.c, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.Latch)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	forgeSays := mergedFrom{"c1": 1, "c4": 2}
	// reconciler is what a (re)started reconciler builds: its launch gate.
	reconciler := func() *reconcile.ReviewedMergeGate {
		return &reconcile.ReviewedMergeGate{Hub: forgeSays, Repository: repo, Branch: "main",
			Latch: &dispatch.Latch{Client: e.c, ID: workflow.ReviewedMergeLatchID(repo, "main"), Name: "test"}}
	}
	revision := func(sha string, require bool) *desired.Revision {
		return &desired.Revision{SHA: sha, ConfigFile: "fleetlift.yaml",
			Config: &spec.Config{Watch: spec.Watch{Branch: "main", Path: "campaigns", RequireReviewedMerge: require}}}
	}

	g := reconciler()
	if err := g.Check(ctx, revision("c1", true)); err != nil {
		t.Fatalf("reviewed revision requiring reviewed merges: %v", err)
	}
	if err := g.Check(ctx, revision("c2", false)); !errors.Is(err, reconcile.ErrNotReviewed) {
		t.Fatalf("direct push dropping the requirement, same reconciler: %v, want ErrNotReviewed", err)
	}

	// Restarted: nothing in memory.
	g = reconciler()
	if err := g.Check(ctx, revision("c2", false)); !errors.Is(err, reconcile.ErrNotReviewed) {
		t.Fatalf("direct push dropping the requirement, restarted reconciler: %v, want ErrNotReviewed", err)
	}
	g = reconciler()
	if err := g.Check(ctx, revision("c3", false)); !errors.Is(err, reconcile.ErrNotReviewed) {
		t.Fatalf("another direct push, restarted again: %v, want ErrNotReviewed", err)
	}

	if err := g.Check(ctx, revision("c4", false)); err != nil {
		t.Fatalf("reviewed merge turning the requirement off: %v", err)
	}
	g = reconciler()
	if err := g.Check(ctx, revision("c5", false)); err != nil {
		t.Fatalf("direct push after the requirement was turned off by review, restarted reconciler: %v", err)
	}
}
