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

	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// TestDoneWhenOnTheLocalForge is done_when from the merge to a
// regression, on the local forge. A campaign moves three repositories
// off log.Printf and its pull requests merge as it declares; its
// done_when runs on each default branch: two are done, the third still
// uses log.Printf in a file the change did not touch, so it merged but
// is not done, saying why; `prs` tells them apart. Then someone brings
// log.Printf back to svc0: the next check finds it regressed, the plan
// reopens it as work to do, the reconciler has its change made again
// (once), and its new pull request merges and is done.
func TestDoneWhenOnTheLocalForge(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	push := func(i int, files map[string]string) {
		t.Helper()
		work := filepath.Join(root, "work", fmt.Sprintf("%d-%d", i, time.Now().UnixNano()))
		script := fmt.Sprintf("set -e\ngit clone -q %s %s\ncd %s\n", urls[i], work, work)
		for name, body := range files {
			script += fmt.Sprintf("mkdir -p $(dirname %s)\nprintf '%%s' %q > %s\n", name, body, name)
		}
		script += "git add -A\ngit -c user.email=t@example.com -c user.name=t commit -qm code\ngit push -q origin main\n"
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	old := legacyGo
	for i := range urls {
		push(i, map[string]string{"main.go": old})
	}
	push(2, map[string]string{"internal/legacy.go": old}) // beyond the change's *.go
	def := slogCampaign("finish", urls)
	campaigns := filepath.Join(root, "campaigns")
	if err := os.MkdirAll(campaigns, 0o755); err != nil {
		t.Fatal(err)
	}
	file := writeDef(t, campaigns, "finish.yaml", def)
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	flags := []string{"--temporal-address", addr, "--state-dir", stateDir}
	startWorker(t, append([]string{"--allow-file-root", root, "--pull-requests-every", "1s"}, flags...)...)
	out, code := runCLI(t, append([]string{"run", "--file", file, "--allow-file-root", root, "--no-worker"}, flags...)...)
	if code != 0 || !strings.Contains(out, "3 repositories: 3 completed") {
		t.Fatalf("run: exit %d\n%s", code, out)
	}

	waitDone(t, reader, map[string]string{"svc0": "done", "svc1": "done", "svc2": "not_done"})
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

	// log.Printf comes back to svc0: within done_when.every it has
	// regressed.
	push(0, map[string]string{"main.go": old})
	waitDone(t, reader, map[string]string{"svc0": "regressed", "svc1": "done", "svc2": "not_done"})

	// The campaigns repository holds the definition as it ran: the plan
	// reopens svc0, and the reconciler carries it out once.
	gitOut(t, campaigns, "init", "-q", "-b", "main")
	gitOut(t, campaigns, "add", ".")
	gitOut(t, campaigns, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "finish")
	p := planJSON(t, append([]string{"--repo", campaigns, "--state", "temporal"}, flags...)...)
	if len(p.Campaigns) != 1 || p.Campaigns[0].Action != "reopen" {
		t.Fatalf("plan: %+v", p)
	}
	out, code = runCLI(t, append([]string{"reconcile", "--once", "--repo", campaigns, "--no-status"}, flags...)...)
	if code != 0 || !strings.Contains(out, "reopen finish") {
		t.Fatalf("reconcile: exit %d\n%s", code, out)
	}
	if p := planJSON(t, append([]string{"--repo", campaigns, "--state", "temporal"}, flags...)...); p.Campaigns[0].Action == "reopen" {
		t.Errorf("reopened twice: %+v", p)
	}
	// Its change is made again on main as it is, proposed, merged as
	// declared, and done.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		r, err := reader.Get(t.Context(), "finish")
		var svc0 state.Repo
		for _, repo := range r.Repos {
			if repo.Name == "svc0" {
				svc0 = repo
			}
		}
		if err == nil && svc0.PullRequestState == state.PullRequestMerged && svc0.PullRequest != nil && svc0.PullRequest.Done == "done" &&
			!svc0.PullRequest.Reopened && r.Generation == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc0 after the reopen: %+v %+v, %v", svc0, svc0.PullRequest, err)
		}
	}
	if got := gitOut(t, strings.TrimPrefix(urls[0], "file://"), "show", "main:main.go"); strings.Contains(got, "log.Printf") {
		t.Errorf("svc0's main.go after the reopen: %q", got)
	}
}

// waitDone waits until campaign finish's merged repositories are as
// want says done_when left them.
func waitDone(t *testing.T, reader *statetemporal.Reader, want map[string]string) {
	t.Helper()
	var got map[string]string
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		r, err := reader.Get(t.Context(), "finish")
		got = map[string]string{}
		for _, repo := range r.Repos {
			if repo.PullRequestState == state.PullRequestMerged && repo.PullRequest != nil {
				got[repo.Name] = repo.PullRequest.Done
			}
		}
		if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("done_when: %v, want %v (%v)", got, want, err)
		}
	}
}

// legacyGo is Go code that logs with log.Printf.
const legacyGo = "package svc\n\nfunc f() { log.Printf(\"x\") }\n"

// slogCampaign is campaign id over urls: a sed moves the *.go files at
// each repository's root off log.Printf, its pull requests merge
// without review, and done_when (every minute) wants no log.Printf
// anywhere.
func slogCampaign(id string, urls []string) string {
	return slogDefinition(id, "merge: {require_review: false}", `{command: [sh, -c, "! grep -rq log.Printf ."], every: 1m}`, urls)
}

// slogDefinition is slogCampaign with the pull_request fields after the
// branch prefix and title (flow entries) and the done_when given (none
// when empty).
func slogDefinition(id, pullRequest, doneWhen string, urls []string) string {
	def := fmt.Sprintf(`version: 1
kind: Campaign
id: %[1]s
title: Move to slog
template:
  execution:
    deterministic:
      image: golang
      command: [sh, -c, "sed -i s/log.Printf/slog.Info/ *.go"]
  pull_request: {branch_prefix: auto/%[1]s, title: Move to slog, %[2]s}
`, id, pullRequest)
	if doneWhen != "" {
		def += "  done_when: " + doneWhen + "\n"
	}
	def += "repositories:\n"
	for _, u := range urls {
		def += "  - url: " + u + "\n"
	}
	return def
}

// waitRepos waits up to three minutes for the repositories of the run
// of definition id, by name, to be as ok says, and returns them; it
// fails the test with what they were, and what up printed, otherwise.
func waitRepos(t *testing.T, reader *statetemporal.Reader, id string, up *upProcess, what string, ok func(map[string]state.Repo) bool) map[string]state.Repo {
	t.Helper()
	return waitReposWithin(t, 3*time.Minute, reader, id, up, what, ok)
}

// waitReposWithin is waitRepos for up to d.
func waitReposWithin(t *testing.T, d time.Duration, reader *statetemporal.Reader, id string, up *upProcess, what string, ok func(map[string]state.Repo) bool) map[string]state.Repo {
	t.Helper()
	var got map[string]state.Repo
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		r, err := reader.Get(context.Background(), id)
		got = map[string]state.Repo{}
		for _, repo := range r.Repos {
			got[repo.Name] = repo
		}
		if err == nil && ok(got) {
			return got
		}
	}
	t.Fatalf("%s: %+v\n%s", what, got, up.out.String())
	return nil
}
