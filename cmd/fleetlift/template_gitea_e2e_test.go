package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

// TestTemplateGiteaWorkflowPlanStep runs the Gitea Actions variant of the
// template's workflow's plan step as Gitea's runner would, against a real
// Gitea: on a pull request of a campaigns repository whose config selects
// Gitea, it keeps one plan comment, brought up to date by the next push;
// from a fork it writes the plan to its log and talks to no forge.
func TestTemplateGiteaWorkflowPlanStep(t *testing.T) {
	userGitEnv(t)
	script, stepEnv := planStep(t, "../../campaigns-template/.gitea/workflows/fleetlift-plan.yml")
	g := giteatest.Start(t)
	bot := g.Admin()
	url := g.CreateRepo(t, bot.Name, "campaigns", false)

	seed := t.TempDir()
	if err := os.CopyFS(seed, os.DirFS("../../campaigns-template")); err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(filepath.Join(seed, "fleetlift.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(config), "\n  type: github\n") {
		t.Fatal("the template's fleetlift.yaml no longer selects the forge with type: github")
	}
	writeFile(t, seed, "fleetlift.yaml", strings.Replace(string(config), "\n  type: github\n", "\n  type: gitea\n", 1))
	commit := func(dir, msg string) {
		g.Git(t, bot, dir, "add", ".")
		g.Git(t, bot, dir, "-c", "user.name=bot", "-c", "user.email=bot@example.com", "commit", "-qm", msg)
	}
	g.Git(t, bot, seed, "init", "-q", "-b", "main")
	commit(seed, "campaigns")
	g.Git(t, bot, seed, "push", "-q", url, "main")

	work := t.TempDir()
	g.Git(t, bot, work, "clone", "-q", url, ".")
	g.Git(t, bot, work, "checkout", "-q", "-b", "go-bump")
	campaign := goBumpCampaign("https://gitea.example.com/acme/service-a.git")
	writeFile(t, work, "campaigns/go-bump.yaml", campaign)
	commit(work, "a campaign")
	g.Git(t, bot, work, "push", "-q", "origin", "go-bump")
	var pr struct {
		Number  int    `json:"number"`
		HTMLURL string `json:"html_url"`
	}
	g.Do(t, bot.Token, "POST", "repos/"+bot.Name+"/campaigns/pulls", map[string]string{"head": "go-bump", "base": "main", "title": "Bump go"}, &pr)

	pathDir := cliOnPath(t)
	run := func(t *testing.T, fork string) (string, error) {
		t.Helper()
		head := strings.TrimSpace(g.Git(t, bot, work, "rev-parse", "HEAD"))
		g.Git(t, bot, work, "checkout", "-q", "--detach", head)
		defer g.Git(t, bot, work, "checkout", "-q", "go-bump")
		gitea := map[string]string{
			"${{ github.event.pull_request.head.sha }}":                                 head,
			"${{ github.base_ref }}":                                                    "main",
			"${{ github.event.pull_request.html_url }}":                                 pr.HTMLURL,
			"${{ github.event.pull_request.head.repo.full_name != github.repository }}": fork,
			"${{ github.server_url }}":                                                  g.URL(),
			"${{ github.token }}":                                                       bot.Token,
		}
		return runPlanStep(t, work, script, stepEnv, gitea, "PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	comments := func(t *testing.T) []string {
		t.Helper()
		var cs []struct {
			Body string `json:"body"`
		}
		g.Do(t, bot.Token, "GET", fmt.Sprintf("repos/%s/campaigns/issues/%d/comments", bot.Name, pr.Number), nil, &cs)
		var bodies []string
		for _, c := range cs {
			bodies = append(bodies, c.Body)
		}
		return bodies
	}

	out, err := run(t, "false")
	if err != nil {
		t.Fatalf("the step failed: %v\n%s", err, out)
	}
	if bodies := comments(t); len(bodies) != 1 || !strings.HasPrefix(bodies[0], planMarker) || !strings.Contains(bodies[0], "Plan: 1 to create") || !strings.Contains(bodies[0], "go-bump") {
		t.Fatalf("comments: %q\n%s", bodies, out)
	}
	if !strings.Contains(out, "Plan: 1 to create") {
		t.Errorf("the step's log has no plan:\n%s", out)
	}

	// The next push: the same comment says what the pull request now does.
	writeFile(t, work, "campaigns/go-bump.yaml", strings.Replace(campaign, "id: go-bump", "id: Go-Bump", 1))
	commit(work, "an invalid id")
	g.Git(t, bot, work, "push", "-q", "origin", "go-bump")
	if out, err := run(t, "false"); err == nil {
		t.Fatalf("the check passed with an invalid definition:\n%s", out)
	}
	if bodies := comments(t); len(bodies) != 1 || !strings.Contains(bodies[0], "#### Errors") || !strings.Contains(bodies[0], "`campaigns/go-bump.yaml:3:5`") {
		t.Errorf("the plan comment is not the one brought up to date: %q", bodies)
	}

	// From a fork the token cannot comment: the plan is in the log.
	writeFile(t, work, "campaigns/go-bump.yaml", campaign)
	commit(work, "a valid id again")
	out, err = run(t, "true")
	if err != nil || !strings.Contains(out, "Plan: 1 to create") || !strings.Contains(out, "from a fork") {
		t.Errorf("from a fork: %v\n%s", err, out)
	}
	if bodies := comments(t); len(bodies) != 1 || !strings.Contains(bodies[0], "#### Errors") {
		t.Errorf("the fork's run changed the comments: %q", bodies)
	}
}
