package activity_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/local"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/status"
)

// countingForge is the local forge, counting the reads of a pull
// request's status.
type countingForge struct {
	*local.Forge
	reads atomic.Int32
}

func (f *countingForge) PullRequestStatus(ctx context.Context, repository string, number int, branch string) (*forge.PullRequestStatus, error) {
	f.reads.Add(1)
	return f.Forge.PullRequestStatus(ctx, repository, number, branch)
}

// A pass over pull requests on the local forge reads again only those
// whose stamp moved: one whose branch, base and record stand still
// keeps what was read (a read there fetches both branches and merges
// them, which at 10,000 pull requests took the machine); once the base
// moves, the next pass reads it and sees it behind.
func TestFollowReadsAgainOnlyWhatMoved(t *testing.T) {
	ctx := context.Background()
	g := &git.Git{Env: gittest.Env()}
	lf := local.New(g)
	t.Cleanup(func() { lf.Close() })
	f := &countingForge{Forge: lf}
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"main.go": "package main\n"})
	dir := filepath.Join(t.TempDir(), "svc")
	if err := g.Clone(ctx, remote, dir, git.CloneOptions{}); err != nil {
		t.Fatal(err)
	}
	const branch = "fleetlift/task-1"
	gittest.WriteFiles(t, dir, map[string]string{"main.go": "package main // changed\n"})
	head, err := g.Commit(ctx, dir, git.CommitOptions{Branch: branch, Message: "change"})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := lf.CreatePullRequest(ctx, forge.PullRequestRequest{Repository: remote, Dir: dir, Base: "main", Head: branch, Title: "Change"})
	if err != nil {
		t.Fatal(err)
	}
	a := &activity.Activities{Forges: func(string) (forge.Forge, error) { return f, nil }, Git: g, FileRoots: []string{filepath.Dir(remote)}}
	p := status.FollowedPR{Repo: "svc", PullRequestInfo: protocol.PullRequestInfo{URL: pr.URL, Branch: branch, Commit: head, Repository: remote, Forge: "local"}}

	activity.ReadPR(a, ctx, &p)
	if f.reads.Load() != 1 || p.State != forge.StateOpen || p.Mergeable != forge.MergeableYes || p.Stamp == "" || p.Error != "" {
		t.Fatalf("first pass: %d reads, %+v", f.reads.Load(), p)
	}
	first := p.CheckedAt
	activity.ReadPR(a, ctx, &p)
	if f.reads.Load() != 1 || p.State != forge.StateOpen || p.Mergeable != forge.MergeableYes || !p.CheckedAt.After(first) {
		t.Fatalf("nothing moved: %d reads, %+v", f.reads.Load(), p)
	}

	gittest.Commit(t, remote, "main", map[string]string{"README": "hello\n"})
	activity.ReadPR(a, ctx, &p)
	if f.reads.Load() != 2 || p.Mergeable != forge.MergeableBehind {
		t.Fatalf("the base moved: %d reads, %+v", f.reads.Load(), p)
	}
	activity.ReadPR(a, ctx, &p)
	if f.reads.Load() != 2 || p.Mergeable != forge.MergeableBehind {
		t.Fatalf("nothing moved since: %d reads, %+v", f.reads.Load(), p)
	}
}
