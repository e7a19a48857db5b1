package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

// TestRunReportsFailuresAndRetryFinishesTheCampaign: a campaign where one
// repository's command fails does not end "completed". `fleetlift run`
// prints completed_with_failures with the counts, the failed repository
// and how to retry it, and exits 1; `fleetlift status` lists it so; the
// recorded state (what the plan and the status mirror read) says
// completed_with_failures, a phase that is done. Once the repository is
// fixed, `retry --failed-only` runs it again as the campaign's current
// run, which status and the recorded state follow to "completed".
func TestRunReportsFailuresAndRetryFinishesTheCampaign(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	// svc1 has no go.mod: the command fails there.
	broken := strings.TrimPrefix(urls[1], "file://")
	work := filepath.Join(root, "work-svc1")
	gitScript(t, fmt.Sprintf(`git clone -q %[1]s %[2]s
git -C %[2]s rm -q go.mod
git -C %[2]s -c user.email=t@example.com -c user.name=t commit -qm "no go.mod"
git -C %[2]s push -q origin HEAD:main`, broken, work))
	def := writeDef(t, root, "bump.yaml", bumpCampaign("bump", urls, ""))
	addr, stateDir := freeAddr(t), filepath.Join(root, "state")

	out, code := runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", stateDir)
	if code != 1 {
		t.Errorf("run exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		"campaign/bump: completed_with_failures (1 of 3 repositories failed, 2 completed)",
		"3 repositories: 2 completed, 1 failed",
		// The server stopped with the run: the command that runs them
		// again is the run's own.
		"run the failed repositories again with `fleetlift run ",
		"campaign/bump ended completed_with_failures: 1 of 3 repositories failed, 2 completed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("run output lacks %q:\n%s", want, out)
		}
	}
	if !failedRow(out, "svc1") {
		t.Errorf("run output does not show svc1 failed:\n%s", out)
	}

	srv := startServer(t, addr, stateDir)
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader := &statetemporal.Reader{Client: c, Namespace: devserver.Namespace}
	rec, err := reader.Get(t.Context(), "bump")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != state.PhaseCompletedWithFailures || !rec.Phase.Done() || rec.Message != "1 of 3 repositories failed, 2 completed" {
		t.Errorf("recorded %s (%s), done %t; want completed_with_failures, done", rec.Phase, rec.Message, rec.Phase.Done())
	}

	waitListed(t, "campaign/bump", "completed_with_failures", "--temporal-address", addr, "--state-dir", stateDir)

	// Fix svc1 and retry it, with a worker running.
	gitScript(t, fmt.Sprintf(`printf 'module example.com/svc\n\ngo 1.21\n' > %[1]s/go.mod
git -C %[1]s add go.mod
git -C %[1]s -c user.email=t@example.com -c user.name=t commit -qm "go.mod again"
git -C %[1]s push -q origin HEAD:main`, work))
	startWorker(t, "--temporal-address", addr, "--state-dir", stateDir)
	out, code = runCLI(t, "retry", "bump", "--failed-only", "--temporal-address", addr, "--state-dir", stateDir)
	if code != 0 || !strings.Contains(out, "campaign/bump: started again for 1 failed repositories") {
		t.Fatalf("retry: exit %d:\n%s", code, out)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var final status.CampaignState
	if err := c.GetWorkflow(ctx, "campaign/bump", "").Get(ctx, &final); err != nil {
		t.Fatalf("the retried run: %v", err)
	}
	rec, err = reader.Get(t.Context(), "bump")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Phase != state.PhaseCompleted || rec.Message != "3 repositories completed" || rec.Generation != 1 || rec.SpecDigest == "" {
		t.Errorf("recorded after the retry: %s (%s), generation %d, digest %q; want completed, generation 1, the digest",
			rec.Phase, rec.Message, rec.Generation, rec.SpecDigest)
	}
	out, code = runCLI(t, "status", "bump", "--temporal-address", addr, "--state-dir", stateDir)
	if code != 0 || !strings.Contains(out, "campaign/bump: completed (3 repositories completed)") || strings.Contains(out, "fleetlift retry") {
		t.Errorf("status after the retry: exit %d:\n%s", code, out)
	}
	waitListed(t, "campaign/bump", "completed", "--temporal-address", addr, "--state-dir", stateDir)
}

// waitListed waits until `fleetlift status` lists a run of workflow id
// with status: the list comes from Temporal's visibility store, which
// follows a run's end a moment later.
func waitListed(t *testing.T, id, status string, flags ...string) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var code int
		out, code = runCLI(t, append([]string{"status"}, flags...)...)
		if code != 0 {
			t.Fatalf("status: exit %d:\n%s", code, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == id && f[2] == status {
				return
			}
		}
	}
	t.Errorf("status never listed %s as %s:\n%s", id, status, out)
}

// failedRow reports whether out has a result-table row saying repository
// name failed.
func failedRow(out, name string) bool {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name && f[1] == "failed" {
			return true
		}
	}
	return false
}

func gitScript(t *testing.T, script string) {
	t.Helper()
	if out, err := exec.Command("sh", "-c", "set -e\n"+script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// startWorker runs `fleetlift worker` in this process until the test ends.
func startWorker(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncbuf.Buffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		root := newRootCmd(out, out)
		root.SetArgs(append([]string{"worker"}, args...))
		if err := root.ExecuteContext(ctx); err != nil {
			fmt.Fprintln(out, "fleetlift:", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if t.Failed() {
			fmt.Fprintf(os.Stderr, "worker output:\n%s\n", out.String())
		}
	})
}
