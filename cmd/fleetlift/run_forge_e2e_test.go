package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

// TestRunOpensPullRequestsOnTheForge: `fleetlift run --file` against
// repositories on a real Gitea, with the forge allowed through the
// environment as an operator would, opens a pull request in each and
// reports their URLs; none is a pushed branch passed off as one.
func TestRunOpensPullRequestsOnTheForge(t *testing.T) {
	g := giteatest.Start(t)
	bot := g.Admin()
	var repos strings.Builder
	for i := range 3 {
		name := fmt.Sprintf("svc-%02d", i)
		url := g.CreateRepo(t, bot.Name, name, false)
		work := t.TempDir()
		g.Git(t, bot, work, "init", "-q", "-b", "main")
		if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte("module example.com/"+name+"\n\ngo 1.21\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g.Git(t, bot, work, "add", "go.mod")
		g.Git(t, bot, work, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-q", "-m", "init")
		g.Git(t, bot, work, "push", "-q", url, "main")
		fmt.Fprintf(&repos, "  - url: %s\n", url)
	}
	root := t.TempDir()
	def := writeDef(t, root, "bump.yaml", `version: 1
kind: Campaign
id: bump
title: Raise the go directive
template:
  execution:
    deterministic:
      image: golang
      command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]
  pull_request: {branch_prefix: auto/bump, title: Raise the go directive}
repositories:
`+repos.String())
	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", g.URL())
	t.Setenv("FLEETLIFT_FORGE_TOKEN", bot.Token)
	out, code := runCLI(t, "run", "--file", def, "--temporal-address", freeAddr(t), "--state-dir", filepath.Join(root, "state"))
	if code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, out)
	}
	for i := range 3 {
		name := fmt.Sprintf("svc-%02d", i)
		var prs []giteaPR
		g.Do(t, bot.Token, "GET", "repos/"+bot.Name+"/"+name+"/pulls?state=open", nil, &prs)
		if len(prs) != 1 || prs[0].Head.Ref != "auto/bump/bump" || prs[0].Title != "Raise the go directive" {
			t.Fatalf("%s: pull requests %+v; want the one run opened", name, prs)
		}
		want := fmt.Sprintf("%s%s/%s/pulls/%d", g.URL(), bot.Name, name, prs[0].Number)
		if !strings.Contains(out, want) {
			t.Errorf("run's output does not report %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, ".git#") {
		t.Errorf("run reports a pushed branch as a pull request:\n%s", out)
	}
}
