package imagetest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The images under test, as make images tags them.
const (
	sandboxImage   = "fleetlift/sandbox:dev"
	agentImage     = "fleetlift/agent:dev"
	fleetliftImage = "fleetlift/fleetlift:dev"
	// toolImage stands for a tool image that knows nothing of fleetlift:
	// no agent user, no fleetlift-agent, no /workspace.
	toolImage = "debian:bookworm-slim"
)

// label marks what the tests create, so a failed run's leftovers can be
// found: docker ps -a --filter label=io.fleetlift.test=imagetest.
const label = "io.fleetlift.test=imagetest"

// providerFlags start a container as the Docker provider starts a
// sandbox.
var providerFlags = []string{
	"--network", "none",
	"--cap-drop", "ALL",
	"--cap-add", "CHOWN", "--cap-add", "SETUID", "--cap-add", "SETGID",
	"--cap-add", "FOWNER", "--cap-add", "DAC_OVERRIDE",
	"--security-opt", "no-new-privileges",
	"--label", label,
}

// entrypointCaps are those five capabilities as a mask: chown (0),
// dac_override (1), fowner (3), setgid (6), setuid (7).
const entrypointCaps = 1<<0 | 1<<1 | 1<<3 | 1<<6 | 1<<7

// control-plane variables the sandbox is started with; none may reach the
// agent.
var stripped = map[string]string{
	"FLEETLIFT_TEMPORAL_ADDRESS": "temporal.example.com:7233",
	"FLEETLIFT_TEMPORAL_API_KEY": "tk-0123456789abcdef",
	"TEMPORAL_ADDRESS":           "temporal.example.com:7233",
	"FLEETLIFT_STATE_DIR":        "/var/lib/fleetlift",
	"FLEETLIFT_WEBHOOK_SECRET":   "wh-0123456789abcdef",
	"FLEETLIFT_NAMESPACE":        "fleetlift-system",
	"DOCKER_HOST":                "unix:///var/run/docker.sock",
	"KUBECONFIG":                 "/root/.kube/config",
	"KUBERNETES_SERVICE_HOST":    "10.96.0.1",
	"SESSION_TOKEN":              "st-0123456789abcdef",
	"CONTROL_PLANE_URL":          "https://control-plane.example.com",
	"SESSION_ID":                 "session-42",
	"AGENT_WORKDIR":              "/workspace",
	// The forge's token and URL are the worker's: it pushes.
	"FLEETLIFT_FORGE_TOKEN": "ft-0123456789abcdef",
	"FLEETLIFT_FORGE_URL":   "https://git.example.com",
}

// kept are the agent's own settings and its clone token, which it needs.
var kept = map[string]string{
	"FLEETLIFT_GIT_TOKEN":         "gt-0123456789abcdef",
	"FLEETLIFT_GIT_TOKEN_ORIGINS": "https://git.example.com",
	"FLEETLIFT_ALLOW_FILE_ROOTS":  "/srv/git",
	"FLEETLIFT_AGENT_CLI":         `["claude","-p"]`,
	"FLEETLIFT_AGENT_CLI_ENV":     "ANTHROPIC_API_KEY",
	"ANTHROPIC_API_KEY":           "ak-0123456789abcdef",
}

// dockerCLI is the docker command: $DOCKER, else docker.
func dockerCLI() string {
	if d := os.Getenv("DOCKER"); d != "" {
		return d
	}
	return "docker"
}

