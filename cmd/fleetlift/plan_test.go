package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// TestPlanExamplesAllCreate: with no recorded state every example in the
// repository would be created.
func TestPlanExamplesAllCreate(t *testing.T) {
	res, err := (&spec.Loader{}).Load(context.Background(), os.DirFS("../../examples"), ".")
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("load examples: %v %v", err, res.Errors)
	}
	out, code := runCLI(t, "plan", "--repo", "../..", "--path", "examples", "--state", "none", "-o", "json", "--state-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var p struct {
		Campaigns []struct{ ID, Action string }
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The plan reads HEAD: examples added since the last commit are not in it.
	if len(p.Campaigns) == 0 || len(p.Campaigns) > len(res.Definitions) {
		t.Fatalf("%d campaigns planned, %d examples", len(p.Campaigns), len(res.Definitions))
	}
	for _, c := range p.Campaigns {
		if c.Action != "create" {
			t.Errorf("%s: %s, want create", c.ID, c.Action)
		}
	}
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func campaignYAML(id, prompt string) string {
	return `version: 1
kind: Campaign
id: ` + id + `
title: ` + id + `
template:
  execution:
    agentic:
      prompt: ` + prompt + `
  pull_request: {branch_prefix: auto/` + id + `, title: ` + id + `}
repositories:
  - url: https://github.com/acme/payments.git
  - url: https://github.com/acme/ledger.git
`
}

// campaignsRepo makes a campaigns repository: main with three campaigns;
// feature adds one and edits another.
func campaignsRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	files := map[string]string{
		"fleetlift.yaml":       "version: 1\n",
		"campaigns/alpha.yaml": campaignYAML("alpha", "migrate logging"),
		"campaigns/beta.yaml":  campaignYAML("beta", "bump go"),
		"campaigns/gamma.yaml": campaignYAML("gamma", "add license headers"),
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "three campaigns")
	git(t, dir, "checkout", "-q", "-b", "feature")
	if err := os.WriteFile(filepath.Join(dir, "campaigns/delta.yaml"), []byte(campaignYAML("delta", "remove dead code")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "campaigns/beta.yaml"), []byte(campaignYAML("beta", "bump go to 1.26")), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-qm", "add delta, edit beta")
	git(t, dir, "checkout", "-q", "main")
	return dir
}

// TestPlanPullRequest: planning feature against main shows exactly the
// added campaign and the edited one, with its field diff.
func TestPlanPullRequest(t *testing.T) {
	repo := campaignsRepo(t)
	out, code := runCLI(t, "plan", "--repo", repo, "--ref", "feature", "--base", "main", "--state", "none", "-o", "markdown", "--detailed-exitcode", "--state-dir", t.TempDir())
	if code != 2 {
		t.Fatalf("exit %d, want 2 (changes):\n%s", code, out)
	}
	for _, want := range []string{"Plan: 1 to create, 1 to update, 0 to prune, 0 orphaned.", "delta", "beta", "template.execution.agentic.prompt", "bump go to 1.26"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	// Nothing is recorded: the plan does not claim the base's runs are
	// running.
	if strings.Contains(out, "(running)") {
		t.Errorf("markdown says a run of the base is running although no state was read:\n%s", out)
	}

	out, code = runCLI(t, "plan", "--repo", repo, "--ref", "feature", "--base", "main", "--state", "none", "-o", "json", "--state-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("json: exit %d:\n%s", code, out)
	}
	var p struct {
		Campaigns []struct{ ID, Action string }
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, c := range p.Campaigns {
		actions[c.ID] = c.Action
	}
	want := map[string]string{"alpha": "unchanged", "beta": "update", "gamma": "unchanged", "delta": "create"}
	for id, a := range want {
		if actions[id] != a {
			t.Errorf("%s: %q, want %q (all: %v)", id, actions[id], a, actions)
		}
	}

	// The same revision against itself: no changes, exit 0.
	out, code = runCLI(t, "plan", "--repo", repo, "--ref", "main", "--base", "main", "--state", "none", "--detailed-exitcode", "--state-dir", t.TempDir())
	if code != 0 || !strings.Contains(out, "No changes.") {
		t.Errorf("main against main: exit %d:\n%s", code, out)
	}
}

// TestPlanWithoutServer: by default a plan reads the recorded state from
// Temporal; where none can be reached (a pull request's CI), it plans
// without it and says what it assumed, in every view. Asked for Temporal
// explicitly, it fails instead.
func TestPlanWithoutServer(t *testing.T) {
	repo := campaignsRepo(t)
	nobody := freeAddr(t)
	args := []string{"plan", "--repo", repo, "--ref", "feature", "--base", "main", "--temporal-address", nobody, "--state-dir", t.TempDir()}
	out, code := runCLI(t, append(args, "-o", "markdown", "--detailed-exitcode")...)
	if code != 2 {
		t.Fatalf("exit %d, want 2 (changes):\n%s", code, out)
	}
	for _, want := range []string{"Assumed: no recorded state (Temporal at " + nobody + " cannot be reached", "the definitions at main count as applied, and no run's phase is known.", "Plan: 1 to create, 1 to update"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown lacks %q:\n%s", want, out)
		}
	}
	out, code = runCLI(t, append(args, "-o", "json")...)
	var p struct {
		Recorded struct{ Source, Assumed string } `json:"recorded_state"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if p.Recorded.Source != "none" || !strings.Contains(p.Recorded.Assumed, "cannot be reached") {
		t.Errorf("json recorded_state: %+v", p.Recorded)
	}
	// Without --base nothing counts as applied, and the plan says that.
	out, code = runCLI(t, "plan", "--repo", repo, "--temporal-address", nobody, "--state-dir", t.TempDir())
	if code != 0 || !strings.Contains(out, "nothing counts as applied: every definition shows as new.") || !strings.Contains(out, "3 to create") {
		t.Errorf("plan without --base: exit %d:\n%s", code, out)
	}
	out, code = runCLI(t, append(args, "--state", "temporal")...)
	if code != 1 || !strings.Contains(out, "connect to Temporal at "+nobody) {
		t.Errorf("--state temporal without a server: exit %d:\n%s", code, out)
	}
}

// TestPlanInvalidFile: a broken definition is an error for its file, every
// other campaign is still planned, and the exit status is 1.
func TestPlanInvalidFile(t *testing.T) {
	repo := campaignsRepo(t)
	if err := os.WriteFile(filepath.Join(repo, "campaigns/broken.yaml"), []byte("version: 1\nkind: Campaign\nid: Broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "broken")
	out, code := runCLI(t, "plan", "--repo", repo, "--state", "none", "--state-dir", t.TempDir())
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{"campaigns/broken.yaml:3:5", "alpha", "beta", "gamma", "3 to create"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// TestPlanAgainstTemporal: after a campaign has run, planning its
// definition against the state recorded in Temporal shows it unchanged;
// after an edit, as an update with the field diff.
func TestPlanAgainstTemporal(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 2)
	repo := filepath.Join(root, "campaigns-repo")
	if err := os.MkdirAll(filepath.Join(repo, "campaigns"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	def := func(title string) string {
		return `version: 1
kind: Campaign
id: bump
title: ` + title + `
template:
  execution:
    deterministic: {image: golang, command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]}
  pull_request: {branch_prefix: auto/bump, title: Bump go}
repositories:
  - url: ` + urls[0] + `
  - url: ` + urls[1] + `
`
	}
	file := filepath.Join(repo, "campaigns", "bump.yaml")
	if err := os.WriteFile(file, []byte(def("Bump go")), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "bump")

	addr, state := freeAddr(t), filepath.Join(root, "state")
	if out, code := runCLI(t, "run", "--file", file, "--temporal-address", addr, "--state-dir", state); code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	startServer(t, addr, state)
	plan := func() (string, int) {
		return runCLI(t, "plan", "--repo", repo, "--path", "campaigns", "--state", "temporal", "--temporal-address", addr, "--state-dir", state, "--detailed-exitcode")
	}
	if out, code := plan(); code != 0 || !strings.Contains(out, "No changes.") {
		t.Fatalf("plan after the run: exit %d, want no changes:\n%s", code, out)
	}
	// By default (--state auto) the plan reads the server it reaches.
	out, code := runCLI(t, "plan", "--repo", repo, "--path", "campaigns", "--temporal-address", addr, "--state-dir", state, "-o", "json")
	if code != 0 || !strings.Contains(out, `"source": "temporal"`) || strings.Contains(out, "Assumed") {
		t.Fatalf("plan with the default --state: exit %d:\n%s", code, out)
	}

	if err := os.WriteFile(file, []byte(def("Bump go to 1.26")), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "commit", "-qam", "retitle")
	out, code = plan()
	if code != 2 {
		t.Fatalf("plan after an edit: exit %d, want 2:\n%s", code, out)
	}
	for _, want := range []string{"~ bump", `title: "Bump go" → "Bump go to 1.26"`, "Plan: 0 to create, 1 to update"} {
		if !strings.Contains(out, want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
}

// prComments is a forge API that keeps the issue comments of pull request
// 7 of acme/campaigns, as GitHub's API serves them under /api/v3, and the
// commit statuses set on its head.
type prComments struct {
	mu       sync.Mutex
	comments []prComment
	nextID   int64
	statuses []string
}

type prComment struct {
	ID   int64  `json:"id"`
	Body string `json:"body"`
}

func (p *prComments) handler(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	const list = "/api/v3/repos/acme/campaigns/issues/7/comments"
	var in prComment
	switch {
	case r.Method == http.MethodGet && r.URL.Path == list:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.comments)
	case r.Method == http.MethodPost && r.URL.Path == list:
		_ = json.NewDecoder(r.Body).Decode(&in)
		p.nextID++
		in.ID = p.nextID
		p.comments = append(p.comments, in)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(in)
	case r.Method == http.MethodGet && r.URL.Path == "/api/v3/repos/acme/campaigns/pulls/7":
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"number": 7, "state": "open", "head": {"ref": "feature", "sha": %q}, "base": {"ref": "main"}}`, prHead)
	case r.Method == http.MethodPost && r.URL.Path == "/api/v3/repos/acme/campaigns/statuses/"+prHead:
		var st struct{ State, Context, Description string }
		_ = json.NewDecoder(r.Body).Decode(&st)
		p.statuses = append(p.statuses, st.Context+" "+st.State+": "+st.Description)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	case r.Method == http.MethodPatch && strings.HasPrefix(r.URL.Path, "/api/v3/repos/acme/campaigns/issues/comments/"):
		_ = json.NewDecoder(r.Body).Decode(&in)
		id, _ := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/api/v3/repos/acme/campaigns/issues/comments/"), 10, 64)
		for i := range p.comments {
			if p.comments[i].ID == id {
				p.comments[i].Body = in.Body
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(p.comments[i])
				return
			}
		}
		http.NotFound(w, r)
	default:
		http.NotFound(w, r)
	}
}

