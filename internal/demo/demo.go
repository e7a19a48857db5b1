package demo

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The demo's people: who writes the campaign and who approves it (the
// author of a change cannot approve it alone).
const (
	Author   = "casey"
	Approver = "robin"
)

// Targets makes the demo's three target repositories under dir (bare,
// in targets/, each cloned from a work tree in src/ whose go.mod says
// go 1.21) and returns their paths.
func Targets(ctx context.Context, dir string) ([]string, error) {
	var out []string
	for _, name := range []string{"payments", "ledger", "search"} {
		src := filepath.Join(dir, "src", name)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module example.com/acme/"+name+"\n\ngo 1.21\n"), 0o644); err != nil {
			return nil, err
		}
		bare := filepath.Join(dir, "targets", name+".git")
		for _, args := range [][]string{
			{"init", "-q", "-b", "main", src},
			{"-C", src, "add", "go.mod"},
			{"-C", src, "commit", "-q", "-m", "Initial commit"},
			{"clone", "-q", "--bare", src, bare},
		} {
			if err := Git(ctx, "", Author, args...); err != nil {
				return nil, err
			}
		}
		out = append(out, bare)
	}
	return out, nil
}

// CampaignsRepo makes the campaigns repository at dir: its config
// (Approver approves campaigns/**, the local forge, pruning, the status
// branch fleetlift/status) and empty campaigns/ and approvals/, committed
// to main by Author.
func CampaignsRepo(ctx context.Context, dir string) error {
	for _, d := range []string{"campaigns", "approvals"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, d, ".gitkeep"), nil, 0o644); err != nil {
			return err
		}
	}
	cfg := `version: 1
kind: Config
watch:
  branch: main
  path: campaigns
approvers:
  - path: "campaigns/**"
    users: [` + Approver + `]
forge:
  type: local
prune: true
status:
  branch: fleetlift/status
`
	if err := os.WriteFile(filepath.Join(dir, "fleetlift.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	if err := Git(ctx, "", Author, "init", "-q", "-b", "main", dir); err != nil {
		return err
	}
	if err := Git(ctx, dir, Author, "add", "."); err != nil {
		return err
	}
	return Git(ctx, dir, Author, "commit", "-q", "-m", "Start the campaigns repository")
}

// Campaign is the demo's campaign: raise the go directive of targets to
// 1.26, each change awaiting approval.
func Campaign(targets []string) string {
	var repos strings.Builder
	for _, t := range targets {
		fmt.Fprintf(&repos, "  - url: file://%s\n", t)
	}
	return `version: 1
kind: Campaign
id: demo-go-version
title: Raise the go directive to 1.26
template:
  execution:
    deterministic:
      image: alpine
      command: [sed, -i, "s/^go 1\\.21$/go 1.26/", go.mod]
      verifiers:
        - name: go-directive
          command: [grep, -q, "^go 1.26$", go.mod]
  require_approval: true
  pull_request:
    branch_prefix: fleetlift/go-version
    title: Raise the go directive to 1.26
repositories:
` + repos.String() + `max_parallel: 3
`
}

// Git runs git as who, with no system or global config.
func Git(ctx context.Context, dir, who string, args ...string) error {
	_, err := Output(ctx, dir, who, args...)
	return err
}

// Output is Git with its standard output.
func Output(ctx context.Context, dir, who string, args ...string) (string, error) {
	c := exec.CommandContext(ctx, "git", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME="+who, "GIT_AUTHOR_EMAIL="+who+"@example.com",
		"GIT_COMMITTER_NAME="+who, "GIT_COMMITTER_EMAIL="+who+"@example.com")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	b, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(b), nil
}
