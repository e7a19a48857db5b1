package local_test

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge"
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
