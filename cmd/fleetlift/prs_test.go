package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// prsOutput is `fleetlift prs -o json`.
type prsOutput struct {
	FormatVersion int            `json:"format_version"`
	PullRequests  []prsRow       `json:"pull_requests"`
	Counts        map[string]int `json:"counts"`
	Done          map[string]int `json:"done"`
}

// prsRow is one pull request of `fleetlift prs -o json`.
type prsRow struct {
	Run            string   `json:"run"`
	Unit           string   `json:"unit"`
	Repository     string   `json:"repository"`
	URL            string   `json:"url"`
	Branch         string   `json:"branch"`
	State          string   `json:"state"`
	Head           string   `json:"head"`
	Mergeable      string   `json:"mergeable"`
	Review         string   `json:"review"`
	Checks         string   `json:"checks"`
	FailedChecks   []string `json:"failed_checks"`
	PushedByOthers bool     `json:"pushed_by_others"`
	Error          string   `json:"error"`
	KeepCurrent    string   `json:"keep_current"`
	Done           string   `json:"done"`
	DoneNote       string   `json:"done_note"`
}

func prsJSON(t *testing.T, args ...string) prsOutput {
	t.Helper()
	out, code := runCLI(t, append([]string{"prs", "-o", "json"}, args...)...)
	var got prsOutput
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("prs -o json: exit %d\n%s", code, out)
	}
	return got
}

