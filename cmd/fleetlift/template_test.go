package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/fleetlift/fleetlift/schemas"
)

// TestTemplateRunsOneRelease: the campaigns template names one fleetlift
// release: its CI installs it (the setup action's tag, the one pin), and
// the yaml-language-server line of each of its YAML files points the
// editor at that release's JSON Schema for the file's kind, as the README
// installs it locally.
func TestTemplateRunsOneRelease(t *testing.T) {
	const tmpl = "../../campaigns-template"
	wf, err := os.ReadFile(filepath.Join(tmpl, ".github/workflows/fleetlift-plan.yml"))
	if err != nil {
		t.Fatal(err)
	}
	pins := regexp.MustCompile(`uses: fleetlift/fleetlift/\.github/actions/setup-fleetlift@(\S+)`).FindAllSubmatch(wf, -1)
	if len(pins) != 1 || !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`).Match(pins[0][1]) {
		t.Fatalf("the workflow must install fleetlift with the setup action at one release tag: %q", pins)
	}
	release := string(pins[0][1])
	// The Gitea Actions variant installs the same release.
	gwf, err := os.ReadFile(filepath.Join(tmpl, ".gitea/workflows/fleetlift-plan.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if gp := regexp.MustCompile(`uses: fleetlift/fleetlift/\.github/actions/setup-fleetlift@(\S+)`).FindAllSubmatch(gwf, -1); len(gp) != 1 || string(gp[0][1]) != release {
		t.Errorf("the Gitea workflow installs %q, the GitHub one %s", gp, release)
	}
	for _, w := range [][]byte{wf, gwf} {
		for _, bad := range []string{"@latest", "go install", "go-version", "--state none"} {
			if bytes.Contains(w, []byte(bad)) {
				t.Errorf("a workflow still has %q", bad)
			}
		}
		if !bytes.Contains(w, []byte(`--comment-on "$PR_URL"`)) {
			t.Errorf("a workflow does not keep its plan comment with --comment-on")
		}
	}
	files, _ := filepath.Glob(filepath.Join(tmpl, "campaigns", "*.y*ml"))
	files = append(files, filepath.Join(tmpl, "fleetlift.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := "config.schema.json"
		if filepath.Base(f) != "fleetlift.yaml" {
			name = "task.schema.json"
			if regexp.MustCompile(`(?m)^kind: Campaign$`).Match(b) {
				name = "campaign.schema.json"
			}
		}
		want := "# yaml-language-server: $schema=" + schemas.URL(release, name) + "\n"
		if !bytes.HasPrefix(b, []byte(want)) {
			first, _, _ := bytes.Cut(b, []byte("\n"))
			t.Errorf("%s starts with %q, want %q", f, first, want)
		}
	}
	readme, err := os.ReadFile(filepath.Join(tmpl, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`v[0-9]+\.[0-9]+\.[0-9]+`).FindAll(readme, -1) {
		if string(m) != release {
			t.Errorf("the template's README names release %s, its workflow %s", m, release)
		}
	}
}

// asCLIEnv makes the test binary run as the fleetlift command. It is
// outside fleetlift's FLEETLIFT_ names, which the command warns about
// when it reads none of them.
const asCLIEnv = "GO_TEST_AS_FLEETLIFT_CLI"

// cliOnPath returns a directory holding a `fleetlift` that is this test
// binary, for scripts that run fleetlift.
func cliOnPath(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := "#!/bin/sh\n" + asCLIEnv + "=1 exec " + exe + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "fleetlift"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// planStep is the script and environment of the Plan step of the
// workflow at path.
func planStep(t *testing.T, path string) (string, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Name string
				Env  map[string]string
				Run  string
			}
		}
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatal(err)
	}
	for _, s := range wf.Jobs["plan"].Steps {
		if s.Name == "Plan" {
			return s.Run, s.Env
		}
	}
	t.Fatalf("%s has no Plan step", path)
	return "", nil
}

// runPlanStep runs a Plan step's script in dir as the runner would, its
// environment's expressions replaced by the values the runner gives them
// (each must be there), with env added.
func runPlanStep(t *testing.T, dir, script string, stepEnv, values map[string]string, env ...string) (string, error) {
	t.Helper()
	env = append(append(os.Environ(), env...), "FLEETLIFT_TEMPORAL_ADDRESS="+freeAddr(t), "HOME="+t.TempDir())
	for k, v := range stepEnv {
		if w, ok := values[v]; ok {
			v = w
		} else if strings.Contains(v, "${{") {
			t.Fatalf("the Plan step's %s is %s, which this test does not provide", k, v)
		}
		env = append(env, k+"="+v)
	}
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// goBumpCampaign is the campaign the template workflows' tests add in a
// pull request: one repository, at url.
func goBumpCampaign(url string) string {
	return `version: 1
kind: Campaign
id: go-bump
title: Bump go
template:
  execution:
    deterministic: {image: golang, command: [go, mod, edit, -go=1.26]}
  pull_request: {branch_prefix: auto/go-bump, title: Bump go}
repositories:
  - url: ` + url + "\n"
}

// TestTemplateWorkflowPlanStep runs the template workflow's plan step as
// GitHub Actions would, in a checkout of a pull request's head with its
// base at origin/main: it keeps one comment on the pull request (the
// plan; with an invalid definition, the plan with its errors and a failed
// check), writes the plan to the run's summary, and for a pull request
// from a fork, whose token cannot comment, writes the summary alone.
func TestTemplateWorkflowPlanStep(t *testing.T) {
	userGitEnv(t)
	script, stepEnv := planStep(t, "../../campaigns-template/.github/workflows/fleetlift-plan.yml")

	// origin: the campaigns repository on GitHub; the pull request adds
	// a campaign.
	origin := filepath.Join(t.TempDir(), "campaigns.git")
	seed := t.TempDir()
	if err := os.CopyFS(seed, os.DirFS("../../campaigns-template")); err != nil {
		t.Fatal(err)
	}
	git(t, seed, "init", "-q", "-b", "main")
	git(t, seed, "add", ".")
	git(t, seed, "commit", "-qm", "campaigns")
	git(t, seed, "clone", "-q", "--bare", seed, origin)
	checkout := func(t *testing.T, files map[string]string) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "work")
		git(t, filepath.Dir(dir), "clone", "-q", origin, dir)
		git(t, dir, "checkout", "-q", "-b", "pr")
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git(t, dir, "add", ".")
		git(t, dir, "commit", "-qm", "the pull request")
		sha := gitIn(t, dir, "rev-parse", "HEAD")
		git(t, dir, "checkout", "-q", "--detach", sha)
		return dir
	}

	comments := &prComments{nextID: 1}
	api := startForgeRecorder(t, comments.handler)
	pathDir := cliOnPath(t)
	run := func(t *testing.T, dir, fork string) (string, string, error) {
		t.Helper()
		summary := filepath.Join(t.TempDir(), "summary.md")
		github := map[string]string{
			"${{ github.event.pull_request.head.sha }}":                                 gitIn(t, dir, "rev-parse", "HEAD"),
			"${{ github.base_ref }}":                                                    "main",
			"${{ github.event.pull_request.html_url }}":                                 api.URL + "/acme/campaigns/pull/7",
			"${{ github.event.pull_request.head.repo.full_name != github.repository }}": fork,
			"${{ github.api_url }}":                                                     api.URL + "/api/v3",
			"${{ github.token }}":                                                       "run-token",
		}
		out, err := runPlanStep(t, dir, script, stepEnv, github, "PATH="+pathDir+string(os.PathListSeparator)+os.Getenv("PATH"), "GITHUB_STEP_SUMMARY="+summary)
		s, _ := os.ReadFile(summary)
		return out, string(s), err
	}
	campaign := goBumpCampaign("https://github.com/acme/service-a.git")

	t.Run("a valid pull request", func(t *testing.T) {
		out, summary, err := run(t, checkout(t, map[string]string{"campaigns/go-bump.yaml": campaign}), "false")
		if err != nil {
			t.Fatalf("the step failed: %v\n%s", err, out)
		}
		bodies := comments.bodies()
		if len(bodies) != 1 || !strings.HasPrefix(bodies[0], planMarker) || !strings.Contains(bodies[0], "Plan: 1 to create") || !strings.Contains(bodies[0], "go-bump") {
			t.Fatalf("comments: %q\n%s", bodies, out)
		}
		if !strings.Contains(summary, "Plan: 1 to create") || !strings.Contains(summary, "Assumed: no recorded state") {
			t.Errorf("the run's summary:\n%s", summary)
		}
	})
	t.Run("an invalid definition", func(t *testing.T) {
		out, summary, err := run(t, checkout(t, map[string]string{"campaigns/go-bump.yaml": strings.Replace(campaign, "id: go-bump", "id: Go-Bump", 1)}), "false")
		if err == nil {
			t.Fatalf("the check passed with an invalid definition:\n%s", out)
		}
		bodies := comments.bodies()
		if len(bodies) != 1 || !strings.Contains(bodies[0], "#### Errors") || !strings.Contains(bodies[0], "`campaigns/go-bump.yaml:3:5`") {
			t.Errorf("the plan comment does not show the error: %q", bodies)
		}
		if !strings.Contains(summary, "campaigns/go-bump.yaml:3:5") {
			t.Errorf("the run's summary:\n%s", summary)
		}
	})
	t.Run("a pull request from a fork", func(t *testing.T) {
		before := len(api.requests())
		out, summary, err := run(t, checkout(t, map[string]string{"campaigns/go-bump.yaml": campaign}), "true")
		if err != nil {
			t.Fatalf("the step failed: %v\n%s", err, out)
		}
		if n := len(api.requests()); n != before {
			t.Errorf("the fork's run talked to the forge: %v", api.requests()[before:])
		}
		if !strings.Contains(summary, "Plan: 1 to create") || !strings.Contains(out, "from a fork") {
			t.Errorf("the run's summary:\n%s\noutput:\n%s", summary, out)
		}
	})
	for _, r := range api.requests() {
		if r.authorization != "Bearer run-token" {
			t.Errorf("%s %s carried %q, want the run's token", r.method, r.path, r.authorization)
		}
	}
}
