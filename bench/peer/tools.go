package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
)

// The tools, by name.
const (
	mg8          = "mg8"
	mg1          = "mg1"
	fleetPerRepo = "fl"
	fleetGrouped = "flg"
)

// tool is one way of making the change.
type tool struct {
	name string
	// command is the process that makes the change in org's repositories
	// on branch.
	command func(f *fleet, org, branch string, repos []string) (*exec.Cmd, error)
	label   func(o options) string
}

func toolNames() []string { return []string{mg8, mg1, fleetPerRepo, fleetGrouped} }

func allTools() []tool {
	return []tool{
		{name: mg8, command: multiGitter(8), label: func(o options) string { return fmt.Sprintf("multi-gitter -C %d", o.parallel) }},
		{name: mg1, command: multiGitter(1), label: func(options) string { return "multi-gitter -C 1" }},
		{name: fleetPerRepo, command: fleetlift(false), label: func(options) string { return "fleetlift run, one task per repository" }},
		{name: fleetGrouped, command: fleetlift(true), label: func(o options) string { return fmt.Sprintf("fleetlift run, groups of %d", o.group) }},
	}
}

func selectTools(o options) ([]tool, error) {
	all := allTools()
	if o.only == "" {
		return all, nil
	}
	var out []tool
	for _, name := range strings.Split(o.only, ",") {
		found := false
		for _, t := range all {
			if t.name == strings.TrimSpace(name) {
				out, found = append(out, t), true
			}
		}
		if !found {
			return nil, fmt.Errorf("-tools: no tool %q (have %s)", name, strings.Join(toolNames(), ", "))
		}
	}
	return out, nil
}

// multiGitter runs multi-gitter v0.63.1 as its README shows, with -C
// concurrent (mg8 takes -parallel), its defaults otherwise (go-git,
// fetch depth 1).
func multiGitter(concurrent int) func(f *fleet, org, branch string, repos []string) (*exec.Cmd, error) {
	return func(f *fleet, org, branch string, repos []string) (*exec.Cmd, error) {
		if concurrent > 1 {
			concurrent = f.opts.parallel
		}
		cmd := exec.Command(filepath.Join(f.opts.bin, "multi-gitter"), "run", f.script(),
			"--platform", "gitea", "--base-url", f.g.URL(), "--org", org,
			"--branch", branch, "--commit-message", title, "--pr-title", title,
			"--concurrent", fmt.Sprint(concurrent), "--log-level", "error", "--plain-output")
		cmd.Env = append(os.Environ(), "GITEA_TOKEN="+f.g.AdminToken())
		cmd.Dir = f.root
		return cmd, nil
	}
}

// fleetlift runs `fleetlift run --file` on a campaign of org's
// repositories, one task per repository or in groups, with the forge
// allowed through the environment as an operator does and a state
// directory kept from run to run, as a user's is.
func fleetlift(grouped bool) func(f *fleet, org, branch string, repos []string) (*exec.Cmd, error) {
	return func(f *fleet, org, branch string, repos []string) (*exec.Cmd, error) {
		// Docker sandboxes run the change in the definition's image: the
		// sandbox image, which has sh, sed and git (no registry is
		// reached for another). The local sandbox ignores it.
		image := "golang"
		if f.opts.sandbox == "docker" {
			image = docker.DefaultImage
		}
		var def strings.Builder
		fmt.Fprintf(&def, `version: 1
kind: Campaign
id: %s
title: %s
template:
  execution:
    deterministic:
      image: %s
      command: [sh, -c, %q]
  pull_request: {branch_prefix: %s, title: %s}
max_parallel: %d
failure: {threshold_percent: 100}
`, org, title, image, change, strings.TrimSuffix(branch, "/"+org), title, f.opts.parallel)
		if f.opts.fields != "" {
			def.WriteString(strings.TrimSpace(f.opts.fields) + "\n")
		}
		url := func(name string) string { return f.g.CloneURL(org, name) }
		if grouped {
			def.WriteString("groups:\n")
			for i, name := range repos {
				if i%max(f.opts.group, 1) == 0 {
					fmt.Fprintf(&def, "  - name: g%02d\n    repositories:\n", i/max(f.opts.group, 1))
				}
				fmt.Fprintf(&def, "      - url: %s\n", url(name))
			}
		} else {
			def.WriteString("repositories:\n")
			for _, name := range repos {
				fmt.Fprintf(&def, "  - url: %s\n", url(name))
			}
		}
		file := filepath.Join(f.root, "defs", org+".yaml")
		if err := os.WriteFile(file, []byte(def.String()), 0o644); err != nil {
			return nil, err
		}
		addr, err := listen.FreeAddr("127.0.0.1")
		if err != nil {
			return nil, err
		}
		args := []string{"run", "--file", file, "--sandbox", f.opts.sandbox, "--temporal-address", addr, "--state-dir", filepath.Join(f.root, "state")}
		if f.opts.sandbox == "docker" {
			// Gitea listens on loopback: the containers share the host's
			// network to reach it.
			args = append(args, "--sandbox-network", "host")
		}
		cmd := exec.Command(filepath.Join(f.opts.bin, "fleetlift"), args...)
		cmd.Env = append(os.Environ(), "FLEETLIFT_FORGE_TYPE=gitea", "FLEETLIFT_FORGE_URL="+f.g.URL(),
			"FLEETLIFT_FORGE_TOKEN="+f.g.AdminToken())
		cmd.Dir = f.root
		return cmd, nil
	}
}
