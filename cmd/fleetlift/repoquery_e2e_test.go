package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/state"
)

// planOutput is the part of `fleetlift plan -o json` these tests read.
type planOutput struct {
	Campaigns []struct {
		ID           string `json:"id"`
		Action       string `json:"action"`
		Repositories struct {
			Added   []string `json:"added"`
			Removed []string `json:"removed"`
		} `json:"repositories"`
	} `json:"campaigns"`
	Errors []struct {
		File    string `json:"file"`
		Line    int    `json:"line"`
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// planJSON runs plan -o json; exit 1 (errors in the plan) and 2
// (changes) are the caller's to judge.
func planJSON(t *testing.T, args ...string) planOutput {
	t.Helper()
	out, code := runCLI(t, append([]string{"plan", "-o", "json"}, args...)...)
	if code > 2 {
		t.Fatalf("plan %v: exit %d:\n%s", args, code, out)
	}
	var p planOutput
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v:\n%s", err, out)
	}
	return p
}

// TestRepositoriesFromGitea selects a campaign's repositories by query
// on a real Gitea: topics and a name pattern, archived ones left out.
// The plan lists exactly those; the run starts with them; a repository
// created after the run started does not join its generation, neither
// while the reconciler runs nor in a plan of the same revision, and
// joins as an update once the campaigns repository moves.
func TestRepositoriesFromGitea(t *testing.T) {
	ctx := context.Background()
	g := giteatest.Start(t)
	bot := g.Admin()
	g.CreateOrg(t, "platform")
	repo := func(name string, archived bool, topics ...string) {
		g.CreateRepo(t, "platform", name, true)
		g.Do(t, bot.Token, http.MethodPut, "repos/platform/"+name+"/topics", map[string]any{"topics": topics}, nil)
		if archived {
			g.Do(t, bot.Token, http.MethodPatch, "repos/platform/"+name, map[string]any{"archived": true}, nil)
		}
	}
	repo("svc-api", false, "go")
	repo("svc-web", false, "go", "frontend")
	repo("svc-old", true, "go")
	repo("svc-py", false, "python")
	repo("lib-go", false, "go")

	approvers := fmt.Sprintf("approvers:\n  - path: \"campaigns/**\"\n    users: [%s]\n", bot.Name)
	campaigns, git := giteaCampaigns(t, g, approvers, map[string]string{"campaigns/bump.yaml": `version: 1
kind: Campaign
id: bump
title: Note the bump
template:
  execution:
    deterministic:
      image: alpine
      command: [sh, -c, "echo bumped >> README.md"]
  require_approval: true
  pull_request: {branch_prefix: auto/bump, title: Note the bump}
repositories_from:
  - owner: platform
    topics: [go]
    names: ["svc-*"]
`})
	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", g.URL())
	t.Setenv("FLEETLIFT_FORGE_TOKEN", bot.Token)
	t.Setenv("FLEETLIFT_GIT_TOKEN", bot.Token)

	// The plan lists exactly what the query selects.
	p := planJSON(t, "--repo", campaigns, "--state", "none")
	if len(p.Errors) > 0 || len(p.Campaigns) != 1 || p.Campaigns[0].Action != "create" ||
		!slices.Equal(p.Campaigns[0].Repositories.Added, []string{"svc-api", "svc-web"}) {
		t.Fatalf("plan: %+v", p)
	}

	stateDir := t.TempDir()
	// The tasks end awaiting approval, and a sandbox outlives its
	// worker until it is orphaned: once up has stopped, they end (in two
	// seconds here) before the state directory goes.
	t.Cleanup(func() { awaitNoProcessUnder(t, stateDir, time.Minute) })
	addr, _, reader := serverForTest(t, stateDir)
	up := startUp(t, "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s",
		"--sandbox-orphan-after", "2s")
	names := func(rec state.Campaign) []string {
		var out []string
		for _, r := range rec.Repos {
			out = append(out, r.Name)
		}
		return out
	}
	waitFor := func(what string, ok func(state.Campaign) bool) state.Campaign {
		t.Helper()
		var rec state.Campaign
		var err error
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
			if rec, err = reader.Get(ctx, "bump"); err == nil && ok(rec) {
				return rec
			}
		}
		t.Fatalf("%s: %+v, %v\n%s", what, rec, err, up.out.String())
		return rec
	}
	first := waitFor("the run awaits approval in both repositories", func(c state.Campaign) bool {
		return c.Generation == 1 && len(c.PendingApprovals) == 2
	})
	if n := names(first); !slices.Equal(n, []string{"svc-api", "svc-web"}) {
		t.Fatalf("the run started with %v", n)
	}

	// svc-new matches from now on; the run's generation keeps its
	// repositories while the campaigns repository stays where it is.
	repo("svc-new", false, "go")
	time.Sleep(4 * time.Second) // several passes of the reconciler
	if rec, err := reader.Get(ctx, "bump"); err != nil || rec.Generation != 1 || !slices.Equal(names(rec), []string{"svc-api", "svc-web"}) {
		t.Fatalf("after svc-new was created: generation %d, %v, %v", rec.Generation, names(rec), err)
	}
	// A plan of the same revision with the recorded state agrees.
	p = planJSON(t, "--repo", campaigns, "--state", "temporal", "--temporal-address", addr, "--state-dir", stateDir)
	if len(p.Campaigns) != 1 || p.Campaigns[0].Action != "unchanged" {
		t.Fatalf("plan of the running revision: %+v", p)
	}

	// A pull request's branch moves the repository: its plan shows the
	// update that adds svc-new.
	git.run("checkout", "-q", "-b", "touch")
	writeFile(t, git.dir, "README.md", "campaigns\n")
	git.run("add", ".")
	git.run("commit", "-q", "-m", "readme")
	git.run("push", "-q", campaigns, "touch")
	p = planJSON(t, "--repo", campaigns, "--ref", "touch", "--state", "temporal", "--temporal-address", addr, "--state-dir", stateDir)
	if len(p.Campaigns) != 1 || p.Campaigns[0].Action != "update" ||
		!slices.Equal(p.Campaigns[0].Repositories.Added, []string{"svc-new"}) || len(p.Campaigns[0].Repositories.Removed) != 0 {
		t.Fatalf("plan of the next revision: %+v", p)
	}
	// Merged, the reconciler hands it to the run as the next generation.
	git.run("push", "-q", campaigns, "touch:main")
	rec := waitFor("svc-new joins the next generation", func(c state.Campaign) bool {
		return c.Generation == 2 && slices.Contains(names(c), "svc-new") && len(c.PendingApprovals) == 3
	})
	if n := names(rec); !slices.Equal(n, []string{"svc-api", "svc-new", "svc-web"}) {
		t.Errorf("generation 2 has %v", n)
	}
	if strings.Contains(up.out.String(), "svc-old") || strings.Contains(up.out.String(), "svc-py") {
		t.Errorf("a repository the query does not select was worked on:\n%s", up.out.String())
	}
}

