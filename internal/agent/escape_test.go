package agent_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// Escape attempts: none may have an effect outside the workspace.
func TestEscapeAttempts(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"symlinks to /etc in a repository are diffed as links", func(t *testing.T) {
			o := options(t)
			remote := gittest.NewRemote(t, "", "svc", map[string]string{
				"README.md": "# svc\n",
				"etc":       gittest.LinkPrefix + "/etc",
			})
			m := manifest(repo("svc", remote))
			m.Execution.Command = sh(`ln -s /etc/passwd passwd && ln -s /etc/hostname README.md.new && mv README.md.new README.md`)
			res := run(t, o, m)
			r := repoResult(t, res, "svc")
			if res.Status != protocol.PhaseComplete || r.Status != "success" {
				t.Fatalf("phase %s, repository %s %q", res.Status, r.Status, r.Error)
			}
			passwd := diffOf(r, "passwd")
			if passwd == nil || passwd.Status != "added" || !strings.Contains(passwd.Diff, "new file mode 120000") || !strings.Contains(passwd.Diff, "+/etc/passwd") {
				t.Fatalf("passwd diff %+v", passwd)
			}
			for _, d := range r.Diffs {
				if strings.Contains(d.Diff, "root:") {
					t.Fatalf("%s: a link target under /etc was read:\n%s", d.Path, d.Diff)
				}
			}
			dir, commit := leftChange(t, o, remote, r)
			if mode := gittest.Run(t, dir, "ls-tree", commit, "passwd"); !strings.HasPrefix(mode, "120000 ") {
				t.Fatalf("passwd left is not a link: %s", mode)
			}
		}},
		{"a ../ repository name is refused", func(t *testing.T) {
			o := options(t)
			parent := t.TempDir()
			ws := filepath.Join(parent, "ws")
			if err := os.Mkdir(ws, 0o755); err != nil {
				t.Fatal(err)
			}
			o.Workspace = ws
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("../escaped", remote))
			res := run(t, o, m)
			if res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, "invalid manifest") || !strings.Contains(res.Error, "../escaped") {
				t.Fatalf("phase %s %q, want the manifest refused", res.Status, res.Error)
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Fatalf("something was created beside the workspace: %v", entries)
			}
		}},
		{"a symlinked targets directory is refused", func(t *testing.T) {
			o := options(t)
			outside := t.TempDir()
			if err := os.Symlink(outside, filepath.Join(o.Workspace, "targets")); err != nil {
				t.Fatal(err)
			}
			parent := t.TempDir()
			recipe := gittest.NewRemote(t, parent, "recipe", map[string]string{"CLAUDE.md": "x\n"})
			api := gittest.NewRemote(t, parent, "api", map[string]string{"a.go": "package a\n"})
			m := manifest()
			tr := repo("recipe", recipe)
			m.Transformation = &tr
			m.Targets = []protocol.Repository{repo("api", api)}
			res := run(t, o, m)
			if res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, "symbolic link") {
				t.Fatalf("phase %s %q, want refused", res.Status, res.Error)
			}
			if entries, _ := os.ReadDir(outside); len(entries) != 0 {
				t.Fatalf("cloned through the link: %v", entries)
			}
		}},
		{"hooks and attributes written by the work never run", func(t *testing.T) {
			o := options(t)
			marker := filepath.Join(t.TempDir(), "pwned")
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			hook := `printf '#!/bin/sh\ntouch ` + marker + `\n'`
			m.Execution.Command = sh(`set -e
mkdir -p .git/hooks
for h in pre-commit commit-msg post-commit post-checkout pre-push reference-transaction post-rewrite; do
  ` + hook + ` > .git/hooks/$h; chmod +x .git/hooks/$h
done
echo '* filter=evil diff=evil' > .gitattributes
mkdir -p .git/info && echo '* filter=evil' > .git/info/attributes
echo changed >> README.md`)
			res := run(t, o, m)
			if res.Status != protocol.PhaseComplete {
				t.Fatalf("phase %s %q", res.Status, res.Error)
			}
			if !left(o, "svc") {
				t.Fatal("no change was left for the worker")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("a hook or filter set up by the work ran")
			}
		}},
		{"configuration written by the work fails the run, and nothing runs or is pushed", func(t *testing.T) {
			o := options(t)
			marker := filepath.Join(t.TempDir(), "pwned")
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.Execution.Command = sh(`set -e
mkdir -p evil-hooks && printf '#!/bin/sh\ntouch ` + marker + `\n' > evil-hooks/pre-push && chmod +x evil-hooks/pre-push
git config core.hooksPath evil-hooks
git config filter.evil.clean 'touch ` + marker + `; cat'
git config core.fsmonitor 'touch ` + marker + `'
git config core.worktree /
echo '* filter=evil' > .gitattributes
echo changed >> README.md`)
			res := run(t, o, m)
			if res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, ".git/config was changed") {
				t.Fatalf("phase %s %q; want the run failed for the configuration the work wrote", res.Status, res.Error)
			}
			if left(o, "svc") {
				t.Fatal("a change was left for the worker")
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("a hook, filter or fsmonitor set up by the work ran")
			}
		}},
		{"a .gitmodules pointing elsewhere is not followed", func(t *testing.T) {
			o := options(t)
			parent := t.TempDir()
			elsewhere := gittest.NewRemote(t, parent, "elsewhere", map[string]string{"secret.txt": "from elsewhere\n"})
			remote := gittest.NewRemote(t, parent, "svc", map[string]string{"README.md": "# svc\n"})
			gittest.AddSubmodule(t, remote, elsewhere, "vendor/dep")
			m := manifest(repo("svc", remote))
			m.Execution.Command = sh(`echo changed >> README.md`)
			res := run(t, o, m)
			if res.Status != protocol.PhaseComplete {
				t.Fatalf("phase %s %q", res.Status, res.Error)
			}
			filepath.WalkDir(o.Workspace, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == "secret.txt" {
					t.Errorf("the submodule was fetched: %s", p)
				}
				return nil
			})
			for _, d := range repoResult(t, res, "svc").Diffs {
				if d.Path != "README.md" {
					t.Errorf("unexpected change %s", d.Path)
				}
			}
		}},
		{"without isolation, a steering.json still being written is not lost, and is discarded with a word", func(t *testing.T) {
			o := options(t)
			o.Isolation = nil
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.RequireApproval = true
			// Half the file, a pause over several steering polls, the rest:
			// taking the half-written file for garbage and deleting it would
			// leave the agent's approval unseen and unreported.
			m.Execution.Command = sh(`echo change >> README.md
exec 3> "$FLEETLIFT_WORKSPACE/.fleetlift/steering.json"
printf '{"action":' >&3
sleep 1
printf '"approve","iteration":0}' >&3
exec 3>&-`)
			wait := startRun(t, o, m)
			st := waitStatus(t, o.Workspace, "awaiting input", awaitingInput(0))
			if !strings.Contains(st.Message, "discarded a steering.json") {
				t.Errorf("status message %q does not say the agent's steering was discarded", st.Message)
			}
			steer(t, o.Workspace, protocol.Steering{Action: protocol.ActionReject})
			if res := wait(); res.Status != protocol.PhaseCancelled {
				t.Fatalf("phase %s after reject", res.Status)
			}
		}},
		{"without isolation, an agent cannot approve its own work by writing steering.json while working", func(t *testing.T) {
			o := options(t)
			o.Isolation = nil
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.RequireApproval = true
			m.Execution.Command = sh(`echo change >> README.md
printf '{"action":"approve","iteration":0}' > "$FLEETLIFT_WORKSPACE/.fleetlift/steering.json"`)
			wait := startRun(t, o, m)
			st := waitStatus(t, o.Workspace, "awaiting input", awaitingInput(0))
			if !strings.Contains(st.Message, "discarded a steering.json") {
				t.Errorf("status message %q does not say the agent's steering was discarded", st.Message)
			}
			time.Sleep(3 * o.SteeringPoll)
			if st := status(t, o.Workspace); st.Phase != protocol.PhaseAwaitingInput {
				t.Fatalf("phase %s: the agent's own approval was taken", st.Phase)
			}
			steer(t, o.Workspace, protocol.Steering{Action: protocol.ActionReject})
			if res := wait(); res.Status != protocol.PhaseCancelled || left(o, "svc") {
				t.Fatalf("phase %s after reject", res.Status)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}
