package agent_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// inFlight wraps a forge and counts the pull requests being opened at
// once: each waits (up to a second) until want of them are open, as a
// forge's round trip keeps a serial agent waiting.
type inFlight struct {
	forge.Forge
	want int

	mu       sync.Mutex
	now, max int
}

func (f *inFlight) CreatePullRequest(ctx context.Context, req forge.PullRequestRequest) (*forge.PullRequest, error) {
	f.mu.Lock()
	f.now++
	f.max = max(f.max, f.now)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	}()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		enough := f.max >= f.want
		f.mu.Unlock()
		if enough {
			break
		}
	}
	return f.Forge.CreatePullRequest(ctx, req)
}

// TestGroupRepositoriesInParallel: a group's repositories are cloned,
// changed and proposed Manifest.Parallel at once, so four pull requests
// are open at the forge together; without it, one after another. Either
// way every repository gets its pull request and the progress counts
// them all.
func TestGroupRepositoriesInParallel(t *testing.T) {
	for _, parallel := range []int{0, 4} {
		t.Run(fmt.Sprintf("parallel %d", parallel), func(t *testing.T) {
			parent := t.TempDir()
			var repos []protocol.Repository
			for i := range 6 {
				name := fmt.Sprintf("svc-%d", i)
				repos = append(repos, repo(name, gittest.NewRemote(t, parent, name, map[string]string{"README.md": "# " + name + "\n"})))
			}
			o := options(t)
			local, err := o.Forges("local")
			if err != nil {
				t.Fatal(err)
			}
			f := &inFlight{Forge: local, want: max(parallel, 1)}
			o.Forges = func(string) (forge.Forge, error) { return f, nil }
			m := manifest(repos...)
			m.Parallel = parallel
			m.Execution.Command = sh("echo changed >> README.md")
			res := run(t, o, m)
			if res.Status != protocol.PhaseComplete {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			for _, r := range repos {
				if got := repoResult(t, res, r.Name); got.Status != "success" || got.PullRequest == nil {
					t.Errorf("%s: %s, pull request %v (%s)", r.Name, got.Status, got.PullRequest, got.Error)
				}
			}
			if want := max(parallel, 1); f.max != want {
				t.Errorf("%d pull requests opened at once, want %d", f.max, want)
			}
		})
	}
}