// prHead is the head commit of the pull request prComments serves.
const prHead = "0123456789abcdef0123456789abcdef01234567"

// lastStatus is the last commit status set on prHead, "" when none.
func (p *prComments) lastStatus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.statuses) == 0 {
		return ""
	}
	return p.statuses[len(p.statuses)-1]
}

func (p *prComments) bodies() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.comments {
		out = append(out, c.Body)
	}
	return out
}

// TestPlanCommentOnPullRequest: in a pull request's CI, with the
// repository checked out and the pull request named by its URL, the plan
// keeps one comment of its own: with the errors while a definition is
// invalid, the plan once it is fixed, why no plan could be made when none
// could; the people's comments, one quoting the old plan, are left alone.
func TestPlanCommentOnPullRequest(t *testing.T) {
	comments := &prComments{comments: []prComment{{ID: 1, Body: "LGTM"}}, nextID: 1}
	api := startForgeRecorder(t, comments.handler)
	t.Setenv("FLEETLIFT_FORGE_TYPE", "github")
	t.Setenv("FLEETLIFT_FORGE_URL", api.URL+"/api/v3/")
	t.Setenv("FLEETLIFT_FORGE_TOKEN", "ci-token")
	repo := campaignsRepo(t)
	if err := os.WriteFile(filepath.Join(repo, "fleetlift.yaml"), []byte("version: 1\nforge: {type: github}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "commit", "-qam", "the forge")
	git(t, repo, "checkout", "-q", "feature")
	git(t, repo, "merge", "-q", "main", "-m", "merge main")
	if err := os.WriteFile(filepath.Join(repo, "campaigns/broken.yaml"), []byte("version: 1\nkind: Campaign\nid: Broken\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "broken")
	pr := api.URL + "/acme/campaigns/pull/7"
	plan := func(ref string) (string, int) {
		return runCLI(t, "plan", "--repo", repo, "--ref", ref, "--base", "main", "-o", "markdown", "--comment-on", pr, "--state", "none", "--state-dir", t.TempDir())
	}

	out, code := plan("feature")
	bodies := comments.bodies()
	if code != 1 || len(bodies) != 2 {
		t.Fatalf("exit %d, %d comments:\n%s", code, len(bodies), out)
	}
	for _, want := range []string{planMarker, "#### Errors", "`campaigns/broken.yaml:3:5`", "delta"} {
		if !strings.Contains(bodies[1], want) {
			t.Errorf("the comment lacks %q:\n%s", want, bodies[1])
		}
	}
	if got := comments.lastStatus(); !strings.HasPrefix(got, "fleetlift/plan failure: invalid definitions") {
		t.Errorf("status after an invalid plan: %q", got)
	}
	// Someone replies quoting the plan: that comment is theirs.
	comments.mu.Lock()
	quote := "> " + strings.ReplaceAll(comments.comments[1].Body, "\n", "\n> ")
	comments.comments = append(comments.comments, prComment{ID: 99, Body: "Why is broken.yaml broken?\n" + quote})
	comments.mu.Unlock()

	git(t, repo, "rm", "-q", "campaigns/broken.yaml")
	git(t, repo, "commit", "-qm", "fixed")
	out, code = plan("feature")
	bodies = comments.bodies()
	if code != 0 || len(bodies) != 3 {
		t.Fatalf("after the fix: exit %d, %d comments:\n%s", code, len(bodies), out)
	}
	if !strings.HasPrefix(bodies[1], planMarker) || strings.Contains(bodies[1], "Errors") || !strings.Contains(bodies[1], "Plan: 1 to create, 1 to update") {
		t.Errorf("the plan comment was not brought up to date:\n%s", bodies[1])
	}
	if bodies[0] != "LGTM" || !strings.HasPrefix(bodies[2], "Why is broken.yaml broken?") {
		t.Errorf("people's comments changed: %q", bodies)
	}
	if got := comments.lastStatus(); got != "fleetlift/plan success: Plan: 1 to create, 1 to update, 0 to prune, 0 orphaned." {
		t.Errorf("status after the fix: %q", got)
	}

	out, code = plan("no-such-branch")
	bodies = comments.bodies()
	if code != 1 || len(bodies) != 3 || !strings.Contains(bodies[1], "No plan: it could not be made.") || !strings.Contains(bodies[1], "no-such-branch") {
		t.Errorf("a plan that cannot be made: exit %d:\n%s\ncomment:\n%s", code, out, bodies[1])
	}
	if got := comments.lastStatus(); !strings.HasPrefix(got, "fleetlift/plan error: no plan") {
		t.Errorf("status when no plan could be made: %q", got)
	}
	// Each plan set pending first: three plans, six statuses.
	comments.mu.Lock()
	pending := 0
	for _, st := range comments.statuses {
		if strings.HasPrefix(st, "fleetlift/plan pending") {
			pending++
		}
	}
	if len(comments.statuses) != 6 || pending != 3 {
		t.Errorf("statuses %q; want pending, then the outcome, for each of three plans", comments.statuses)
	}
	comments.mu.Unlock()
	for _, r := range api.requests() {
		if r.authorization != "Bearer ci-token" {
			t.Errorf("%s %s carried %q, want the CI token", r.method, r.path, r.authorization)
		}
	}
}

// TestParseCommentOn: --comment-on takes a pull request number of --repo,
// or a pull request's URL on GitHub or Gitea.
func TestParseCommentOn(t *testing.T) {
	for _, tt := range []struct {
		arg, want, err string
	}{
		{arg: "12", want: "pull request 12 of ."},
		{arg: "https://github.com/acme/campaigns/pull/12", want: "pull request 12 of https://github.com/acme/campaigns"},
		{arg: "https://git.example.com/acme/campaigns/pulls/3/", want: "pull request 3 of https://git.example.com/acme/campaigns"},
		{arg: "0", err: "positive"},
		{arg: "https://github.com/acme/campaigns/issues/12", err: "want a pull request number, or its URL"},
		{arg: "pr-12", err: "want a pull request number, or its URL"},
	} {
		got, err := parseCommentOn(".", tt.arg)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error with %q", tt.arg, err, tt.err)
		case tt.err == "" && (err != nil || got.String() != tt.want):
			t.Errorf("%s: %v %v, want %s", tt.arg, got, err, tt.want)
		}
	}
}
