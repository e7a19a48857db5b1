package agent_test

import (
	"fmt"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// TestGroupRepositoriesInParallel: a group's repositories are cloned,
// changed and left for the worker Manifest.Parallel at once or one
// after another; either way every repository's change is left for the
// worker (who proposes them Manifest.Parallel at once: see package
// activity's TestDeliverProposesInParallel).
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
			m := manifest(repos...)
			m.Parallel = parallel
			m.Execution.Command = sh("echo changed >> README.md")
			res := run(t, o, m)
			if res.Status != protocol.PhaseComplete {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			for _, r := range repos {
				got := repoResult(t, res, r.Name)
				if got.Status != "success" {
					t.Errorf("%s: %s (%s)", r.Name, got.Status, got.Error)
				}
				if _, commit := leftChange(t, o, r.URL, got); commit == "" {
					t.Errorf("%s: no change left for the worker", r.Name)
				}
			}
		})
	}
}
