package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

// TestRunOpensPullRequestsOnTheForge: `fleetlift run --file` against
// repositories on a real Gitea, with the forge allowed through the
// environment as an operator would, opens a pull request in each and
// reports their URLs; none is a pushed branch passed off as one. The
// definition names no branch: each pull request goes to its repository's
// default branch, main for two of them and trunk for the third.
func TestRunOpensPullRequestsOnTheForge(t *testing.T) {
	g := giteatest.Start(t)
	bot := g.Admin()
	var repos strings.Builder
	base := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("svc-%02d", i)
		base[name] = "main"
		if i == 2 {
			base[name] = "trunk"
		}
		url := giteaGoModule(t, g, bot, name, base[name])
		if base[name] != "main" {
			g.Do(t, bot.Token, "PATCH", "repos/"+bot.Name+"/"+name, map[string]string{"default_branch": base[name]}, nil)
		}
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
		if prs[0].Base.Ref != base[name] {
			t.Errorf("%s: pull request to %q; want its default branch %q", name, prs[0].Base.Ref, base[name])
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
