// Package dockertest is what tests that run sandboxes on a real Docker
// engine share: the engine, the images they run (named here, in one
// place) and a way to build small images of their own.
//
// A test that needs the engine or an image fails, saying which command
// provides it; it never skips.
//
// dockertest imports the Docker client, testing and the standard library;
// never a sandbox provider.
package dockertest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
)

// The images the Docker tests run.
const (
	// SandboxImage runs the work: it must be on the engine already, with
	// git and sh; `make images` builds it.
	SandboxImage = "fleetlift/sandbox:dev"
	// AgentImage is the agent image the tests inject the agent from. With
	// BuildAgent the tests build it themselves from this checkout's
	// cmd/fleetlift-agent (FROM scratch, only /fleetlift-agent, as
	// `make images` builds fleetlift/agent:dev), so they test the agent
	// they are built with; without, it must be on the engine.
	AgentImage = "fleetlift-test/agent:dev"
	BuildAgent = true
)

// StartEngine and BuildImages are the commands that provide what these
// tests need.
const (
	StartEngine = "start the engine as root: `dockerd >/tmp/dockerd.log 2>&1 &` (Debian: `apt-get install docker.io`)"
	BuildImages = "`make images`"
)

// Client returns a client of the engine the environment names (DOCKER_HOST,
// else the local socket), failing the test when no engine answers.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("no Docker engine answers at %s (%v): %s", cli.DaemonHost(), err, StartEngine)
	}
	return cli
}

// RequireImage fails the test unless the engine has image.
func RequireImage(t testing.TB, cli *client.Client, image string) {
	t.Helper()
	if _, err := cli.ImageInspect(context.Background(), image); err != nil {
		t.Fatalf("image %s is not on the engine (%v): build it with %s", image, err, BuildImages)
	}
}

// Images returns the sandbox and agent images, building the agent image
// first when BuildAgent is set (once per test binary).
func Images(t testing.TB, cli *client.Client) (sandboxImage, agentImage string) {
	t.Helper()
	RequireImage(t, cli, SandboxImage)
	if !BuildAgent {
		RequireImage(t, cli, AgentImage)
		return SandboxImage, AgentImage
	}
	agentOnce.Do(func() { agentErr = buildAgent(cli) })
	if agentErr != nil {
		t.Fatalf("build the agent image %s: %v", AgentImage, agentErr)
	}
	return SandboxImage, AgentImage
}

var (
	agentOnce sync.Once
	agentErr  error
)

// buildAgent builds a static fleetlift-agent from this module and the
// agent image around it.
func buildAgent(cli *client.Client) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fleetlift-agent-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "fleetlift-agent")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/fleetlift-agent")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/fleetlift-agent: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	return Build(context.Background(), cli, AgentImage, "FROM scratch\nCOPY fleetlift-agent /fleetlift-agent\n",
		map[string]File{"fleetlift-agent": {Data: data, Mode: 0o755}})
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the fleetlift module")
	}
	return filepath.Dir(mod), nil
}

// File is a file of a build context.
type File struct {
	Data []byte
	Mode int64
}

// Build builds dockerfile with files as its context and tags it tag,
// offline: its FROM must name an image the engine has.
func Build(ctx context.Context, cli *client.Client, tag, dockerfile string, files map[string]File) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	all := map[string]File{"Dockerfile": {Data: []byte(dockerfile), Mode: 0o644}}
	for name, f := range files {
		all[name] = f
	}
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f := all[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{Tags: []string{tag}, Remove: true, ForceRemove: true})
	if err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	defer res.Body.Close()
	var log strings.Builder
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var msg struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil {
			continue
		}
		log.WriteString(msg.Stream)
		if msg.Error != "" {
			return fmt.Errorf("build %s: %s\n%s", tag, msg.Error, log.String())
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("build %s: %w", tag, err)
	}
	return nil
}
