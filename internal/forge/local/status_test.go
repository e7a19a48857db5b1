package local_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/local"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

func (fx *fixture) status(t *testing.T) *forge.PullRequestStatus {
	t.Helper()
	st, err := fx.f.PullRequestStatus(fx.ctx, fx.url, 0, branch)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestPullRequestStatusFollowsTheBranchToMerged(t *testing.T) {
	fx := newFixture(t, true)
	head := fx.change(t, "package main // slog\n")
	fx.open(t)

	st := fx.status(t)
	if st.State != forge.StateOpen || st.Mergeable != forge.MergeableYes || st.Head != head || st.Base != "main" || len(st.Labels) != 1 {
		t.Fatalf("just opened: %+v", st)
	}

	// The base moves on in another file: still merges, but behind.
	gittest.Commit(t, fx.remote, "main", map[string]string{"README": "hello\n"})
	if st := fx.status(t); st.State != forge.StateOpen || st.Mergeable != forge.MergeableBehind {
		t.Fatalf("base moved: %+v", st)
	}

	// Someone changes the same line on the base: it conflicts.
	base := gittest.Commit(t, fx.remote, "main", map[string]string{"main.go": "package main // log\n"})
	if st := fx.status(t); st.State != forge.StateOpen || st.Mergeable != forge.MergeableConflict || st.BaseSHA != base {
		t.Fatalf("conflicting: %+v, base %s", st, base)
	}

	// A person resolves it and merges the branch; the branch stays.
	gittest.Run(t, fx.remote, "update-ref", "refs/heads/main", head)
	if st := fx.status(t); st.State != forge.StateMerged || st.Head != head {
		t.Fatalf("merged: %+v", st)
	}
	// Merged, then the branch deleted: still merged.
	gittest.Run(t, fx.remote, "update-ref", "-d", "refs/heads/"+branch)
	if st := fx.status(t); st.State != forge.StateMerged || st.Head != head {
		t.Fatalf("merged and deleted: %+v", st)
	}
}

func TestPullRequestStatusClosedWhenTheBranchIsGoneUnmerged(t *testing.T) {
	fx := newFixture(t, false)
	fx.change(t, "package main // slog\n")
	fx.open(t)
	gittest.Run(t, fx.remote, "update-ref", "-d", "refs/heads/"+branch)
	if st := fx.status(t); st.State != forge.StateClosed {
		t.Fatalf("deleted unmerged: %+v", st)
	}
}

func TestPullRequestStatusWithoutRecordSaysSo(t *testing.T) {
	fx := newFixture(t, false)
	if _, err := fx.f.PullRequestStatus(fx.ctx, fx.url, 0, branch); err == nil {
		t.Fatal("a branch never proposed has a status")
	}
}

func (fx *fixture) ref(t *testing.T) forge.PullRequestRef {
	return forge.PullRequestRef{Repository: fx.url, Branch: branch}
}

func TestMergeAndClose(t *testing.T) {
	fx := newFixture(t, true)
	head := fx.change(t, "package main // slog\n")
	fx.open(t)
	// The base moved on in another file meanwhile.
	gittest.Commit(t, fx.remote, "main", map[string]string{"README": "hello\n"})

	if err := fx.f.MergePullRequest(fx.ctx, fx.ref(t), forge.MergeOptions{Method: forge.MergeSquash}); !errors.Is(err, forge.ErrNotMergeable) {
		t.Errorf("squash: %v; want ErrNotMergeable", err)
	}
	if err := fx.f.MergePullRequest(fx.ctx, fx.ref(t), forge.MergeOptions{Head: strings.Repeat("a", 40)}); !errors.Is(err, forge.ErrHeadMoved) {
		t.Errorf("merge at another head: %v; want ErrHeadMoved", err)
	}
	if err := fx.f.MergePullRequest(fx.ctx, fx.ref(t), forge.MergeOptions{Head: head, DeleteBranch: true}); err != nil {
		t.Fatal(err)
	}
	// main holds both, as a merge commit; the branch is gone; it reads merged.
	if got := gittest.Run(t, fx.remote, "show", "main:main.go"); got != "package main // slog" {
		t.Errorf("main.go on main: %q", got)
	}
	if parents := strings.Fields(gittest.Run(t, fx.remote, "log", "-1", "--format=%P", "main")); len(parents) != 2 || parents[1] != head {
		t.Errorf("main's parents %v; want the old main and %s", parents, head)
	}
	if st := fx.status(t); st.State != forge.StateMerged {
		t.Errorf("after the merge: %+v", st)
	}
	// Merged again: nothing to do.
	if err := fx.f.MergePullRequest(fx.ctx, fx.ref(t), forge.MergeOptions{}); err == nil {
		t.Error("merged a branch that is gone")
	}
}

func TestMergeRefusesAConflictAndCloseDeletesTheBranch(t *testing.T) {
	fx := newFixture(t, false)
	fx.change(t, "package main // slog\n")
	fx.open(t)
	gittest.Commit(t, fx.remote, "main", map[string]string{"main.go": "package main // log\n"})
	if err := fx.f.MergePullRequest(fx.ctx, fx.ref(t), forge.MergeOptions{}); !errors.Is(err, forge.ErrNotMergeable) {
		t.Fatalf("conflicting merge: %v; want ErrNotMergeable", err)
	}
	if err := fx.f.ClosePullRequestAs(fx.ctx, fx.ref(t), "superseded", false); err != nil {
		t.Fatal(err)
	}
	if st := fx.status(t); st.State != forge.StateClosed {
		t.Errorf("after close: %+v", st)
	}
	// Closed again: nothing to do.
	if err := fx.f.ClosePullRequestAs(fx.ctx, fx.ref(t), "", false); err != nil {
		t.Errorf("close again: %v", err)
	}
}

// A stamp stays the same while nothing a read looks at moves, and
// changes when the base moves, the branch is pushed or deleted, or the
// record is rewritten: a follower that reads only on a new stamp misses
// nothing.
func TestPullRequestStampChangesWithWhatAReadSees(t *testing.T) {
	fx := newFixture(t, true)
	fx.change(t, "package main // slog\n")
	fx.open(t)
	stamp := func() string {
		t.Helper()
		s, err := fx.f.PullRequestStamp(fx.ctx, fx.url, 0, branch, "main")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	first := stamp()
	if st := fx.status(t); st.Stamp != first {
		t.Fatalf("a read says its stamp is %q, the stamp is %q", st.Stamp, first)
	}
	if again := stamp(); again != first {
		t.Fatalf("nothing moved, yet the stamp went from %q to %q", first, again)
	}
	seen := map[string]string{first: "opened"}
	moved := func(what string) {
		t.Helper()
		s := stamp()
		if was, ok := seen[s]; ok {
			t.Fatalf("after %s the stamp is %q, as after %s", what, s, was)
		}
		seen[s] = what
	}
	gittest.Commit(t, fx.remote, "main", map[string]string{"README": "hello\n"})
	moved("the base moved")
	head := gittest.Commit(t, fx.remote, branch, map[string]string{"main.go": "package main // slog, again\n"})
	moved("a push to the branch")
	gittest.Run(t, fx.remote, "update-ref", local.RecordRefPrefix+branch, head)
	moved("the record rewritten")
	gittest.Run(t, fx.remote, "update-ref", "-d", "refs/heads/"+branch)
	moved("the branch deleted")
	if _, err := fx.f.PullRequestStamp(fx.ctx, fx.url, 0, branch, "-main"); err == nil {
		t.Error("a stamp of a base that is no branch name")
	}
}