// TestPullRequestsFollowedOnTheLocalForge is issue 40's pull-request
// state on the local forge: after a campaign opened six, a person
// merges one, deletes one's branch, pushes to one, and moves one's base
// with a conflicting commit; the worker reads them on its own schedule
// into the recorded state, and `prs` and `status` show what became of
// each.
func TestPullRequestsFollowedOnTheLocalForge(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 6)
	def := writeDef(t, root, "prs.yaml", bumpCampaign("prs", urls, ""))
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	flags := []string{"--temporal-address", addr, "--state-dir", stateDir}
	out, code := runCLI(t, append([]string{"run", "--file", def, "--allow-file-root", root, "--pull-requests-every", "1s"}, flags...)...)
	if code != 0 || !strings.Contains(out, "6 repositories: 6 completed") {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	// The run has ended: what became of its pull requests is followed
	// by a worker, which reads them every second here.
	startWorker(t, append([]string{"--allow-file-root", root, "--pull-requests-every", "1s"}, flags...)...)

	bare := func(i int) string { return strings.TrimPrefix(urls[i], "file://") }
	const branch = "auto/prs/prs"
	gitScript(t, fmt.Sprintf(`
# svc0: merged (its branch is on main).
git -C %[1]s update-ref refs/heads/main refs/heads/%[7]s
# svc1: closed (its branch deleted unmerged).
git -C %[2]s update-ref -d refs/heads/%[7]s
# svc3: someone pushes a commit of their own to the branch.
git clone -q -b %[7]s %[3]s %[5]s/svc3
printf 'hello\n' > %[5]s/svc3/README
git -C %[5]s/svc3 add README
git -C %[5]s/svc3 -c user.email=p@example.com -c user.name=p commit -qm readme
git -C %[5]s/svc3 push -q origin %[7]s
# svc4: its base moves with a conflicting change.
git clone -q %[4]s %[5]s/svc4
printf 'module example.com/svc\n\ngo 1.22\n' > %[5]s/svc4/go.mod
git -C %[5]s/svc4 -c user.email=p@example.com -c user.name=p commit -qam "go 1.22"
git -C %[5]s/svc4 push -q origin main
`, bare(0), bare(1), bare(3), bare(4), t.TempDir(), bare(5), branch))

	// The recorded state follows, on the worker's schedule.
	want := map[string]state.PullRequestState{"svc0": state.PullRequestMerged, "svc1": state.PullRequestClosed}
	var rec state.Campaign
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
		r, err := reader.Get(t.Context(), "prs")
		ok := err == nil
		for _, repo := range r.Repos {
			if w, named := want[repo.Name]; named && repo.PullRequestState != w {
				ok = false
			}
		}
		if ok {
			rec = r
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the recorded state did not follow: %+v, %v", r.Repos, err)
		}
	}
	for _, repo := range rec.Repos {
		if repo.PullRequest == nil || repo.PullRequest.CheckedAt.IsZero() {
			t.Errorf("%s: no pull request read: %+v", repo.Name, repo)
		}
	}

	got := prsJSON(t, append([]string{"prs", "--refresh"}, flags...)...)
	type row struct {
		state, mergeable string
		pushed           bool
	}
	wantRows := map[string]row{
		"svc0": {"merged", "", false}, "svc1": {"closed", "", false}, "svc2": {"open", "mergeable", false},
		"svc3": {"open", "mergeable", true}, "svc4": {"open", "conflicting", false}, "svc5": {"open", "mergeable", false},
	}
	if len(got.PullRequests) != 6 {
		t.Fatalf("prs lists %d pull requests; want 6: %+v", len(got.PullRequests), got)
	}
	for _, p := range got.PullRequests {
		w := wantRows[p.Repository]
		if p.Run != "campaign/prs" || p.State != w.state || p.Mergeable != w.mergeable || p.PushedByOthers != w.pushed || p.Error != "" || p.Branch != branch {
			t.Errorf("%s: %+v; want %+v", p.Repository, p, w)
		}
	}
	if got.Counts["open"] != 4 || got.Counts["merged"] != 1 || got.Counts["closed"] != 1 {
		t.Errorf("counts %v", got.Counts)
	}

	// Selected by state, as a table.
	out, code = runCLI(t, append([]string{"prs", "prs", "--state", "merged", "--state", "closed"}, flags...)...)
	if code != 0 || !strings.Contains(out, "svc0") || !strings.Contains(out, "svc1") || strings.Contains(out, "svc2") ||
		!strings.Contains(out, "pull requests: 1 merged, 1 closed") {
		t.Errorf("prs --state merged --state closed: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, append([]string{"prs", "prs", "--state", "unknown"}, flags...)...)
	if code == 0 || !strings.Contains(out, "--state unknown: want open, draft, merged, closed or unread") {
		t.Errorf("prs --state unknown: exit %d\n%s", code, out)
	}
	// status says it beside each pull request.
	out, code = runCLI(t, append([]string{"status", "prs"}, flags...)...)
	for _, w := range []string{"#auto/prs/prs (merged)", "#auto/prs/prs (closed)", "(open, pushed by others)", "(open, conflicting)"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("status lacks %q:\n%s", w, out)
		}
	}
	// Bulk actions: nothing here was approved (the local forge has no
	// reviews), so merge merges nothing unless told to.
	out, code = runCLI(t, append([]string{"prs", "merge", "prs"}, flags...)...)
	if code != 0 || !strings.Contains(out, "merge: 6 skipped") || !strings.Contains(out, "no reviewer approved it") {
		t.Errorf("prs merge: exit %d\n%s", code, out)
	}
	out, code = runCLI(t, append([]string{"prs", "merge", "prs", "--unapproved", "--repository", "svc2", "--repository", "svc4"}, flags...)...)
	if code != 0 || !strings.Contains(out, "merge: 1 merged, 1 skipped") || !strings.Contains(out, "it conflicts with its base") {
		t.Errorf("prs merge --unapproved: exit %d\n%s", code, out)
	}
	if got := gitOut(t, bare(2), "show", "main:go.mod"); !strings.Contains(got, "go 1.26") {
		t.Errorf("svc2's main after the merge: %q", got)
	}
	out, code = runCLI(t, append([]string{"prs", "close", "prs", "--repository", "svc5"}, flags...)...)
	if code != 0 || !strings.Contains(out, "close: 1 closed") {
		t.Errorf("prs close: exit %d\n%s", code, out)
	}
	got = prsJSON(t, append([]string{"prs"}, flags...)...)
	if got.Counts["merged"] != 2 || got.Counts["closed"] != 2 || got.Counts["open"] != 2 {
		t.Errorf("after merge and close: %v", got.Counts)
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

// TestPullRequestsFollowedOnGitea is the same on a real Gitea, where
// pull requests also have reviews and commit statuses: a person merges
// one, closes one, sets a failing status on one, pushes a commit of
// their own to one, moves one's base with a conflicting commit, and
// approves one; `prs` shows exactly that.
func TestPullRequestsFollowedOnGitea(t *testing.T) {
	g := giteatest.Start(t)
	bot := g.Admin()
	alice := g.CreateUser(t, "alice")
	var repos strings.Builder
	urls := map[string]string{}
	for i := range 7 {
		name := fmt.Sprintf("svc-%02d", i)
		url := giteaGoModule(t, g, bot, name, "main")
		urls[name] = url
		g.AddCollaborator(t, bot.Name, name, alice.Name, "write")
		fmt.Fprintf(&repos, "  - url: %s\n", url)
	}
	// svc-06: before the run, alice made the campaign's branch herself
	// and opened a pull request from it: the run adopts it, pushing
	// nothing over her commit and opening no second one.
	adopted := t.TempDir()
	g.Git(t, alice, adopted, "clone", "-q", urls["svc-06"], ".")
	writeFile(t, adopted, "go.mod", "module example.com/svc-06\n\ngo 1.25\n")
	g.Git(t, alice, adopted, "-c", "user.name=alice", "-c", "user.email=alice@example.com", "commit", "-qam", "go 1.25, by hand")
	g.Git(t, alice, adopted, "push", "-q", "origin", "HEAD:refs/heads/auto/bump/bump")
	hers := strings.TrimSpace(g.Git(t, alice, adopted, "rev-parse", "HEAD"))
	var herPR giteaPR
	g.Do(t, alice.Token, "POST", "repos/"+bot.Name+"/svc-06/pulls",
		map[string]string{"head": "auto/bump/bump", "base": "main", "title": "go 1.25"}, &herPR)
	root := t.TempDir()
	def := writeDef(t, root, "bump.yaml", `version: 1
kind: Campaign
id: bump
title: Raise the go directive
template:
  execution:
    deterministic:
      image: golang
      command: [sed, -i, "s/^go 1[.][0-9]*$/go 1.26/", go.mod]
  pull_request: {branch_prefix: auto/bump, title: Raise the go directive}
repositories:
`+repos.String())
	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", g.URL())
	t.Setenv("FLEETLIFT_FORGE_TOKEN", bot.Token)
	stateDir := filepath.Join(root, "state")
	addr, _, _ := serverForTest(t, stateDir)
	flags := []string{"--temporal-address", addr, "--state-dir", stateDir}
	out, code := runCLI(t, append([]string{"run", "--file", def, "--pull-requests-every", "1s"}, flags...)...)
	if code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	startWorker(t, append([]string{"--pull-requests-every", "1s"}, flags...)...)

	number := map[string]int{}
	for name := range urls {
		var prs []giteaPR
		g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/"+name+"/pulls?state=open", nil, &prs)
		if len(prs) != 1 {
			t.Fatalf("%s: pull requests %+v; want the one run opened", name, prs)
		}
		number[name] = prs[0].Number
	}
	pulls := func(name string) string { return fmt.Sprintf("repos/%s/%s/pulls/%d", bot.Name, name, number[name]) }
	// svc-00 merged, svc-01 closed, svc-02's head fails a check.
	g.Do(t, bot.Token, "POST", pulls("svc-00")+"/merge", map[string]string{"Do": "merge"}, nil)
	g.Do(t, bot.Token, "PATCH", pulls("svc-01"), map[string]string{"state": "closed"}, nil)
	var pr giteaPR
	g.Do(t, bot.Token, "GET", pulls("svc-02"), nil, &pr)
	g.Do(t, bot.Token, "POST", fmt.Sprintf("repos/%s/svc-02/statuses/%s", bot.Name, pr.Head.Sha),
		map[string]string{"state": "failure", "context": "ci/build", "description": "build failed"}, nil)
	// svc-03: alice pushes a commit of her own to the branch.
	work := t.TempDir()
	g.Git(t, alice, work, "clone", "-q", "-b", "auto/bump/bump", urls["svc-03"], ".")
	writeFile(t, work, "README", "hello\n")
	g.Git(t, alice, work, "add", "README")
	g.Git(t, alice, work, "-c", "user.name=alice", "-c", "user.email=alice@example.com", "commit", "-q", "-m", "readme")
	g.Git(t, alice, work, "push", "-q", "origin", "auto/bump/bump")
	// svc-04: its base moves with a conflicting change.
	work = t.TempDir()
	g.Git(t, alice, work, "clone", "-q", urls["svc-04"], ".")
	writeFile(t, work, "go.mod", "module example.com/svc-04\n\ngo 1.22\n")
	g.Git(t, alice, work, "-c", "user.name=alice", "-c", "user.email=alice@example.com", "commit", "-qam", "go 1.22")
	g.Git(t, alice, work, "push", "-q", "origin", "main")
	// svc-05: alice approves it.
	g.Do(t, alice.Token, "POST", pulls("svc-05")+"/reviews", map[string]string{"event": "APPROVED", "body": "ship it"}, nil)

	type row struct {
		state, review, checks, mergeable string
		pushed                           bool
		failed                           string
	}
	want := map[string]row{
		"svc-00": {state: "merged"},
		"svc-01": {state: "closed"},
		"svc-02": {state: "open", review: "none", checks: "failure", mergeable: "mergeable", failed: "ci/build"},
		"svc-03": {state: "open", review: "none", mergeable: "mergeable", pushed: true},
		"svc-04": {state: "open", review: "none", mergeable: "conflicting"},
		"svc-05": {state: "open", review: "approved", mergeable: "mergeable"},
		"svc-06": {state: "open", review: "none", mergeable: "mergeable", pushed: true},
	}
	// Gitea works out mergeability in the background: read until it has.
	var got prsOutput
	var diffs []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {

		got = prsJSON(t, append([]string{"bump", "--refresh"}, flags...)...)
		diffs = nil
		for _, p := range got.PullRequests {
			name := p.Repository[strings.LastIndex(p.Repository, "/")+1:]
			name = strings.TrimSuffix(name, ".git")
			w := want[name]
			failed := strings.Join(p.FailedChecks, ",")
			if p.State != w.state || p.Review != w.review || p.Checks != w.checks || p.Mergeable != w.mergeable ||
				p.PushedByOthers != w.pushed || failed != w.failed || p.Error != "" {
				diffs = append(diffs, fmt.Sprintf("%s: %+v; want %+v", name, p, w))
			}
		}
		if len(got.PullRequests) == 7 && len(diffs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prs after a minute (%d listed):\n%s", len(got.PullRequests), strings.Join(diffs, "\n"))
		}
	}
	if got.Counts["open"] != 5 || got.Counts["merged"] != 1 || got.Counts["closed"] != 1 {
		t.Errorf("counts %v", got.Counts)
	}
	for _, p := range got.PullRequests {
		if strings.HasSuffix(p.Repository, "svc-06") && (!strings.HasSuffix(p.URL, fmt.Sprintf("/pulls/%d", herPR.Number)) || p.Head != hers) {
			t.Errorf("svc-06: %+v; want alice's pull request %d at her %s, adopted", p, herPR.Number, hers)
		}
	}

	// prs update makes svc-04's change again on its new base; alice's
	// svc-03 is left alone, saying why.
	head := func(name string) string {
		var p giteaPR
		g.Do(t, bot.Token, "GET", pulls(name), nil, &p)
		return p.Head.Sha
	}
	alices := head("svc-03")
	out, code = runCLI(t, append([]string{"prs", "update", "bump", "--repository", "svc-04", "--repository", "svc-03"}, flags...)...)
	if code != 0 || !strings.Contains(out, "update: 1 queued, 1 skipped") || !strings.Contains(out, "someone else pushed to its branch") {
		t.Fatalf("prs update: exit %d\n%s", code, out)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Second) {
		got = prsJSON(t, append([]string{"bump", "--refresh"}, flags...)...)
		i := slices.IndexFunc(got.PullRequests, func(p prsRow) bool { return strings.HasSuffix(p.Repository, "svc-04") })
		if i >= 0 && got.PullRequests[i].Mergeable == "mergeable" && !got.PullRequests[i].PushedByOthers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc-04 was not made again on its new base: %+v", got.PullRequests)
		}
	}
	work = t.TempDir()
	g.Git(t, bot, work, "clone", "-q", "-b", "auto/bump/bump", urls["svc-04"], ".")
	if got := g.Git(t, bot, work, "show", "HEAD:go.mod"); !strings.Contains(got, "go 1.26") {
		t.Errorf("svc-04's branch holds %q", got)
	}
	if parent, main := strings.TrimSpace(g.Git(t, bot, work, "rev-parse", "HEAD^")), strings.TrimSpace(g.Git(t, bot, work, "rev-parse", "origin/main")); parent != main {
		t.Errorf("svc-04's change is on %s, not on main's %s", parent, main)
	}
	if h := head("svc-03"); h != alices {
		t.Errorf("svc-03 moved from alice's %s to %s", alices, h)
	}

	// prs merge merges only what is approved, green and merging
	// cleanly; prs close closes with a comment.
	out, code = runCLI(t, append([]string{"prs", "merge", "bump", "--method", "squash", "--delete-branch"}, flags...)...)
	for _, w := range []string{"merge: 1 merged, 6 skipped", "svc-05", "checks failed: ci/build", "no reviewer approved it", "it is merged", "it is closed"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Errorf("prs merge lacks %q: exit %d\n%s", w, code, out)
		}
	}
	g.Do(t, bot.Token, "GET", pulls("svc-05"), nil, &pr)
	if !pr.Merged {
		t.Errorf("svc-05 not merged on the forge: %+v", pr)
	}
	out, code = runCLI(t, append([]string{"prs", "close", "bump", "--repository", "svc-03", "--comment", "Superseded."}, flags...)...)
	if code != 0 || !strings.Contains(out, "close: 1 closed") {
		t.Errorf("prs close: exit %d\n%s", code, out)
	}
	g.Do(t, bot.Token, "GET", pulls("svc-03"), nil, &pr)
	var comments []struct {
		Body string `json:"body"`
	}
	g.Do(t, bot.Token, "GET", fmt.Sprintf("repos/%s/svc-03/issues/%d/comments", bot.Name, number["svc-03"]), nil, &comments)
	if pr.State != "closed" || pr.Merged || len(comments) != 1 || !strings.Contains(comments[0].Body, "Superseded.") {
		t.Errorf("svc-03 after close: %+v, comments %+v", pr, comments)
	}
}

