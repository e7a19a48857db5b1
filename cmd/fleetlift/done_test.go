package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/state"
)

// TestDoneWhenOnTheLocalForge: a campaign's pull requests merge as its
// definition declares, and its done_when runs in a sandbox on each
// repository's default branch: the two whose code no longer uses
// log.Printf are done; the one that still does (in a file the change
// did not touch) is merged but not done, saying why. `prs` and the
// recorded state tell them apart.
func TestDoneWhenOnTheLocalForge(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	// svc2 has more to do than the campaign's change does.
	legacy := filepath.Join(root, "legacy")
	script := fmt.Sprintf(`set -e
git clone -q %[1]s %[2]s
printf 'package svc\n\nfunc old() { log.Printf("x") }\n' > %[2]s/legacy.go
git -C %[2]s add legacy.go
git -C %[2]s -c user.email=t@example.com -c user.name=t commit -qm legacy
git -C %[2]s push -q origin main`, urls[2], legacy)
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	def := strings.Replace(sedCampaign("finish", "s/^go 1.21$/go 1.26/", "merge: {require_review: false}", urls, ""),
		"  pull_request:", "  done_when: {command: [sh, -c, \"! grep -rq log.Printf .\"]}\n  pull_request:", 1)
	file := writeDef(t, root, "finish.yaml", def)
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	flags := []string{"--temporal-address", addr, "--state-dir", stateDir}
	startWorker(t, append([]string{"--allow-file-root", root, "--pull-requests-every", "1s"}, flags...)...)
	out, code := runCLI(t, append([]string{"run", "--file", file, "--allow-file-root", root, "--no-worker"}, flags...)...)
	if code != 0 || !strings.Contains(out, "3 repositories: 3 completed") {
		t.Fatalf("run: exit %d\n%s", code, out)
	}

	want := map[string]string{"svc0": "done", "svc1": "done", "svc2": "not_done"}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		r, err := reader.Get(t.Context(), "finish")
		got := map[string]string{}
		for _, repo := range r.Repos {
			if repo.PullRequestState == state.PullRequestMerged && repo.PullRequest != nil {
				got[repo.Name] = repo.PullRequest.Done
			}
		}
		if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("done_when: %v, want %v (%v)", got, want, err)
		}
	}
	prs := prsJSON(t, append([]string{"finish"}, flags...)...)
	if prs.Counts["merged"] != 3 || prs.Done["done"] != 2 || prs.Done["not_done"] != 1 {
		t.Errorf("prs counts %v, done %v", prs.Counts, prs.Done)
	}
	for _, p := range prs.PullRequests {
		if p.Repository == "svc2" && !strings.Contains(p.DoneNote, "check exited with status 1") {
			t.Errorf("svc2 says %q", p.DoneNote)
		}
	}
	table, _ := runCLI(t, append([]string{"prs", "finish"}, flags...)...)
	if !strings.Contains(table, "3 merged; of the merged, 2 done, 1 not done (done_when)") {
		t.Errorf("prs:\n%s", table)
	}
}
