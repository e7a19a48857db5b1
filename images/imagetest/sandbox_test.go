package imagetest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The sandbox image started as the provider starts it: the entrypoint
// readies the root-owned workspace and home mounted over the image's,
// strips the control plane's variables and executes the agent, which is
// PID 1 as uid 1000 with no capability left.
func TestSandboxAgentIsPID1WithoutPrivileges(t *testing.T) {
	requireImages(t, sandboxImage)
	args := append([]string{}, providerFlags...)
	args = append(args, envFlags(stripped, kept, map[string]string{"AGENT_USER": "agent"})...)
	// Empty file systems owned by root, as a fresh volume is.
	args = append(args, "--mount", "type=tmpfs,destination=/workspace", "--mount", "type=tmpfs,destination=/home/agent")
	id := start(t, append(args, sandboxImage)...)
	waitForAgent(t, id, "fleetlift-agent", "serve", "--workspace", "/workspace")

	p := pid1(t, id)
	p.checkUnprivileged(t, entrypointCaps)
	p.checkEnv(t)
	if v, ok := p.env["AGENT_USER"]; ok {
		t.Errorf("the agent sees the entrypoint's AGENT_USER=%s", v)
	}
	if p.exe != "/usr/local/bin/fleetlift-agent" || p.cwd != "/workspace" {
		t.Errorf("PID 1 is %s in %s, want /usr/local/bin/fleetlift-agent in /workspace", p.exe, p.cwd)
	}
	if p.env["HOME"] != "/home/agent" || p.env["USER"] != "agent" {
		t.Errorf("PID 1 has HOME=%q USER=%q, want /home/agent and agent", p.env["HOME"], p.env["USER"])
	}
	if got := execAs(t, id, "1000:1000", "stat", "-c", "%u:%g %n", "/workspace", "/home/agent"); got != "1000:1000 /workspace\n1000:1000 /home/agent\n" {
		t.Errorf("owners:\n%s; want 1000:1000 for /workspace and /home/agent", got)
	}
	// The agent is at work, waiting for its manifest: it can write its
	// workspace.
	execAs(t, id, "1000:1000", "touch", "/workspace/written-by-agent")
}

// With a read-only root file system and a volume for the workspace, the
// sandbox image needs nothing else writable: the agent's home is in the
// image, already its own.
func TestSandboxReadOnlyRoot(t *testing.T) {
	requireImages(t, sandboxImage)
	args := append([]string{}, providerFlags...)
	args = append(args, "--read-only", "--mount", "type=volume,destination=/workspace", sandboxImage)
	id := start(t, args...)
	waitForAgent(t, id, "fleetlift-agent", "serve", "--workspace", "/workspace")
	p := pid1(t, id)
	p.checkUnprivileged(t, entrypointCaps)
	execAs(t, id, "1000:1000", "touch", "/workspace/written-by-agent")
}

// With CAP_SETPCAP as well, the entrypoint empties the bounding set too.
func TestSandboxWithSetpcapClearsTheBoundingSet(t *testing.T) {
	requireImages(t, sandboxImage)
	args := append([]string{}, providerFlags...)
	args = append(args, "--cap-add", "SETPCAP", sandboxImage)
	id := start(t, args...)
	waitForAgent(t, id, "fleetlift-agent", "serve")
	p := pid1(t, id)
	p.checkUnprivileged(t, 0)
}

// A tool image that knows nothing of fleetlift (no agent user, no
// /workspace), with fleetlift-agent injected from the agent image through
// a volume: the agent runs as uid and gid 1000 anyway, in a /workspace
// the entrypoint made for it.
func TestToolImageWithInjectedAgent(t *testing.T) {
	requireImages(t, agentImage, toolImage)
	vol := "fleetlift-imagetest-agent-" + strings.ReplaceAll(time.Now().Format("150405.000000000"), ".", "")
	if _, err := docker("volume", "create", "--label", label, vol); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = docker("volume", "rm", "--force", vol) })
	// A container of the agent image fills the empty volume with its
	// /usr/local/bin on first mount.
	if out, err := docker("run", "--rm", "--network", "none", "--label", label, "--volume", vol+":/usr/local/bin", agentImage, "--help"); err != nil || !strings.Contains(out, "serve") {
		t.Fatalf("fill the volume from %s: %v\n%s", agentImage, err, out)
	}

	args := append([]string{}, providerFlags...)
	args = append(args, envFlags(stripped, kept)...)
	args = append(args, "--volume", vol+":/opt/fleetlift:ro", "--entrypoint", "/opt/fleetlift/fleetlift-agent",
		toolImage, "entrypoint", "--", "serve", "--workspace", "/workspace")
	id := start(t, args...)
	waitForAgent(t, id, "/opt/fleetlift/fleetlift-agent", "serve", "--workspace", "/workspace")

	p := pid1(t, id)
	p.checkUnprivileged(t, entrypointCaps)
	p.checkEnv(t)
	if p.exe != "/opt/fleetlift/fleetlift-agent" || p.cwd != "/workspace" {
		t.Errorf("PID 1 is %s in %s, want /opt/fleetlift/fleetlift-agent in /workspace", p.exe, p.cwd)
	}
	if _, ok := p.env["USER"]; ok || p.env["HOME"] != "/home/agent" {
		t.Errorf("PID 1 has HOME=%q USER=%q; want /home/agent and no USER (the image has no such user)", p.env["HOME"], p.env["USER"])
	}
	if got := execAs(t, id, "1000:1000", "stat", "-c", "%u:%g %n", "/workspace", "/home/agent"); got != "1000:1000 /workspace\n1000:1000 /home/agent\n" {
		t.Errorf("owners:\n%s; want 1000:1000 for /workspace and /home/agent", got)
	}
}