// TestDeclaredMergeOnTheLocalForge: a campaign whose pull_request says
// merge: is merged by the worker once its pull requests may be, with no
// command: the GitOps way.
func TestDeclaredMergeOnTheLocalForge(t *testing.T) {
	urls, _, reader := followedCampaign(t, "landed", "s/^go 1.21$/go 1.26/", "merge: {require_review: false}", 3)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(300 * time.Millisecond) {
		r, err := reader.Get(t.Context(), "landed")
		merged := 0
		for _, repo := range r.Repos {
			if repo.PullRequestState == state.PullRequestMerged {
				merged++
			}
		}
		if err == nil && merged == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not merged by themselves: %+v, %v", r.Repos, err)
		}
	}
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		if got := gitOut(t, bare, "show", "main:go.mod"); !strings.Contains(got, "go 1.26") {
			t.Errorf("%s: main's go.mod %q", bare, got)
		}
		// delete_branch defaults to true.
		if out, err := exec.Command("git", "-C", bare, "rev-parse", "--verify", "--quiet", "refs/heads/auto/landed/landed").Output(); err == nil {
			t.Errorf("%s: branch left at %s", bare, out)
		}
	}
}

// followedCampaign runs sedCampaign(id, sed, pullRequest) over n
// repositories demoRepos makes, with a worker that reads its pull
// requests every second, and returns the repositories, the flags that
// reach the server, and its state reader.
func followedCampaign(t *testing.T, id, sed, pullRequest string, n int) ([]string, []string, *statetemporal.Reader) {
	t.Helper()
	root := t.TempDir()
	urls := demoRepos(t, root, n)
	def := writeDef(t, root, id+".yaml", sedCampaign(id, sed, pullRequest, urls, ""))
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	flags := []string{"--temporal-address", addr, "--state-dir", stateDir}
	startWorker(t, append([]string{"--allow-file-root", root, "--pull-requests-every", "1s"}, flags...)...)
	out, code := runCLI(t, append([]string{"run", "--file", def, "--allow-file-root", root, "--no-worker"}, flags...)...)
	if want := fmt.Sprintf("%d repositories: %d completed", n, n); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	return urls, flags, reader
}

