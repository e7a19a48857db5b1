package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// The agent runs git outside the jail and pushes what it reads: work that
// swaps the repository it cloned for another (one it cannot read itself
// may be one the agent can), or points git elsewhere, fails the run, and
// nothing of the other repository is read or pushed.
func TestWorkCannotSwapTheRepository(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"the repository replaced by a symbolic link to another clone",
			`cd .. && mv svc svc.old && ln -s "$OTHER" svc`, "svc: "},
		{".git replaced by a gitdir file",
			`rm -rf .git && printf 'gitdir: %s/.git\n' "$OTHER" > .git && echo x >> README.md`, ".git was replaced"},
		{".git replaced by a symbolic link",
			`mv .git .git.old && ln -s "$OTHER/.git" .git && echo x >> README.md`, ".git was replaced"},
		{"alternates that borrow another repository's objects",
			`echo "$OTHER/.git/objects" > .git/objects/info/alternates && echo x >> README.md`, ".git/objects/info/alternates would point git elsewhere"},
		{"a symbolic link inside .git",
			`mv .git/HEAD .git/HEAD.old && ln -s "$OTHER/.git/HEAD" .git/HEAD && echo x >> README.md`, ".git/HEAD is a symbolic link"},
		{"a named pipe where git reads",
			`rm .git/HEAD && mkfifo .git/HEAD && echo x >> README.md`, ".git/HEAD is a named pipe"},
		{"core.worktree pointing at another clone",
			`git config core.worktree "$OTHER" && echo x >> README.md`, ".git/config was changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t)
			parent := t.TempDir()
			remote := gittest.NewRemote(t, parent, "svc", map[string]string{"README.md": "# svc\n"})
			// Another clone of the same repository, as another sandbox
			// has it, where the work cannot see (under /tmp, which the
			// jail makes private), with a change of its own: what the
			// swap would have pushed.
			otherClone := t.TempDir() + "/other"
			gittest.Run(t, "", "clone", "-q", remote, otherClone)
			if err := os.WriteFile(filepath.Join(otherClone, "SECRET.txt"), []byte("another team's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			m := manifest(repo("svc", remote))
			m.Execution.Command = sh(`OTHER='` + otherClone + `'; ` + tc.script)
			res := run(t, o, m)
			if res.Status != protocol.PhaseFailed || !strings.Contains(res.Error, "tampered with the repository") || !strings.Contains(res.Error, tc.want) {
				t.Fatalf("phase %s %q; want the run failed naming %q", res.Status, res.Error, tc.want)
			}
			if left(o, "svc") {
				t.Fatal("a change was left for the worker")
			}
			for _, r := range res.Repositories {
				for _, d := range r.Diffs {
					if strings.Contains(d.Diff, "another team's") {
						t.Fatalf("the other clone's content is in the result:\n%s", d.Diff)
					}
				}
			}
		})
	}
}
