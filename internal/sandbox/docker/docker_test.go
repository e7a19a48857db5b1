package docker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker/dockertest"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// stopGrace keeps tests quick; the agent stops on SIGTERM at once.
const stopGrace = 2 * time.Second

// testServeArgs make the agent answer quickly.
var testServeArgs = []string{"--manifest-poll", "20ms", "--steering-poll", "50ms"}

// newScope is a scope of its own for one test's providers, so that tests
// (and other users of the engine) never see each other's sandboxes.
func newScope() string {
	return fmt.Sprintf("test%08x", rand.Uint32())
}

// newProvider makes a provider on the test engine with the test images;
// change adjusts its options.
func newProvider(t *testing.T, scope string, change func(*Options)) *Provider {
	t.Helper()
	cli := dockertest.Client(t)
	image, agent := dockertest.Images(t, cli)
	opts := Options{Client: cli, Image: image, AgentImage: agent, Scope: scope, StopGrace: stopGrace, ServeArgs: testServeArgs}
	if change != nil {
		change(&opts)
	}
	p, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// countContainers counts the containers, running or not, of sandbox id in
// scope.
func countContainers(t *testing.T, cli *client.Client, scope, id string) int {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: client.Filters{}.Add("label", LabelSandbox+"="+id, LabelScope+"="+scope)})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return len(res.Items)
}

func TestConformance(t *testing.T) {
	scope := newScope()
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider { return newProvider(t, scope, nil) },
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions {
			return sandbox.ProvisionOptions{ID: id, Env: map[string]string{"LANG": "C.UTF-8"}}
		},
		// One container is one agent: it is the container's PID 1.
		Agents: func(t *testing.T, sb *sandbox.Sandbox) int {
			return countContainers(t, dockertest.Client(t), scope, sb.ID)
		},
	})
}

// The same through the engine's archive endpoint alone, as a worker on
// another host than its engine reads files.
func TestConformanceArchiveReads(t *testing.T) {
	scope := newScope()
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			return newProvider(t, scope, func(o *Options) { o.ArchiveReads = true })
		},
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions {
			return sandbox.ProvisionOptions{ID: id, Env: map[string]string{"LANG": "C.UTF-8"}}
		},
		Agents: func(t *testing.T, sb *sandbox.Sandbox) int {
			return countContainers(t, dockertest.Client(t), scope, sb.ID)
		},
	})
}

// reposRoot holds the test repositories; every test sandbox has it
// bind-mounted at the same path.
var reposRoot string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleetlift-docker-repos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The agent runs as uid 1000: it must reach the repositories.
	if err := os.Chmod(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reposRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newRepository makes a bare repository under reposRoot that uid 1000
// can push to.
func newRepository(t *testing.T, files map[string]string) (url string, show func(branch, path string) string) {
	t.Helper()
	parent, err := os.MkdirTemp(reposRoot, "repo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	bare := gittest.NewRemote(t, parent, "svc", files)
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", UID, GID), parent).CombinedOutput(); err != nil {
		t.Fatalf("chown %s: %v\n%s", parent, err, out)
	}
	return "file://" + bare, gittest.Show(bare)
}

func agentOptions(id string) sandbox.ProvisionOptions {
	return sandbox.ProvisionOptions{ID: id, Env: map[string]string{
		"FLEETLIFT_ALLOW_FILE_ROOTS": reposRoot,
		"GIT_CONFIG_GLOBAL":          "/dev/null",
	}}
}

// The real agent in containers, jailing the work it runs, cannot act
// against the control plane.
func TestUntrustedWork(t *testing.T) {
	scope := newScope()
	sandboxtest.RunUntrusted(t, sandboxtest.UntrustedHarness{
		// The containers see none of the host's files but the repositories.
		Hidden: t.TempDir(),
		New: func(t *testing.T) sandbox.Provider {
			return newProvider(t, scope, func(o *Options) { o.Binds = []string{reposRoot} })
		},
		NewWithGateway: func(t *testing.T, gw *gateway.Gateway) sandbox.Provider {
			return newProvider(t, scope, func(o *Options) {
				o.Binds, o.Gateway, o.SocketDir = []string{reposRoot}, gw, t.TempDir()
			})
		},
		// The sandbox image's curl, as an agent CLI.
		ModelCLI: sandboxtest.CurlModelCLI,
		NewWithEgress: func(t *testing.T, h http.Handler) sandbox.Provider {
			return newProvider(t, scope, func(o *Options) {
				o.Binds, o.Egress, o.SocketDir = []string{reposRoot}, h, t.TempDir()
			})
		},
		Options: func(t *testing.T, id string) sandbox.ProvisionOptions { return agentOptions(id) },
		Repository: func(t *testing.T) (string, func(branch, path string) string) {
			return newRepository(t, map[string]string{"README.md": "# svc\n"})
		},
	})
}

// A task's image that the engine lacks is refused at once: no provider
// pulls, so another attempt would fail the same way. The error names the
// image and says what to do, and nothing is left behind.
func TestProvisionRefusesAnImageTheEngineLacks(t *testing.T) {
	ctx := t.Context()
	scope := newScope()
	p := newProvider(t, scope, nil)
	id := "absent-image"
	_, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: id, Image: "fleetlift-test/absent:" + scope})
	if err == nil {
		p.Cleanup(ctx, id)
		t.Fatal("Provision with an image the engine lacks succeeded")
	}
	if !errors.Is(err, sandbox.ErrRefused) {
		t.Errorf("Provision: %v; want an error that wraps sandbox.ErrRefused", err)
	}
	for _, want := range []string{"image fleetlift-test/absent:" + scope + " is not on the engine", "no image is pulled"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Provision: %v; want it to say %q", err, want)
		}
	}
	if n := countContainers(t, dockertest.Client(t), scope, id); n != 0 {
		t.Errorf("a refused Provision left %d containers", n)
	}
	// The engine's refusal to answer is not a refusal of the request.
	down := newProvider(t, scope, func(o *Options) {
		cli, err := client.New(client.WithHost("unix://" + filepath.Join(t.TempDir(), "no-engine.sock")))
		if err != nil {
			t.Fatal(err)
		}
		o.Client = cli
	})
	if _, err := down.Provision(ctx, sandbox.ProvisionOptions{ID: id}); err == nil || errors.Is(err, sandbox.ErrRefused) {
		t.Errorf("Provision with no engine to answer: %v; want an error another attempt may mend (not sandbox.ErrRefused)", err)
	}
}
