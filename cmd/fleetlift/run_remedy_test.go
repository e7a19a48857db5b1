package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunSaysHowToAllowALocalRepository: a run on a local repository
// outside --allow-file-root fails saying which flag allows it, and the
// table does not cut that remedy off.
func TestRunSaysHowToAllowALocalRepository(t *testing.T) {
	root, allowed := t.TempDir(), t.TempDir()
	urls := demoRepos(t, root, 1)
	def := writeDef(t, root, "bump.yaml", bumpCampaign("outside", urls, ""))
	out, code := runCLI(t, "run", "--file", def, "--allow-file-root", allowed,
		"--temporal-address", freeAddr(t), "--state-dir", filepath.Join(root, "state"))
	if code == 0 {
		t.Fatalf("exit 0 for a repository outside --allow-file-root:\n%s", out)
	}
	want := urls[0] + " is outside the directories this worker may use: give the worker (or fleetlift run, up) --allow-file-root with a directory that holds it"
	if !strings.Contains(out, want) {
		t.Errorf("the output does not say, whole, how to allow the repository (%q):\n%s", want, out)
	}
}
