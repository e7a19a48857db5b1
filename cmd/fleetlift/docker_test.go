package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker/dockertest"
)

// Without --sandbox, a worker runs tasks in containers where an engine
// answers and has the images, else as local processes, and says why.
func TestChooseSandbox(t *testing.T) {
	cli := dockertest.Client(t)
	image, agent := dockertest.Images(t, cli)
	flags := func(image string) *workerFlags {
		return &workerFlags{isolation: "namespaces", docker: dockerFlags{image: image, agentImage: agent, network: "none", scope: "choose"}}
	}
	if kind, why := flags(image).chooseSandbox(t.Context()); kind != sandboxDocker {
		t.Errorf("with the engine and the images: %s (%s); want docker", kind, why)
	}
	if kind, why := flags("fleetlift-test/no-such-image:none").chooseSandbox(t.Context()); kind != sandboxLocal || !strings.Contains(why, "fleetlift-test/no-such-image:none") {
		t.Errorf("without the sandbox image: %s (%s); want local, naming the image", kind, why)
	}
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	if kind, why := flags(image).chooseSandbox(t.Context()); kind != sandboxLocal || !strings.Contains(why, "does not answer") {
		t.Errorf("without an engine: %s (%s); want local, saying no engine answers", kind, why)
	}
}

// Where tasks run does not change under a state directory with what is
// installed when the worker starts again: the first start's choice is
// recorded and kept, until --sandbox names another.
func TestChosenSandboxIsKept(t *testing.T) {
	cli := dockertest.Client(t)
	image, agent := dockertest.Images(t, cli)
	flags := func(image string) *workerFlags {
		return &workerFlags{isolation: "namespaces", docker: dockerFlags{image: image, agentImage: agent, network: "none", scope: "choose"}}
	}
	state := t.TempDir()
	// First start: the images are not there (as before make images ran).
	if kind, why := flags("fleetlift-test/no-such-image:none").recordedSandbox(t.Context(), state); kind != sandboxLocal {
		t.Fatalf("first start without the images: %s (%s); want local", kind, why)
	}
	// Started again once the images are there: still local.
	if kind, why := flags(image).recordedSandbox(t.Context(), state); kind != sandboxLocal || !strings.Contains(why, "first start") {
		t.Errorf("started again with the images: %s (%s); want local, kept from the first start", kind, why)
	}
	// A new state directory chooses afresh.
	if kind, why := flags(image).recordedSandbox(t.Context(), t.TempDir()); kind != sandboxDocker {
		t.Errorf("a new state directory with the images: %s (%s); want docker", kind, why)
	}
	// --sandbox docker is recorded: later starts without it keep docker.
	if err := recordSandbox(state, sandboxDocker); err != nil {
		t.Fatal(err)
	}
	if kind, why := flags("fleetlift-test/no-such-image:none").recordedSandbox(t.Context(), state); kind != sandboxDocker {
		t.Errorf("after --sandbox docker: %s (%s); want docker", kind, why)
	}
}