// TestRemovedCampaignClosesItsPullRequests: a campaign whose
// pull_request says close: and sync_policy prune: true is removed from
// the campaigns repository; the reconciler has its open pull requests
// closed (on the local forge, their branches deleted).
func TestRemovedCampaignClosesItsPullRequests(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	urls := demoRepos(t, root, 2)
	campaigns := filepath.Join(root, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`version: 1
kind: Campaign
id: gone
title: Bump go
sync_policy: {prune: true}
template:
  execution:
    deterministic:
      image: golang
      command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]
  pull_request:
    branch_prefix: auto/gone
    title: Bump go
    close: {comment: "Withdrawn."}
repositories:
`)
	for _, u := range urls {
		fmt.Fprintf(&b, "  - url: %s\n", u)
	}
	file := filepath.Join(campaigns, "campaigns", "gone.yaml")
	writeFile(t, filepath.Dir(file), "gone.yaml", b.String())
	for _, args := range [][]string{{"add", "."}, {"commit", "-q", "-m", "Bump go"}} {
		if err := demo.Git(ctx, campaigns, demo.Author, args...); err != nil {
			t.Fatal(err)
		}
	}
	stateDir := filepath.Join(root, "state")
	addr, _, reader := serverForTest(t, stateDir)
	flags := []string{"--temporal-address", addr, "--state-dir", stateDir}
	up := startUp(t, append([]string{"--repo", campaigns, "--interval", "1s", "--allow-file-root", root, "--pull-requests-every", "1s"}, flags...)...)

	wait := func(what string, ok func(state.Campaign) bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
			r, err := reader.Get(ctx, "gone")
			if err == nil && ok(r) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v, %v\n%s", what, r, err, up.out.String())
			}
		}
	}
	allPRs := func(s state.PullRequestState) func(state.Campaign) bool {
		return func(r state.Campaign) bool {
			n := 0
			for _, repo := range r.Repos {
				if repo.PullRequestState == s && repo.PullRequest != nil {
					n++
				}
			}
			return n == len(urls)
		}
	}
	wait("pull requests open and read", allPRs(state.PullRequestOpen))

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "Withdraw gone"}} {
		if err := demo.Git(ctx, campaigns, demo.Author, args...); err != nil {
			t.Fatal(err)
		}
	}
	wait("pull requests closed after the removal", allPRs(state.PullRequestClosed))
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		if out, err := exec.Command("git", "-C", bare, "rev-parse", "--verify", "--quiet", "refs/heads/auto/gone/gone").Output(); err == nil {
			t.Errorf("%s: branch left at %s", bare, out)
		}
	}
}