// Started as the agent user already (a pod with runAsUser), the
// entrypoint cannot switch and need not: the agent runs as that user.
func TestSandboxStartedAsTheAgentUser(t *testing.T) {
	requireImages(t, sandboxImage)
	args := append([]string{}, providerFlags...)
	args = append(args, envFlags(stripped, kept)...)
	args = append(args, "--user", "1000:1000", sandboxImage)
	id := start(t, args...)
	waitForAgent(t, id, "fleetlift-agent", "serve")
	p := pid1(t, id)
	p.checkUnprivileged(t, entrypointCaps)
	p.checkEnv(t)
}

// Without the capabilities to switch users, the entrypoint stops the
// container and says what it needs, instead of running the agent as root.
func TestSandboxWithoutCapabilitiesFails(t *testing.T) {
	requireImages(t, sandboxImage)
	args := []string{"--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--label", label, sandboxImage}
	id := start(t, args...)
	code, err := docker("wait", id)
	if err != nil {
		t.Fatal(err)
	}
	logs := containerLogs(id)
	if got := strings.TrimSpace(code); got != "1" {
		t.Fatalf("exit code %s, want 1; logs:\n%s", got, logs)
	}
	if !strings.Contains(logs, "the container needs CAP_SETGID") {
		t.Fatalf("logs do not say what the entrypoint needs:\n%s", logs)
	}
}

// The fleetlift binary mounts the entrypoint under its hidden agent
// command: "fleetlift agent entrypoint -- serve" executes "fleetlift agent
// serve". Started as root in the fleetlift image, which has no agent user,
// it runs the agent as uid 1000.
func TestFleetliftImageAgentEntrypoint(t *testing.T) {
	requireImages(t, fleetliftImage)
	args := append([]string{}, providerFlags...)
	args = append(args, envFlags(stripped, kept)...)
	args = append(args, "--user", "0:0", "--entrypoint", "fleetlift",
		fleetliftImage, "agent", "entrypoint", "--", "serve", "--workspace", "/workspace")
	id := start(t, args...)
	waitForAgent(t, id, "fleetlift", "agent", "serve", "--workspace", "/workspace")
	p := pid1(t, id)
	p.checkUnprivileged(t, entrypointCaps)
	p.checkEnv(t)
	if p.exe != "/usr/local/bin/fleetlift" || p.cwd != "/workspace" {
		t.Errorf("PID 1 is %s in %s, want /usr/local/bin/fleetlift in /workspace", p.exe, p.cwd)
	}
}

// TestImagesSayTheirVersion: each image's binaries print, with --version,
// the release the image is labelled with (make images passes git
// describe to the builds), and fleetlift the commit too.
func TestImagesSayTheirVersion(t *testing.T) {
	requireImages(t, fleetliftImage, agentImage, sandboxImage)
	for _, c := range []struct {
		image string
		run   []string
		want  string
	}{
		{fleetliftImage, nil, "fleetlift %s (commit %s, built "},
		{fleetliftImage, []string{"--entrypoint", "fleetlift-agent"}, "fleetlift-agent %s\n"},
		{fleetliftImage, []string{"--entrypoint", "fleetlift-controller"}, "fleetlift-controller %s\n"},
		{agentImage, nil, "fleetlift-agent %s\n"},
		{sandboxImage, []string{"--entrypoint", "fleetlift-agent"}, "fleetlift-agent %s\n"},
	} {
		tag, err := docker("image", "inspect", "-f", `{{index .Config.Labels "org.opencontainers.image.version"}}`, c.image)
		if err != nil {
			t.Fatal(err)
		}
		version := strings.TrimSpace(tag)
		if version == "" || version == "dev" {
			t.Fatalf("%s has no release label (%q): build it with make images", c.image, version)
		}
		rev, err := docker("image", "inspect", "-f", `{{index .Config.Labels "org.opencontainers.image.revision"}}`, c.image)
		if err != nil {
			t.Fatal(err)
		}
		args := append([]string{"run", "--rm", "--network", "none", "--label", label}, c.run...)
		out, err := docker(append(append(args, c.image), "--version")...)
		if err != nil {
			t.Errorf("%s %v --version: %v", c.image, c.run, err)
			continue
		}
		want := fmt.Sprintf(c.want, version)
		if strings.Count(c.want, "%s") == 2 {
			want = fmt.Sprintf(c.want, version, strings.TrimSpace(rev))
		}
		if !strings.HasPrefix(out, want) {
			t.Errorf("%s %v --version = %q, want it to start with %q", c.image, c.run, out, want)
		}
	}
}
