package agent_test

import (
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// TestCheckMode runs a done_when check over two repositories: the one
// whose code passes succeeds, the other fails as check_failed saying
// how the command exited; what the command wrote is neither collected
// nor pushed, and no branch appears.
func TestCheckMode(t *testing.T) {
	done := gittest.NewRemote(t, "", "done", map[string]string{"README.md": "# done\n", "main.go": "slog.Info()\n"})
	open := gittest.NewRemote(t, "", "open", map[string]string{"README.md": "# open\n", "main.go": "log.Printf()\n"})
	m := manifest(repo("done", done), repo("open", open))
	m.Mode, m.PullRequest = protocol.ModeCheck, nil
	m.Execution.Command = sh(`echo scribble >> README.md; if grep -q log.Printf main.go; then echo "log.Printf is still used" >&2; exit 1; fi`)
	o := options(t)
	res := run(t, o, m)
	got := map[string]protocol.RepositoryResult{}
	for _, r := range res.Repositories {
		got[r.Name] = r
	}
	if r := got["done"]; r.Status != "success" || r.ErrorKind != "" || len(r.FilesModified) > 0 || r.Tree != "" {
		t.Errorf("done: %+v", r)
	}
	if r := got["open"]; r.Status != "failed" || r.ErrorKind != protocol.CheckFailed ||
		!strings.Contains(r.Error, "check exited with status 1: log.Printf is still used") || len(r.FilesModified) > 0 {
		t.Errorf("open: %+v", r)
	}
	for _, remote := range []string{done, open} {
		if head := remoteRef(t, remote, "refs/heads/"+branch); head != "" {
			t.Errorf("a check pushed %s to %s", branch, remote)
		}
	}

	// A check that asks for more than a read-only command is refused.
	bad := m
	bad.Verifiers = []protocol.Verifier{{Name: "v", Command: []string{"true"}}}
	o = options(t)
	if res := run(t, o, bad); res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, "mode check runs a deterministic command") {
		t.Errorf("a check with verifiers: %s %q", res.Status, res.Error)
	}
}
