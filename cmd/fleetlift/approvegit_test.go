package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/state"
)

// userGitEnv makes git in the test read no global or system config, as
// if the user had only the clone's own.
func userGitEnv(t *testing.T) {
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// campaignsRemote makes the demo's campaigns repository (with the
// campaign committed by its author when campaign is not empty) as a bare
// repository, the forge's copy, and robin's clone of it.
func campaignsRemote(t *testing.T, root, campaign string) (bare, work string) {
	t.Helper()
	ctx := context.Background()
	src := filepath.Join(root, "campaigns-src")
	if err := demo.CampaignsRepo(ctx, src); err != nil {
		t.Fatal(err)
	}
	if campaign != "" {
		if err := os.WriteFile(filepath.Join(src, "campaigns", "go-version.yaml"), []byte(campaign), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := demo.Git(ctx, src, demo.Author, "add", "campaigns"); err != nil {
			t.Fatal(err)
		}
		if err := demo.Git(ctx, src, demo.Author, "commit", "-q", "-m", "Raise the go directive"); err != nil {
			t.Fatal(err)
		}
	}
	bare, work = filepath.Join(root, "campaigns.git"), filepath.Join(root, "work")
	gitIn(t, root, "clone", "-q", "--bare", src, bare)
	gitIn(t, root, "clone", "-q", bare, work)
	gitIn(t, work, "config", "user.name", demo.Approver)
	gitIn(t, work, "config", "user.email", demo.Approver+"@example.com")
	return bare, work
}

// TestApproveGitPush: with the loop running on a campaigns repository,
// `fleetlift approve ID --git CLONE --push` finds the results awaiting
// approval in Temporal, commits a record for each as the approver and
// pushes it; the reconciler reads them and the campaign completes.
func TestApproveGitPush(t *testing.T) {
	userGitEnv(t)
	ctx := context.Background()
	root := t.TempDir()
	targets := demoTargetsForTest(t, root)
	bare, work := campaignsRemote(t, root, demo.Campaign(targets))
	stateDir := filepath.Join(root, "state")
	addr, c, reader := serverForTest(t, stateDir)
	up := startUp(t, "--repo", bare, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s")

	wait := func(what string, cond func(state.Campaign) bool) state.Campaign {
		t.Helper()
		var last state.Campaign
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			rec, err := reader.Get(ctx, "demo-go-version")
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				t.Fatal(err)
			}
			if err == nil && cond(rec) {
				return rec
			}
			last = rec
		}
		t.Fatalf("%s: gave up; last state %+v\n%s", what, last, up.out.String())
		return last
	}
	rec := wait("awaiting approval", func(c state.Campaign) bool { return len(c.PendingApprovals) == len(targets) })

	out, code := runCLI(t, "approve", "demo-go-version", "--git", work, "--by", demo.Approver, "--push", "--temporal-address", addr, "--state-dir", stateDir)
	if code != 0 {
		t.Fatalf("approve --git --push: exit %d\n%s", code, out)
	}
	for _, p := range rec.PendingApprovals {
		name := approval.RecordPath(p.Target)
		got := gitIn(t, bare, "show", "main:"+name)
		if !strings.Contains(got, "result_digest: "+p.ResultDigest) || !strings.Contains(got, "by: robin") {
			t.Errorf("%s on the remote's main:\n%s", name, got)
		}
	}
	if who := gitIn(t, bare, "log", "-1", "--format=%an <%ae>|%s", "main"); who != "robin <robin@example.com>|Approve 3 results of demo-go-version" {
		t.Errorf("the pushed commit: %q", who)
	}
	if !strings.Contains(out, "pushed to origin main") || strings.Contains(out, "note:") {
		t.Errorf("approve does not say it pushed:\n%s", out)
	}

	done := wait("completed", func(c state.Campaign) bool { return c.Phase.Done() })
	if done.Phase != state.PhaseCompleted {
		t.Fatalf("campaign %s, want completed:\n%s", done.Phase, up.out.String())
	}
	for _, r := range done.Repos {
		if r.Status != state.RepoCompleted || r.PullRequestURL == "" {
			t.Errorf("%s: %s, pull request %q; want completed with a branch\n%s", r.Name, r.Status, r.PullRequestURL, unitErrors(t, c, "campaign/demo-go-version"))
		}
	}

	// Nothing awaits approval any more: a clear error, nothing written.
	out, code = runCLI(t, "reject", "demo-go-version", "--git", work, "--by", demo.Approver, "--temporal-address", addr, "--state-dir", stateDir)
	if code == 0 || !strings.Contains(out, "nothing awaiting approval") {
		t.Errorf("reject with nothing awaiting approval: exit %d\n%s", code, out)
	}
}

// TestApproveGitOffline: --target and --digest decide without Temporal;
// the record file, the commit, and what is refused before anything is
// written.
func TestApproveGitOffline(t *testing.T) {
	userGitEnv(t)
	const (
		target = "demo-go-version/payments"
		file   = "approvals/demo-go-version__payments.yaml"
		d1     = "sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"
		d2     = "sha256:0d6e1c2b3a4f5e6d7c8b9a0f1e2d3c4b5a6f7e8d9c0b1a2f3e4d5c6b7a8f9e0d"
	)
	offline := []string{"--target", target, "--digest", d1}
	tests := []struct {
		name string
		// before runs in the clone first.
		before func(t *testing.T, work string)
		args   []string
		// wantFile is the record file afterwards, "" for none.
		wantFile string
		wantOut  []string
		wantErr  string
		// commits is how many commits the command adds.
		commits int
	}{{
		name: "approve writes and commits the record",
		args: append([]string{"approve", "--by", "robin", "--comment", "Checked go.mod: yes"}, offline...),
		wantFile: "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: approve\nresult_digest: " + d1 +
			"\nby: robin\ncomment: 'Checked go.mod: yes'\n",
		wantOut: []string{"wrote " + file + ": approve demo-go-version/payments (sha256:9f2c4e1a7b3d) by robin",
			"committed", "on main: Approve demo-go-version/payments (sha256:9f2c4e1a7b3d)", "git -C", "push"},
		commits: 1,
	}, {
		name:     "by defaults to git config fleetlift.login",
		before:   func(t *testing.T, work string) { gitIn(t, work, "config", "fleetlift.login", "robin") },
		args:     append([]string{"reject", "demo-go-version"}, offline...),
		wantFile: "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: reject\nresult_digest: " + d1 + "\nby: robin\n",
		commits:  1,
	}, {
		name:     "steer writes the prompt",
		args:     append([]string{"steer", "--by", "robin", "--prompt", "Keep go 1.21 in tools/go.mod.\nOnly the root module."}, offline...),
		wantFile: "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: steer\nresult_digest: " + d1 + "\nby: robin\nprompt: |-\n  Keep go 1.21 in tools/go.mod.\n  Only the root module.\n",
		commits:  1,
	}, {
		name:    "steer needs a prompt",
		args:    append([]string{"steer", "--by", "robin"}, offline...),
		wantErr: "steer needs --prompt",
	}, {
		name: "the same record again is no change",
		before: func(t *testing.T, work string) {
			if out, code := runCLI(t, append([]string{"approve", "--git", work, "--by", "robin"}, offline...)...); code != 0 {
				t.Fatalf("first approve: exit %d\n%s", code, out)
			}
		},
		args:     append([]string{"approve", "--by", "robin"}, offline...),
		wantFile: "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: approve\nresult_digest: " + d1 + "\nby: robin\n",
		wantOut:  []string{file + " already holds this record", "nothing to commit"},
	}, {
		name: "a different record is not overwritten",
		before: func(t *testing.T, work string) {
			writeRecord(t, work, file, "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: approve\nresult_digest: "+d2+"\nby: alice\n")
		},
		args:     append([]string{"reject", "--by", "robin"}, offline...),
		wantFile: "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: approve\nresult_digest: " + d2 + "\nby: alice\n",
		wantErr:  file + " already holds a different record (approve by alice of sha256:0d6e1c2b3a4f): --force replaces it",
	}, {
		name: "--force replaces a different record",
		before: func(t *testing.T, work string) {
			writeRecord(t, work, file, "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: approve\nresult_digest: "+d2+"\nby: alice\n")
		},
		args:     append([]string{"reject", "--by", "robin", "--force"}, offline...),
		wantFile: "version: 1\nkind: Approval\ntarget: demo-go-version/payments\naction: reject\nresult_digest: " + d1 + "\nby: robin\n",
		commits:  1,
	}, {
		name:    "a record by someone else than the committer is refused",
		args:    append([]string{"approve", "--by", "alice"}, offline...),
		wantErr: "your Git identity robin <robin@example.com> is not alice",
	}, {
		name:    "a bad target is refused before anything is written",
		args:    []string{"approve", "--by", "robin", "--target", "Demo/../x", "--digest", d1},
		wantErr: "the record would be refused",
	}, {
		name:    "a bad digest is refused before anything is written",
		args:    []string{"approve", "--by", "robin", "--target", target, "--digest", "sha256:abc"},
		wantErr: "result_digest",
	}, {
		name:    "a target outside the run is refused",
		args:    append([]string{"approve", "other-campaign", "--by", "robin"}, offline...),
		wantErr: "--target demo-go-version/payments is not part of other-campaign",
	}, {
		name:    "--push needs an upstream",
		before:  func(t *testing.T, work string) { gitIn(t, work, "branch", "--unset-upstream") },
		args:    append([]string{"approve", "--by", "robin", "--push"}, offline...),
		wantErr: "branch main has no upstream",
	}, {
		name:    "--pull-request needs a forge",
		args:    append([]string{"approve", "--by", "robin", "--pull-request"}, offline...),
		wantErr: "--pull-request needs a forge with pull requests (forge.type github or gitea), and the config says local",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, work := campaignsRemote(t, t.TempDir(), "")
			if tc.before != nil {
				tc.before(t, work)
			}
			head := gitIn(t, work, "rev-list", "--count", "HEAD")
			args := append(append([]string{}, tc.args[0], "--git", work), tc.args[1:]...)
			out, code := runCLI(t, args...)
			if tc.wantErr != "" {
				if code == 0 || !strings.Contains(out, tc.wantErr) {
					t.Errorf("exit %d, want an error saying %q:\n%s", code, tc.wantErr, out)
				}
			} else if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			for _, want := range tc.wantOut {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			got, err := os.ReadFile(filepath.Join(work, file))
			switch {
			case tc.wantFile == "" && err == nil:
				t.Errorf("%s was written:\n%s", file, got)
			case tc.wantFile != "" && string(got) != tc.wantFile:
				t.Errorf("%s (%v):\n%s\nwant:\n%s", file, err, got, tc.wantFile)
			}
			var n1, n2 int
			fmt.Sscan(head, &n1)
			fmt.Sscan(gitIn(t, work, "rev-list", "--count", "HEAD"), &n2)
			if n2-n1 != tc.commits {
				t.Errorf("%d commits made, want %d", n2-n1, tc.commits)
			}
			if tc.commits > 0 {
				if st := gitIn(t, work, "status", "--porcelain"); st != "" {
					t.Errorf("the clone is not clean after the commit:\n%s", st)
				}
				if who := gitIn(t, work, "log", "-1", "--format=%an", "--", file); who != "robin" {
					t.Errorf("the record's commit is by %q, want robin", who)
				}
			}
		})
	}
}

// writeRecord commits a record to the clone, as someone before us did.
func writeRecord(t *testing.T, work, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(work, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "add", name)
	gitIn(t, work, "-c", "user.name=alice", "-c", "user.email=alice@example.com", "commit", "-q", "-m", "Approve as alice")
}

// TestApproveGitPullRequest: --pull-request pushes the commit to a branch
// of its own and opens a pull request against the watched branch on the
// forge the config selects among those the flags allow, here a GitHub API
// that answers from memory.
func TestApproveGitPullRequest(t *testing.T) {
	userGitEnv(t)
	const digest = "sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"
	var mu sync.Mutex
	var opened []map[string]any
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer tok3n" {
			http.Error(w, `{"message":"Bad credentials"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/api/v3/repos/acme/campaigns/pulls":
			_ = json.NewEncoder(w).Encode(opened)
		case r.Method == http.MethodPost && r.URL.Path == "/api/v3/repos/acme/campaigns/pulls":
			var req map[string]any
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			n := len(opened) + 1
			pr := map[string]any{"number": n, "state": "open", "title": req["title"], "body": req["body"],
				"html_url": fmt.Sprintf("https://forge.example/acme/campaigns/pull/%d", n),
				"head":     map[string]any{"ref": req["head"], "repo": map[string]any{"full_name": "acme/campaigns"}},
				"base":     map[string]any{"ref": req["base"]}}
			opened = append(opened, pr)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(pr)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	pulls := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(opened)
	}

	bare, work := campaignsRemote(t, t.TempDir(), "")
	// The clone's remote is on the forge; pushes go to the bare
	// repository standing in for it.
	remote := api.URL + "/acme/campaigns.git"
	gitIn(t, work, "remote", "set-url", "origin", remote)
	gitIn(t, work, "config", "url."+bare+".pushInsteadOf", remote)
	cfg, err := os.ReadFile(filepath.Join(work, "fleetlift.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "type: local", "type: github\n  url: "+api.URL+"/api/v3/", 1))
	if err := os.WriteFile(filepath.Join(work, "fleetlift.yaml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	gitIn(t, work, "commit", "-q", "-am", "Use GitHub")

	args := []string{"approve", "--git", work, "--by", "robin", "--pull-request", "--target", "demo-go-version/payments", "--digest", digest,
		"--forge-type", "github", "--forge-url", api.URL + "/api/v3/"}
	out, code := runCLI(t, args...)
	if code == 0 || !strings.Contains(out, "needs a token in $FLEETLIFT_FORGE_TOKEN") {
		t.Fatalf("--pull-request without a token: exit %d\n%s", code, out)
	}
	t.Setenv("FLEETLIFT_FORGE_TOKEN", "tok3n")
	out, code = runCLI(t, args...)
	if code != 0 {
		t.Fatalf("approve --pull-request: exit %d\n%s", code, out)
	}
	const branch = "fleetlift/approval-record/demo-go-version__payments-9f2c4e1a7b3d"
	if got := gitIn(t, bare, "show", branch+":approvals/demo-go-version__payments.yaml"); !strings.Contains(got, "result_digest: "+digest) {
		t.Errorf("the record on %s:\n%s", branch, got)
	}
	if len(pulls()) != 1 {
		t.Fatalf("%d pull requests opened, want 1", len(pulls()))
	}
	pr := pulls()[0]
	head, base := pr["head"].(map[string]any)["ref"], pr["base"].(map[string]any)["ref"]
	if head != branch || base != "main" || pr["title"] != "Approve demo-go-version/payments (sha256:9f2c4e1a7b3d)" ||
		!strings.Contains(pr["body"].(string), "approvals/demo-go-version__payments.yaml") {
		t.Errorf("the pull request: %v", pr)
	}
	if !strings.Contains(out, "pull request https://forge.example/acme/campaigns/pull/1 ("+branch+" into main)") {
		t.Errorf("approve does not name the pull request:\n%s", out)
	}

	// Again: the same record, branch and pull request.
	out, code = runCLI(t, args...)
	if code != 0 || !strings.Contains(out, "nothing to commit") || !strings.Contains(out, "pull/1 ") || len(pulls()) != 1 {
		t.Errorf("approve --pull-request again: exit %d, %d pull requests\n%s", code, len(pulls()), out)
	}
}

func TestSelectPending(t *testing.T) {
	pa := state.PendingApproval{Target: "c/payments", ResultDigest: "sha256:1"}
	pb := state.PendingApproval{Target: "c/ledger", ResultDigest: "sha256:2"}
	tests := []struct {
		name    string
		rec     state.Campaign
		unit    string
		want    []state.PendingApproval
		wantErr string
	}{
		{name: "all", rec: state.Campaign{ID: "c", PendingApprovals: []state.PendingApproval{pa, pb}}, want: []state.PendingApproval{pa, pb}},
		{name: "one repository", rec: state.Campaign{ID: "c", PendingApprovals: []state.PendingApproval{pa, pb}}, unit: "ledger", want: []state.PendingApproval{pb}},
		{name: "another repository", rec: state.Campaign{ID: "c", PendingApprovals: []state.PendingApproval{pa}}, unit: "search", wantErr: "c/search does not await approval; c/payments do"},
		{name: "nothing yet", rec: state.Campaign{ID: "c", Phase: state.PhaseRunning}, wantErr: "nothing awaiting approval yet"},
		{name: "done", rec: state.Campaign{ID: "c", Phase: state.PhaseCompleted}, wantErr: "c has nothing awaiting approval: it is completed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := selectPending(tc.rec, tc.unit)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestApproveGitSecondApprover: a second approver of the same result gets
// a record of their own beside the first one's, which stays, so that both
// count (an author's approval needs another approver's).
func TestApproveGitSecondApprover(t *testing.T) {
	userGitEnv(t)
	const (
		target = "demo-go-version/payments"
		first  = "approvals/demo-go-version__payments.yaml"
		second = "approvals/demo-go-version__payments+robin.yaml"
		digest = "sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d"
	)
	_, work := campaignsRemote(t, t.TempDir(), "")
	alice := "version: 1\nkind: Approval\ntarget: " + target + "\naction: approve\nresult_digest: " + digest + "\nby: alice\n"
	writeRecord(t, work, first, alice)
	out, code := runCLI(t, "approve", "--git", work, "--by", "robin", "--target", target, "--digest", digest)
	if code != 0 || !strings.Contains(out, "wrote "+second) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if got, _ := os.ReadFile(filepath.Join(work, first)); string(got) != alice {
		t.Errorf("the first approver's record changed:\n%s", got)
	}
	got, err := os.ReadFile(filepath.Join(work, second))
	if err != nil || !strings.Contains(string(got), "by: robin") || !strings.Contains(string(got), "action: approve") {
		t.Errorf("%s (%v):\n%s", second, err, got)
	}
	// Run again: nothing new.
	out, code = runCLI(t, "approve", "--git", work, "--by", "robin", "--target", target, "--digest", digest)
	if code != 0 || !strings.Contains(out, second+" already holds this record") {
		t.Errorf("again: exit %d:\n%s", code, out)
	}
}
