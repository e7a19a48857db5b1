package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The people of the campaigns repository: who commits the campaign, and
// who approves its results (the author of a change cannot approve it).
const (
	author   = "casey"
	approver = "robin"
)

// The campaign every round runs.
const (
	campaignID   = "chaos"
	branchPrefix = "fleetlift/go-directive"
	baseBranch   = "main"
	// campaignFile is the definition's path in the campaigns repository.
	campaignFile = "campaigns/chaos.yaml"
)

// expectedBranch is the branch the campaign pushes in every repository.
const expectedBranch = branchPrefix + "/" + campaignID

// fixture is one round's repositories: targets, the campaigns repository
// `up` watches, and the state directory it keeps.
type fixture struct {
	dir       string
	targets   string // holds <name>.git, the bare target repositories
	campaigns string // the campaigns repository's work tree
	state     string // up's --state-dir
	names     []string
}

// repoName is the name of the i-th target repository.
func repoName(i int) string { return fmt.Sprintf("svc-%02d", i) }

// goMod is a target's go.mod before (version "1.21") and after the
// change ("1.26").
func goMod(name, version string) string {
	return fmt.Sprintf("module example.com/%s\n\ngo %s\n", name, version)
}

const mainGo = "package main\n\nfunc main() {}\n"

// makeFixture creates the round's repositories under dir: n bare target
// repositories, each a tiny Go module on main, and a campaigns repository
// whose main branch holds the config and the campaign.
func makeFixture(ctx context.Context, dir string, n int, c campaignOptions) (*fixture, error) {
	fx := &fixture{
		dir:       dir,
		targets:   filepath.Join(dir, "targets"),
		campaigns: filepath.Join(dir, "campaigns"),
		state:     filepath.Join(dir, "state"),
	}
	src := filepath.Join(dir, "src")
	for i := range n {
		name := repoName(i)
		fx.names = append(fx.names, name)
		work := filepath.Join(src, name)
		if err := os.MkdirAll(work, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(work, "go.mod"), []byte(goMod(name, "1.21")), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(work, "main.go"), []byte(mainGo), 0o644); err != nil {
			return nil, err
		}
		for _, args := range [][]string{
			{"init", "-q", "-b", baseBranch, work},
			{"-C", work, "add", "."},
			{"-C", work, "commit", "-q", "-m", "Initial commit"},
			{"clone", "-q", "--bare", work, filepath.Join(fx.targets, name+".git")},
		} {
			if _, err := gitAs(ctx, "", author, args...); err != nil {
				return nil, err
			}
		}
	}
	if err := os.RemoveAll(src); err != nil {
		return nil, err
	}

	if err := fx.campaignsRepo(ctx, c); err != nil {
		return nil, err
	}
	return fx, nil
}

// makeProbe makes the k-th probe install of fx: a state directory of its
// own and a campaigns repository whose campaign, over fx's targets, is
// suspended, so that up starts it and no task runs.
func makeProbe(ctx context.Context, fx *fixture, k int) (*fixture, error) {
	dir := filepath.Join(fx.dir, fmt.Sprintf("probe-%d", k))
	p := &fixture{
		dir:       dir,
		targets:   fx.targets,
		campaigns: filepath.Join(dir, "campaigns"),
		state:     filepath.Join(dir, "state"),
		names:     fx.names,
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := p.campaignsRepo(ctx, campaignOptions{maxParallel: 1, suspend: true}); err != nil {
		return nil, err
	}
	return p, nil
}

// campaignsRepo creates the campaigns repository: its main branch holds
// the config and the campaign.
func (fx *fixture) campaignsRepo(ctx context.Context, c campaignOptions) error {
	files := map[string]string{
		"fleetlift.yaml":     repoConfig,
		"approvals/.gitkeep": "",
		campaignFile:         c.yaml(fx),
	}
	for name, body := range files {
		p := filepath.Join(fx.campaigns, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", baseBranch, fx.campaigns},
		{"-C", fx.campaigns, "add", "."},
		{"-C", fx.campaigns, "commit", "-q", "-m", "Raise the go directive everywhere"},
	} {
		if _, err := gitAs(ctx, "", author, args...); err != nil {
			return err
		}
	}
	return nil
}

// repoConfig is the campaigns repository's fleetlift.yaml: the local
// forge, robin approves, the status mirror on its own branch.
const repoConfig = `version: 1
kind: Config
watch:
  branch: ` + baseBranch + `
  path: campaigns
approvers:
  - path: "campaigns/**"
    users: [` + approver + `]
forge:
  type: local
status:
  branch: fleetlift/status
`

// campaignOptions shape the campaign.
type campaignOptions struct {
	maxParallel     int
	requireApproval bool
	// work is how long the transform takes (a sleep before the sed), so
	// that kills find agents at work; zero is the sed alone.
	work time.Duration
	// suspend starts the campaign suspended: no task starts.
	suspend bool
}

// transform is the deterministic change: the go directive 1.21 -> 1.26.
const transform = `sed -i 's/^go 1\.21$/go 1.26/' go.mod`

// yaml renders the campaign: one deterministic task per repository with a
// verifier, batches of 10 (the default), the default failure threshold,
// and a pull-request budget that never delays a start.
func (c campaignOptions) yaml(fx *fixture) string {
	script := transform
	if c.work > 0 {
		script = fmt.Sprintf("sleep %s && %s", seconds(c.work), transform)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `version: 1
kind: Campaign
id: %s
title: Raise the go directive to 1.26
template:
  execution:
    deterministic:
      image: debian:bookworm-slim
      command: [sh, -c, %s]
      verifiers:
        - name: go-directive
          command: [grep, -qx, "go 1.26", go.mod]
  require_approval: %t
  pull_request:
    branch_prefix: %s
    title: Raise the go directive to 1.26
batch_size: 10
max_parallel: %d
failure:
  threshold_percent: 20
  action: pause
rate_limit:
  pull_requests_per_hour: 10000
  burst: %d
suspend: %t
repositories:
`, campaignID, yamlString(script), c.requireApproval, branchPrefix, c.maxParallel, max(len(fx.names), 1), c.suspend)
	for _, name := range fx.names {
		fmt.Fprintf(&b, "  - url: file://%s\n    name: %s\n    branch: %s\n", filepath.Join(fx.targets, name+".git"), name, baseBranch)
	}
	return b.String()
}

// yamlString quotes s as a YAML double-quoted scalar (JSON's string
// syntax, which YAML reads).
func yamlString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	// Encoding a string cannot fail.
	_ = enc.Encode(s)
	return strings.TrimSpace(b.String())
}

// seconds renders d for sleep(1): "2", "0.5".
func seconds(d time.Duration) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", d.Seconds()), "0"), ".")
}

// gitEnv is the environment every git and fleetlift process of the
// harness gets: this machine's and this user's git configuration left out.
func gitEnv(env []string) []string {
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0")
}

// identity is the environment that makes who the author and committer
// of what git commits.
func identity(who string) []string {
	return []string{
		"GIT_AUTHOR_NAME=" + who, "GIT_AUTHOR_EMAIL=" + who + "@example.com",
		"GIT_COMMITTER_NAME=" + who, "GIT_COMMITTER_EMAIL=" + who + "@example.com",
	}
}

// gitAs runs git as who in dir ("" for the current directory) and returns
// its output.
func gitAs(ctx context.Context, dir, who string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(os.Environ()), identity(who)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