// TestQueriesWithoutAForge: the local forge lists no repositories, so a
// definition selecting them by query is refused by `run` before
// anything starts, and planned as an error of its file while the other
// definitions are planned.
func TestQueriesWithoutAForge(t *testing.T) {
	for _, v := range []string{"FLEETLIFT_FORGE_TYPE", "FLEETLIFT_FORGE_URL", "FLEETLIFT_FORGE"} {
		t.Setenv(v, "")
	}
	dir := t.TempDir()
	def := writeDef(t, dir, "bump.yaml", `version: 1
kind: Campaign
id: bump
title: Bump
template:
  execution:
    deterministic: {image: alpine, command: ["true"]}
repositories_from:
  - owner: platform
`)
	out, code := runCLI(t, "run", "--file", def, "--state-dir", filepath.Join(dir, "state"))
	want := filepath.Join(dir, "bump.yaml") + ":8:1: repositories_from: repository queries need a forge to list repositories"
	if code == 0 || !strings.Contains(out, want) {
		t.Errorf("run: exit %d, want an error with %q:\n%s", code, want, out)
	}

	repo := filepath.Join(dir, "campaigns")
	if err := os.MkdirAll(filepath.Join(repo, "campaigns"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, repo, "fleetlift.yaml", "version: 1\nkind: Config\nwatch: {branch: main, path: campaigns}\n")
	data, err := os.ReadFile(def)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, repo, "campaigns/bump.yaml", string(data))
	writeFile(t, repo, "campaigns/other.yaml", strings.NewReplacer("id: bump", "id: other", "repositories_from:\n  - owner: platform",
		"repositories: [{url: https://github.com/acme/a.git}]").Replace(string(data)))
	gitOut(t, repo, "init", "-q", "-b", "main")
	gitOut(t, repo, "add", ".")
	gitOut(t, repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "defs")
	p := planJSON(t, "--repo", repo, "--state", "none")
	if len(p.Campaigns) != 1 || p.Campaigns[0].ID != "other" || len(p.Errors) != 1 ||
		p.Errors[0].File != "campaigns/bump.yaml" || p.Errors[0].Line != 8 || p.Errors[0].Field != "repositories_from" {
		t.Errorf("plan: %+v", p)
	}
}

// campaignsClone is a clone of a campaigns repository on Gitea, pushing
// as its admin.
type campaignsClone struct {
	t   *testing.T
	g   *giteatest.Server
	dir string
}

func (c campaignsClone) run(args ...string) {
	c.t.Helper()
	c.g.Git(c.t, c.g.Admin(), c.dir, append([]string{"-c", "user.name=bot", "-c", "user.email=bot@example.com"}, args...)...)
}

// giteaCampaigns makes the admin's campaigns repository on g: a
// fleetlift.yaml selecting g as the forge, launching from main without
// a reviewed merge, with more config lines (extra), and files; it
// returns its clone URL and the clone that pushed it.
func giteaCampaigns(t *testing.T, g *giteatest.Server, extra string, files map[string]string) (string, campaignsClone) {
	t.Helper()
	url := g.CreateRepo(t, g.Admin().Name, "campaigns", false)
	c := campaignsClone{t: t, g: g, dir: t.TempDir()}
	c.run("init", "-q", "-b", "main")
	writeFile(t, c.dir, "fleetlift.yaml", fmt.Sprintf("version: 1\nkind: Config\nwatch: {branch: main, path: campaigns, require_reviewed_merge: false}\n%sforge: {type: gitea, url: %s}\n", extra, g.URL()))
	for name, body := range files {
		writeFile(t, c.dir, name, body)
	}
	c.run("add", ".")
	c.run("commit", "-q", "-m", "campaigns")
	c.run("push", "-q", url, "main")
	return url, c
}

// awaitNoProcessUnder waits until no process names dir (or a path under
// it) in its command line, or fails the test after limit.
func awaitNoProcessUnder(t *testing.T, dir string, limit time.Duration) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		left = nil
		cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range cmdlines {
			if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), dir) {
				left = append(left, strings.ReplaceAll(string(data), "\x00", " "))
			}
		}
		if len(left) == 0 {
			return
		}
	}
	t.Errorf("processes under %s still run %s after their worker stopped:\n%s", dir, limit, strings.Join(left, "\n"))
}