// `fleetlift run --sandbox docker` runs a deterministic task in the image
// its definition names, which has a tool this host lacks, across three
// local repositories mounted into the containers, and pushes three
// correct branches; no container or volume is left.
func TestRunInDockerContainers(t *testing.T) {
	cli := dockertest.Client(t)
	sandboxImage, agentImage := dockertest.Images(t, cli)
	if _, err := exec.LookPath("fleetlift-only-tool"); err == nil {
		t.Fatal("this host has fleetlift-only-tool; the test needs a tool only the image has")
	}
	toolImage := "fleetlift-test/only-tool:dev"
	tool := "#!/bin/sh\nset -e\nsed -i 's/^go 1.21$/go 1.26/' go.mod\necho \"changed in $(uname -n) by uid $(id -u)\" > CHANGED_BY\n"
	if err := dockertest.Build(t.Context(), cli, toolImage, "FROM "+sandboxImage+"\nCOPY fleetlift-only-tool /usr/local/bin/fleetlift-only-tool\n",
		map[string]dockertest.File{"fleetlift-only-tool": {Data: []byte(tool), Mode: 0o755}}); err != nil {
		t.Fatal(err)
	}

	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	// The agent runs as uid 1000 in the containers: the repositories must
	// be its to push to.
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", docker.UID, docker.GID), root).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v\n%s", err, out)
	}
	def := writeDef(t, t.TempDir(), "tool.yaml", fmt.Sprintf(`version: 1
kind: Campaign
id: only-tool
title: Bump go with a tool only the image has
template:
  execution:
    deterministic:
      image: %s
      command: [fleetlift-only-tool]
  pull_request: {branch_prefix: auto/tool, title: Bump go}
repositories:
  - url: %s
  - url: %s
  - url: %s
`, toolImage, urls[0], urls[1], urls[2]))
	scope := fmt.Sprintf("cmdtest%08x", rand.Uint32())
	addr, state := freeAddr(t), filepath.Join(t.TempDir(), "state")
	out, code := runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", state,
		"--sandbox", "docker", "--sandbox-image", sandboxImage, "--sandbox-agent-image", agentImage,
		"--sandbox-scope", scope, "--allow-file-root", root)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"sandboxes: docker containers of scope " + scope, "campaign/only-tool: completed", "3 repositories: 3 completed, 0 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		show := func(path string) string {
			got, _ := exec.Command("git", "-c", "safe.directory=*", "-C", bare, "show", "auto/tool/only-tool:"+path).Output()
			return string(got)
		}
		if got := show("go.mod"); !strings.Contains(got, "go 1.26") {
			t.Errorf("%s: go.mod on auto/tool/only-tool = %q; want go 1.26", bare, got)
		}
		if got := show("CHANGED_BY"); got != "changed in sandbox by uid 1000\n" {
			t.Errorf("%s: CHANGED_BY = %q; want the change made in a sandbox container by uid 1000", bare, got)
		}
	}
	left, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelScope+"="+scope)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d containers of the run are left", len(left.Items))
	}
	vols, err := cli.VolumeList(context.Background(), client.VolumeListOptions{Filters: client.Filters{}.Add("label", docker.LabelScope+"="+scope)})
	if err != nil {
		t.Fatal(err)
	}
	if len(vols.Items) != 0 {
		t.Errorf("%d volumes of the run are left", len(vols.Items))
	}
}

// A definition whose image the engine lacks fails each repository at
// once, saying so in the table, step named once; no container is left.
func TestRunInDockerRefusesAnImageTheEngineLacks(t *testing.T) {
	cli := dockertest.Client(t)
	sandboxImage, agentImage := dockertest.Images(t, cli)
	scope := fmt.Sprintf("cmdtest%08x", rand.Uint32())
	absent := "fleetlift-test/absent:" + scope
	root := t.TempDir()
	urls := demoRepos(t, root, 2)
	def := writeDef(t, t.TempDir(), "absent.yaml", fmt.Sprintf(`version: 1
kind: Campaign
id: absent-image
title: Bump go in an image nobody built
template:
  execution:
    deterministic:
      image: %s
      command: [sh, -c, "true"]
  pull_request: {branch_prefix: auto/absent, title: Bump go}
repositories:
  - url: %s
  - url: %s
`, absent, urls[0], urls[1]))
	addr, state := freeAddr(t), filepath.Join(t.TempDir(), "state")
	out, code := runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", state,
		"--sandbox", "docker", "--sandbox-image", sandboxImage, "--sandbox-agent-image", agentImage,
		"--sandbox-scope", scope, "--allow-file-root", root)
	if code != 1 {
		t.Errorf("exit %d; want 1 (the campaign failed)", code)
	}
	// Each repository's cell says it, and its error in full below the
	// table says what to do.
	cell := "provision sandbox: image " + absent + " is not on the engine"
	if n := strings.Count(out, cell); n != 4 {
		t.Errorf("output says %q %d times; want twice for each repository:\n%s", cell, n, out)
	}
	if n := strings.Count(out, cell+" (no image is pulled: build or load it there)\n"); n != 2 {
		t.Errorf("output says what to do %d times; want once for each repository:\n%s", n, out)
	}
	if n := strings.Count(out, "provision sandbox"); n != 4 {
		t.Errorf("output names the step %d times; want twice for each repository:\n%s", n, out)
	}
	if !strings.Contains(out, "2 repositories: 0 completed, 2 failed") {
		t.Errorf("output lacks the failures:\n%s", out)
	}
	left, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", docker.LabelScope+"="+scope)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d containers of the run are left", len(left.Items))
	}
}
