package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/sandbox/docker/dockertest"
)

// runLocalInDocker runs a campaign bumping go in two repositories
// demoRepos makes under root, in docker sandboxes, with root allowed.
func runLocalInDocker(t *testing.T, root string) (urls []string, out string, code int) {
	t.Helper()
	cli := dockertest.Client(t)
	sandboxImage, agentImage := dockertest.Images(t, cli)
	urls = demoRepos(t, root, 2)
	id := fmt.Sprintf("local%08x", rand.Uint32())
	def := writeDef(t, t.TempDir(), "bump.yaml", strings.Replace(bumpCampaign(id, urls, ""), "image: golang", "image: "+sandboxImage, 1))
	out, code = runCLI(t, "run", "--file", def, "--temporal-address", freeAddr(t), "--state-dir", filepath.Join(t.TempDir(), "state"),
		"--sandbox", "docker", "--sandbox-image", sandboxImage, "--sandbox-agent-image", agentImage,
		"--sandbox-scope", id, "--allow-file-root", root)
	return urls, out, code
}

// Repositories the operator owns, under an allowed directory others may
// read, are cloned by the sandbox's user (another uid) and changed.
func TestRunInDockerOnTheOperatorsRepositories(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	urls, out, code := runLocalInDocker(t, root)
	if code != 0 || !strings.Contains(out, "2 repositories: 2 completed") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	id := strings.TrimPrefix(strings.Fields(out[strings.Index(out, "started campaign/"):])[1], "campaign/")
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		got, err := exec.Command("git", "-C", bare, "show", "auto/"+id+"/"+id+":go.mod").Output()
		if err != nil || !strings.Contains(string(got), "go 1.26") {
			t.Errorf("%s: no changed branch: %v %s\n%s", bare, err, got, out)
		}
	}
}

// A repository under an allowed directory the sandbox's user may not
// enter fails saying which directory, and what to do, not that it is
// outside the allowed directories.
func TestRunInDockerUnderADirectoryTheSandboxCannotRead(t *testing.T) {
	root := t.TempDir()
	if err := os.Chmod(root, 0o700); err != nil {
		t.Fatal(err)
	}
	_, out, code := runLocalInDocker(t, root)
	if code == 0 {
		t.Fatalf("exit 0:\n%s", out)
	}
	if strings.Contains(out, "outside the directories") {
		t.Errorf("the error says the repository is outside the allowed directories:\n%s", out)
	}
	want := fmt.Sprintf("the directory %s (mode -rwx------) is under --allow-file-root, but this user (uid 1000) may not read it: make it readable to that user (chmod o+rx %s", root, root)
	if !strings.Contains(out, want) {
		t.Errorf("the output lacks %q:\n%s", want, out)
	}
}
