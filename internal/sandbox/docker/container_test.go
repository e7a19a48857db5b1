package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker/dockertest"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

// opTimeout bounds each operation of these tests, so that a broken
// provider fails instead of stalling the test binary.
const opTimeout = 2 * time.Minute

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// provision provisions opts and cleans the sandbox up after the test.
func provision(t *testing.T, p *Provider, opts sandbox.ProvisionOptions) *sandbox.Sandbox {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := p.Cleanup(ctx, opts.ID); err != nil {
			t.Errorf("clean up sandbox %s: %v", opts.ID, err)
		}
	})
	sb, err := p.Provision(testCtx(t), opts)
	if err != nil {
		t.Fatalf("Provision(%s): %v", opts.ID, err)
	}
	return sb
}

func mustExec(t *testing.T, p *Provider, id string, script string) *sandbox.ExecResult {
	t.Helper()
	res, err := p.Exec(testCtx(t), id, sandbox.ExecCommand{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("Exec(%q): %v", script, err)
	}
	return res
}

func newID(name string) string {
	return fmt.Sprintf("%s-%s", name, newScope())
}

// transform is a deterministic transform of url whose change is proposed
// on the branch fleetlift/docker-test.
func transform(url, script string) protocol.Manifest {
	return protocol.Manifest{
		TaskID:         "docker-test",
		Mode:           protocol.ModeTransform,
		Title:          "docker test",
		Repositories:   []protocol.Repository{{Name: "svc", URL: url, Branch: "main"}},
		Execution:      protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", script}},
		TimeoutSeconds: 120,
		PullRequest:    &protocol.PullRequest{BranchPrefix: "fleetlift", Title: "docker test"},
		GitConfig:      protocol.GitConfig{UserName: "Fleetlift Bot", UserEmail: "bot@example.com"},
		Forge:          "local",
	}
}

const testBranch = "fleetlift/docker-test"

// runManifest hands m to the sandbox's agent, as the worker does, waits
// for a terminal phase and, at complete, proposes the change as the
// worker does.
func runManifest(t *testing.T, p *Provider, id string, m protocol.Manifest) protocol.Status {
	t.Helper()
	ctx := testCtx(t)
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CopyTo(ctx, id, strings.NewReader(string(data)), protocol.Dir+"/"+protocol.ManifestFile); err != nil {
		t.Fatalf("CopyTo(manifest): %v", err)
	}
	var st protocol.Status
	for {
		rc, err := p.CopyFrom(ctx, id, protocol.Dir+"/"+protocol.StatusFile)
		if err == nil {
			derr := json.NewDecoder(rc).Decode(&st)
			rc.Close()
			if derr == nil && st.Phase.Terminal() {
				if st.Phase == protocol.PhaseComplete {
					// The worker proposes the change the agent left.
					sandboxtest.Propose(t, p, id, m, reposRoot)
				}
				return st
			}
		} else if !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("CopyFrom(status): %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the agent did not finish; last status %+v", st)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Exec'd commands and the commands the agent runs are uid 1000 with no
// effective capability; the agent is the container's PID 1, and no
// command can read its environment, where its secrets are.
func TestIdentity(t *testing.T) {
	p := newProvider(t, newScope(), func(o *Options) { o.Binds = []string{reposRoot} })
	url, show := newRepository(t, map[string]string{"README.md": "# svc\n"})
	canary := "canary-" + newScope()
	opts := agentOptions(newID("identity"))
	opts.Secrets = map[string]string{"FLEETLIFT_FORGE_TOKEN": canary}
	provision(t, p, opts)

	res := mustExec(t, p, opts.ID, `id -u; grep CapEff /proc/self/status; tr '\0' ' ' < /proc/1/cmdline`)
	lines := strings.Split(res.Stdout, "\n")
	if len(lines) < 3 || lines[0] != "1000" || lines[1] != "CapEff:\t0000000000000000" {
		t.Errorf("an Exec'd command reports:\n%s\nwant uid 1000 and CapEff 0", res.Stdout)
	}
	if want := AgentPath + " serve --workspace " + Workspace; !strings.HasPrefix(lines[2], want) {
		t.Errorf("PID 1 is %q; want the agent, %q", lines[2], want)
	}
	res, err := p.Exec(testCtx(t), opts.ID, sandbox.ExecCommand{Command: []string{"cat", "/proc/1/environ"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(res.Stdout, canary) {
		t.Errorf("an Exec'd command reads the agent's environment: exit code %d, %q", res.ExitCode, res.Stdout)
	}

	st := runManifest(t, p, opts.ID, transform(url, `id -u > ID.txt; grep CapEff /proc/self/status > CAP.txt`))
	if st.Phase != protocol.PhaseComplete {
		t.Fatalf("the agent ended %s: %s", st.Phase, st.Message)
	}
	if got := show(testBranch, "ID.txt"); got != "1000\n" {
		t.Errorf("the agent's command ran as uid %q; want 1000", got)
	}
	if got := show(testBranch, "CAP.txt"); got != "CapEff:\t0000000000000000\n" {
		t.Errorf("the agent's command has %q; want no effective capability", got)
	}
}

// A fork bomb stops at the sandbox's process limit: the processes it
// starts (and keeps) fill the sandbox up to the limit and no further, the
// fork that would pass it fails, and the agent lives on.
func TestForkBombStopsAtPidsLimit(t *testing.T) {
	const limit = 64
	p := newProvider(t, newScope(), func(o *Options) { o.PidsLimit = limit })
	sb := provision(t, p, sandbox.ProvisionOptions{ID: newID("forkbomb"), Resources: sandbox.Resources{CPU: "0.5"}})

	res := mustExec(t, p, sb.ID, `i=0; while [ $i -lt 1000 ]; do sleep 600 & i=$((i+1)); done; echo started all 1000`)
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "started all") {
		t.Errorf("1000 processes started in a sandbox limited to %d: %+v", limit, res)
	}
	n := pids(t, p.cli, p.containerName(sb.ID))
	if n > limit || n < limit-8 {
		t.Errorf("%d processes in the sandbox after the fork bomb; want it filled up to its limit of %d", n, limit)
	}
	st, err := p.Status(testCtx(t), sb.ID)
	if err != nil || st.Phase != sandbox.PhaseRunning {
		t.Errorf("Status after the fork bomb = %+v, %v; want the agent still running", st, err)
	}
}

// pids is the number of processes the engine counts in a container.
func pids(t *testing.T, cli *client.Client, ref string) int64 {
	t.Helper()
	res, err := cli.ContainerStats(context.Background(), ref, client.ContainerStatsOptions{Stream: false, IncludePreviousSample: false})
	if err != nil {
		t.Fatalf("container stats: %v", err)
	}
	defer res.Body.Close()
	var stats container.StatsResponse
	if err := json.NewDecoder(res.Body).Decode(&stats); err != nil {
		t.Fatalf("container stats: %v", err)
	}
	return int64(stats.PidsStats.Current)
}

// A transform that eats memory past the sandbox's limit is stopped: by
// the kernel, and the sandbox is reported failed for running out of
// memory (seed 004's classification), not as an ordinary failure; or by
// the jail's guard just before, and the agent, which the kernel might
// otherwise have killed, ends its run failed. Either way the
// repository's error says so, naming the container's limit: the jail has
// no cgroup of its own in a container, and shares the container's.
func TestMemoryHogIsOutOfMemory(t *testing.T) {
	p := newProvider(t, newScope(), func(o *Options) { o.Binds = []string{reposRoot} })
	url, _ := newRepository(t, map[string]string{"README.md": "# svc\n"})
	opts := agentOptions(newID("oom"))
	opts.Resources = sandbox.Resources{Memory: "64Mi"}
	sb := provision(t, p, opts)

	st := runManifest(t, p, sb.ID, transform(url, `x=0123456789abcdef; while :; do x=$x$x; done`))
	if st.Phase != protocol.PhaseFailed {
		t.Fatalf("the agent ended %s (%s); want failed", st.Phase, st.Message)
	}
	ctx := testCtx(t)
	rc, err := p.CopyFrom(ctx, sb.ID, protocol.Dir+"/"+protocol.ResultFile)
	if err != nil {
		t.Fatalf("CopyFrom(result): %v", err)
	}
	var res protocol.Result
	derr := json.NewDecoder(rc).Decode(&res)
	rc.Close()
	if derr != nil || len(res.Repositories) != 1 {
		t.Fatalf("result.json: %v, %+v", derr, res)
	}
	if msg := res.Repositories[0].Error; !strings.Contains(msg, "ran out of memory") || !strings.Contains(msg, "limit of 64 MiB") {
		t.Errorf("the repository's error is %q; want it to name the out-of-memory and the limit of 64 MiB", msg)
	}
	var status *sandbox.Status
	for {
		var err error
		if status, err = p.Status(ctx, sb.ID); err != nil {
			t.Fatalf("Status: %v", err)
		}
		if status.Phase != sandbox.PhaseRunning {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the agent did not exit after its run failed: %+v", status)
		case <-time.After(50 * time.Millisecond):
		}
	}
	// The doubling string reaches the limit in a few milliseconds: the
	// kernel may kill in the container (which Docker then reports out of
	// memory), or the jail's guard may stop the command first, keeping
	// the agent's share, and the agent ends as it does after any failed
	// run; or both, the kernel killing a process of the command as the
	// guard stops it: the container was then out of memory, and says so.
	guarded := strings.Contains(res.Repositories[0].Error, "which the agent keeps for itself")
	outOfMemory := status.Phase == sandbox.PhaseFailed && strings.Contains(status.Message, "out of memory")
	switch {
	case guarded && status.Phase != sandbox.PhaseSucceeded && !outOfMemory:
		t.Errorf("Status = %+v; want the agent to end as after any failed run, the jail having stopped the command, or failed, out of memory", status)
	case !guarded && !outOfMemory:
		t.Errorf("Status = %+v; want failed, out of memory", status)
	}
}

// A restarted worker (a new provider of the same scope) finds its
// sandboxes again; a provider of another scope (another host) never sees
// them, and its sandbox of the same id is its own.
func TestScopesAndReattach(t *testing.T) {
	scope := newScope()
	first := newProvider(t, scope, nil)
	id := newID("reattach")
	provision(t, first, sandbox.ProvisionOptions{ID: id})
	if err := first.CopyTo(testCtx(t), id, strings.NewReader("kept"), "kept.txt"); err != nil {
		t.Fatal(err)
	}

	again := newProvider(t, scope, nil)
	sb, err := again.Provision(testCtx(t), sandbox.ProvisionOptions{ID: id})
	if err != nil || sb.Phase != sandbox.PhaseRunning {
		t.Fatalf("Provision by a restarted provider = %+v, %v; want the running sandbox", sb, err)
	}
	if res := mustExec(t, again, id, "cat kept.txt"); res.Stdout != "kept" {
		t.Errorf("the restarted provider sees %q in kept.txt; want the first provider's file", res.Stdout)
	}
	if n := countContainers(t, again.cli, scope, id); n != 1 {
		t.Errorf("%d containers for sandbox %s; want 1", n, id)
	}

	other := newProvider(t, newScope(), nil)
	if _, err := other.Status(testCtx(t), id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Status from another scope = %v; want ErrNotFound", err)
	}
	if _, err := other.CopyFrom(testCtx(t), id, "kept.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("CopyFrom from another scope = %v; want ErrNotFound", err)
	}
	provision(t, other, sandbox.ProvisionOptions{ID: id})
	if _, err := other.CopyFrom(testCtx(t), id, "kept.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another scope's sandbox of the same id holds the first one's file: %v", err)
	}
	if err := other.Cleanup(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	if st, err := again.Status(testCtx(t), id); err != nil || st.Phase != sandbox.PhaseRunning {
		t.Errorf("after another scope cleaned up its sandbox of the same id, ours is %+v, %v; want running", st, err)
	}
}

// With a read-only root file system, only the workspace, HOME and /tmp
// can be written, and the agent still serves.
func TestReadOnlyRoot(t *testing.T) {
	p := newProvider(t, newScope(), func(o *Options) { o.ReadOnlyRoot = true })
	sb := provision(t, p, sandbox.ProvisionOptions{ID: newID("readonly")})
	res := mustExec(t, p, sb.ID, `for d in /workspace /home/agent /tmp /etc /usr/local/bin /opt/fleetlift; do if touch $d/probe 2>/dev/null; then echo "$d writable"; else echo "$d read-only"; fi; done`)
	want := "/workspace writable\n/home/agent writable\n/tmp writable\n/etc read-only\n/usr/local/bin read-only\n/opt/fleetlift read-only\n"
	if res.Stdout != want {
		t.Errorf("with a read-only root:\n%s\nwant:\n%s", res.Stdout, want)
	}
	if err := p.CopyTo(testCtx(t), sb.ID, strings.NewReader("x"), "dir/file"); err != nil {
		t.Errorf("CopyTo with a read-only root: %v", err)
	}
}

// A reader polling a file while CopyTo replaces it again and again (the
// worker reading status.json while the agent rewrites it has the same
// shape) reads one whole version or the other, never part of one and
// never nothing.
func TestCopyToIsAtomicForReaders(t *testing.T) {
	for _, archive := range []bool{false, true} {
		t.Run(fmt.Sprintf("archive reads %v", archive), func(t *testing.T) { copyToIsAtomicForReaders(t, archive) })
	}
}

func copyToIsAtomicForReaders(t *testing.T, archive bool) {
	p := newProvider(t, newScope(), func(o *Options) { o.ArchiveReads = archive })
	sb := provision(t, p, sandbox.ProvisionOptions{ID: newID("readers")})
	versions := []string{strings.Repeat("a", 300_000), strings.Repeat("b", 200_000)}
	ctx := testCtx(t)
	if err := p.CopyTo(ctx, sb.ID, strings.NewReader(versions[0]), "f.json"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads int
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			rc, err := p.CopyFrom(ctx, sb.ID, "f.json")
			if err != nil {
				t.Errorf("CopyFrom while replaced: %v", err)
				return
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Errorf("read while replaced: %v", err)
				return
			}
			if string(data) != versions[0] && string(data) != versions[1] {
				t.Errorf("read %d bytes that are neither version", len(data))
				return
			}
			reads++
		}
	})
	for i := range 20 {
		if err := p.CopyTo(ctx, sb.ID, strings.NewReader(versions[i%2]), "f.json"); err != nil {
			t.Errorf("CopyTo: %v", err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if reads == 0 {
		t.Error("no read happened while CopyTo replaced the file")
	}
}

// Any image with git and sh can run the work: its entrypoint, user and
// working directory do not get in the agent's way.
func TestAnyImageWithGitAndSh(t *testing.T) {
	p := newProvider(t, newScope(), nil)
	image := "fleetlift-test/odd-tool:dev"
	if err := dockertest.Build(t.Context(), p.cli, image, "FROM "+dockertest.SandboxImage+"\nUSER 4242:4242\nWORKDIR /srv\nENTRYPOINT [\"/bin/false\"]\nCMD [\"--help\"]\n", nil); err != nil {
		t.Fatal(err)
	}
	sb := provision(t, p, sandbox.ProvisionOptions{ID: newID("odd"), Image: image})
	res := mustExec(t, p, sb.ID, `id -u; pwd; tr '\0' ' ' < /proc/1/cmdline`)
	if want := "1000\n/workspace\n" + AgentPath + " serve"; !strings.HasPrefix(res.Stdout, want) {
		t.Errorf("in an image with its own user, directory and entrypoint:\n%s\nwant uid 1000 in /workspace with the agent as PID 1", res.Stdout)
	}
}

// A sandbox past its Timeout is stopped and reported failed for timing
// out; a provider that starts afterwards says the same.
func TestTimeoutStopsTheSandbox(t *testing.T) {
	scope := newScope()
	p := newProvider(t, scope, nil)
	sb := provision(t, p, sandbox.ProvisionOptions{ID: newID("timeout"), Timeout: 2 * time.Second})
	ctx := testCtx(t)
	var st *sandbox.Status
	for {
		var err error
		if st, err = p.Status(ctx, sb.ID); err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.Phase != sandbox.PhaseRunning {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the sandbox still runs past its timeout: %+v", st)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if st.Phase != sandbox.PhaseFailed || !strings.Contains(st.Message, "timed out after 2s") {
		t.Errorf("Status past the timeout = %+v; want failed, timed out after 2s", st)
	}
	if st, err := newProvider(t, scope, nil).Status(ctx, sb.ID); err != nil || !strings.Contains(st.Message, "timed out") {
		t.Errorf("Status from a restarted provider = %+v, %v; want timed out", st, err)
	}
}
