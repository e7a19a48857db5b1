package agentcmd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// An agent makes its scratch repositories in its workspace's protocol
// directory: its jailed commands cannot see them, and removing the
// sandbox removes them, also those of an agent killed before it closed
// them, which the system's temporary directory kept.
func TestServeMakesScratchRepositoriesInTheProtocolDirectory(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	g, err := agentcmd.ServeGit(ws)
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.NewScratch(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := filepath.Join(ws, protocol.Dir, "git"); filepath.Dir(s.Dir()) != want {
		t.Errorf("scratch repository at %s, want in %s", s.Dir(), want)
	}
	if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) != 0 {
		t.Errorf("the temporary directory holds %d entries", len(left))
	}
}