// docker runs the docker command and returns its standard output.
func docker(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(dockerCLI(), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

var (
	engineOnce sync.Once
	engineErr  error
)

// requireImages fails the test unless an engine answers and has images.
func requireImages(t *testing.T, images ...string) {
	t.Helper()
	engineOnce.Do(func() {
		if _, err := exec.LookPath(dockerCLI()); err != nil {
			engineErr = fmt.Errorf("no docker command: apt-get install -y docker.io (or run .ci/run, which installs and starts Docker)")
			return
		}
		if _, err := docker("info"); err != nil {
			engineErr = fmt.Errorf("no Docker engine answers (%v): start one as root with 'dockerd >/var/log/dockerd.log 2>&1 &', or run .ci/run, which installs and starts it", err)
		}
	})
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	for _, img := range images {
		if _, err := docker("image", "inspect", img); err != nil {
			t.Fatalf("image %s is missing: run make images (%v)", img, err)
		}
	}
}

// start runs a detached container and removes it, with its anonymous
// volumes, when the test ends.
func start(t *testing.T, args ...string) string {
	t.Helper()
	out, err := docker(append([]string{"run", "--detach"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("container logs:\n%s", containerLogs(id))
		}
		_, _ = docker("rm", "--force", "--volumes", id)
	})
	return id
}

// containerLogs is what the container wrote to its standard output and
// error.
func containerLogs(id string) string {
	out, err := exec.Command(dockerCLI(), "logs", id).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("docker logs %s: %v: %s", id, err, out)
	}
	return string(out)
}

// envFlags are -e flags for vars.
func envFlags(vars ...map[string]string) []string {
	var out []string
	for _, m := range vars {
		for k, v := range m {
			out = append(out, "--env", k+"="+v)
		}
	}
	return out
}

// execAs runs argv in the container as uid:gid and returns its output.
func execAs(t *testing.T, id, user string, argv ...string) string {
	t.Helper()
	out, err := docker(append([]string{"exec", "--user", user, id}, argv...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitForAgent waits until PID 1 is the agent, executed by the
// entrypoint: its command line starts with want. It fails when the
// container stops first.
func waitForAgent(t *testing.T, id string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if out, err := docker("exec", "--user", "65534:65534", id, "cat", "/proc/1/cmdline"); err == nil {
			last = out
			if strings.HasPrefix(out, strings.Join(want, "\x00")+"\x00") {
				return
			}
		} else if running, _ := docker("inspect", "--format", "{{.State.Running}}", id); strings.TrimSpace(running) != "true" {
			t.Fatalf("the container stopped before the agent ran: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("PID 1 is still %q, want %q", strings.ReplaceAll(last, "\x00", " "), want)
}

// process is what /proc/1 tells about the container's PID 1.
type process struct {
	status map[string]string
	env    map[string]string
	exe    string
	cwd    string
}

// pid1 reads /proc/1 as the agent's own user (who alone, with no
// capability, may read its environment).
func pid1(t *testing.T, id string) process {
	t.Helper()
	out := execAs(t, id, "1000:1000", "sh", "-c",
		`cat /proc/1/status; echo ---; tr '\0' '\n' </proc/1/environ; echo ---; readlink /proc/1/exe; readlink /proc/1/cwd`)
	parts := strings.Split(out, "---\n")
	if len(parts) != 3 {
		t.Fatalf("unexpected /proc/1 output:\n%s", out)
	}
	p := process{status: map[string]string{}, env: map[string]string{}}
	for _, line := range strings.Split(parts[0], "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			p.status[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(parts[1]), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			p.env[k] = v
		}
	}
	links := strings.Split(strings.TrimSpace(parts[2]), "\n")
	if len(links) != 2 {
		t.Fatalf("unexpected /proc/1 links:\n%s", parts[2])
	}
	p.exe, p.cwd = links[0], links[1]
	return p
}

// capMask parses a Cap* line of /proc/PID/status.
func (p process) capMask(t *testing.T, name string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(p.status[name], 16, 64)
	if err != nil {
		t.Fatalf("%s: %q: %v", name, p.status[name], err)
	}
	return v
}

// checkUnprivileged checks that PID 1 runs as uid and gid 1000 with no
// capability in any set but the bounding one, which holds at most
// bounding, and with no_new_privs.
func (p process) checkUnprivileged(t *testing.T, bounding uint64) {
	t.Helper()
	if p.status["Uid"] != "1000 1000 1000 1000" || p.status["Gid"] != "1000 1000 1000 1000" {
		t.Errorf("PID 1 runs as uids %q, gids %q; want 1000 throughout", p.status["Uid"], p.status["Gid"])
	}
	for _, set := range []string{"CapEff", "CapPrm", "CapInh", "CapAmb"} {
		if m := p.capMask(t, set); m != 0 {
			t.Errorf("PID 1 has %s %#x, want none", set, m)
		}
	}
	if m := p.capMask(t, "CapBnd"); m&^bounding != 0 {
		t.Errorf("PID 1's bounding set is %#x, want at most %#x", m, bounding)
	}
	if p.status["NoNewPrivs"] != "1" {
		t.Errorf("PID 1 has NoNewPrivs %q, want 1", p.status["NoNewPrivs"])
	}
}

// checkEnv checks that no control-plane variable reached PID 1 and the
// agent's own ones did.
func (p process) checkEnv(t *testing.T) {
	t.Helper()
	for k := range stripped {
		if v, ok := p.env[k]; ok {
			t.Errorf("the agent sees %s=%s", k, v)
		}
	}
	for k, want := range kept {
		if got := p.env[k]; got != want {
			t.Errorf("the agent sees %s=%q, want %q", k, got, want)
		}
	}
}
