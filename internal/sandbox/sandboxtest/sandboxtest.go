package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Harness tells the suite how to make and observe one provider's
// sandboxes.
type Harness struct {
	// New returns a fresh provider for one case. Required.
	New func(t *testing.T) sandbox.Provider
	// Options returns the options that provision sandbox id with an agent
	// that stays alive until Cleanup. The suite sets ID and adds its own
	// variables to Env. Required.
	Options func(t *testing.T, id string) sandbox.ProvisionOptions
	// Agents counts the agent processes running for sb; the suite expects
	// one however often sb was provisioned. Required.
	Agents func(t *testing.T, sb *sandbox.Sandbox) int
	// Processes describes the running processes, wherever the provider
	// runs them, whose command line contains marker. Nil means this host's
	// /proc, which shows the processes of the local provider and of
	// containers on a local engine.
	Processes func(t *testing.T, marker string) []string
}

// Run runs the conformance suite against the provider h makes, one subtest
// per behaviour. Run the tests with -race: one case drives a provider from
// many goroutines. The test calling Run must not be parallel: one case sets
// a variable in the test process's environment (t.Setenv) to show that it
// does not reach the sandbox.
func Run(t *testing.T, h Harness) {
	if h.New == nil || h.Options == nil || h.Agents == nil {
		t.Fatal("sandboxtest: Harness needs New, Options and Agents")
	}
	if h.Processes == nil {
		h.Processes = func(t *testing.T, marker string) []string { return hostProcesses(t, marker) }
	}
	s := &suite{h: h}
	for _, c := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ProvisionStartsRunning", s.provisionStartsRunning},
		{"ProvisionTwiceReturnsSameSandbox", s.provisionTwice},
		{"ExecReportsExitCodeAndOutput", s.execResult},
		{"ExecHonoursWorkingDir", s.execWorkingDir},
		{"ExecTimeoutKills", s.execTimeout},
		{"ExecPassesStdin", s.execStdin},
		{"EnvironmentIsOnlyWhatIsDeclared", s.environment},
		{"SecretsStayWithTheAgent", s.secrets},
		{"CopyRoundTrip", s.copyRoundTrip},
		{"CopyToIsAtomic", s.copyAtomic},
		{"CopyFromMissingIsNotFound", s.copyFromMissing},
		{"PathsCannotEscapeWorkspace", s.pathEscapes},
		{"UnknownSandboxIsNotFound", s.unknownSandbox},
		{"CleanupStopsEverything", s.cleanup},
		{"ConcurrentUse", s.concurrent},
	} {
		t.Run(c.name, c.run)
	}
}

type suite struct {
	h Harness
}

// opTimeout bounds every case: a provider that hangs fails instead of
// stalling the test binary.
const opTimeout = 60 * time.Second

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// provision provisions sandbox id with the harness's options plus env and
// cleans it up when the test ends.
func (s *suite) provision(t *testing.T, p sandbox.Provider, id string, env map[string]string) (*sandbox.Sandbox, sandbox.ProvisionOptions) {
	t.Helper()
	opts := s.options(t, id, env)
	t.Cleanup(func() {
		// t.Context is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := p.Cleanup(ctx, id); err != nil {
			t.Errorf("clean up sandbox %s after the test: %v", id, err)
		}
	})
	sb, err := p.Provision(s.ctx(t), opts)
	if err != nil {
		t.Fatalf("Provision(%s): %v", id, err)
	}
	return sb, opts
}

func (s *suite) options(t *testing.T, id string, env map[string]string) sandbox.ProvisionOptions {
	opts := s.h.Options(t, id)
	opts.ID = id
	merged := map[string]string{}
	for k, v := range opts.Env {
		merged[k] = v
	}
	for k, v := range env {
		merged[k] = v
	}
	opts.Env = merged
	return opts
}

// exec runs a command that must not fail to run.
func mustExec(t *testing.T, ctx context.Context, p sandbox.Provider, id string, cmd sandbox.ExecCommand) *sandbox.ExecResult {
	t.Helper()
	res, err := p.Exec(ctx, id, cmd)
	if err != nil {
		t.Fatalf("Exec(%q): %v", cmd.Command, err)
	}
	return res
}

func sh(script string) sandbox.ExecCommand {
	return sandbox.ExecCommand{Command: []string{"sh", "-c", script}}
}

func copyTo(t *testing.T, ctx context.Context, p sandbox.Provider, id, dest, content string) {
	t.Helper()
	if err := p.CopyTo(ctx, id, strings.NewReader(content), dest); err != nil {
		t.Fatalf("CopyTo(%s): %v", dest, err)
	}
}

func copyFrom(t *testing.T, ctx context.Context, p sandbox.Provider, id, src string) string {
	t.Helper()
	rc, err := p.CopyFrom(ctx, id, src)
	if err != nil {
		t.Fatalf("CopyFrom(%s): %v", src, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("CopyFrom(%s): read: %v", src, err)
	}
	return string(data)
}

func (s *suite) provisionStartsRunning(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("run")
	sb, _ := s.provision(t, p, id, nil)
	if sb.ID != id || sb.Provider != p.Name() || sb.WorkingDir == "" || sb.Phase != sandbox.PhaseRunning {
		t.Errorf("Provision = %+v; want ID %s, Provider %s, a WorkingDir, phase running", sb, id, p.Name())
	}
	st, err := p.Status(ctx, id)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if st.Phase != sandbox.PhaseRunning {
		t.Errorf("Status = %+v; want running", st)
	}
}

func (s *suite) provisionTwice(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("twice")
	first, opts := s.provision(t, p, id, nil)
	copyTo(t, ctx, p, id, "before.txt", "made before the second Provision")

	second, err := p.Provision(ctx, opts)
	if err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	if second.ID != first.ID || second.WorkingDir != first.WorkingDir || second.Phase != sandbox.PhaseRunning {
		t.Errorf("second Provision = %+v; want the first sandbox %+v, running", second, first)
	}
	if got := copyFrom(t, ctx, p, id, "before.txt"); got != "made before the second Provision" {
		t.Errorf("file written before the second Provision reads %q: the workspace was replaced", got)
	}
	if n := s.h.Agents(t, second); n != 1 {
		t.Errorf("%d agents run after provisioning twice; want 1", n)
	}
}

func (s *suite) execResult(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("exec")
	s.provision(t, p, id, nil)

	res := mustExec(t, ctx, p, id, sh("printf 'to stdout'; printf 'to stderr' >&2; exit 3"))
	if res.ExitCode != 3 || res.Stdout != "to stdout" || res.Stderr != "to stderr" {
		t.Errorf("Exec = %+v; want exit code 3, stdout %q, stderr %q", res, "to stdout", "to stderr")
	}
	res = mustExec(t, ctx, p, id, sandbox.ExecCommand{Command: []string{"true"}})
	if res.ExitCode != 0 || res.Stdout != "" || res.Stderr != "" {
		t.Errorf("Exec(true) = %+v; want exit code 0 and no output", res)
	}
	res, err := p.Exec(ctx, id, sandbox.ExecCommand{Command: []string{"fleetlift-no-such-command"}})
	if err == nil && res.ExitCode == 0 {
		t.Errorf("Exec of a missing command = %+v, nil; want an error or a non-zero exit code", res)
	}
}

func (s *suite) execWorkingDir(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("workdir")
	sb, _ := s.provision(t, p, id, nil)
	mustExec(t, ctx, p, id, sh("mkdir -p sub/dir"))

	for _, c := range []struct{ dir, want string }{
		{"", sb.WorkingDir},
		{"sub/dir", path.Join(sb.WorkingDir, "sub/dir")},
		{"sub/../sub", path.Join(sb.WorkingDir, "sub")},
	} {
		cmd := sandbox.ExecCommand{Command: []string{"pwd"}, WorkingDir: c.dir}
		if got := strings.TrimSpace(mustExec(t, ctx, p, id, cmd).Stdout); got != c.want {
			t.Errorf("pwd with WorkingDir %q = %q; want %q", c.dir, got, c.want)
		}
	}
	res, err := p.Exec(ctx, id, sandbox.ExecCommand{Command: []string{"pwd"}, WorkingDir: "missing"})
	if err == nil && res.ExitCode == 0 {
		t.Errorf("Exec in a missing WorkingDir = %+v, nil; want an error or a non-zero exit code", res)
	}
}

func (s *suite) execTimeout(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("timeout")
	s.provision(t, p, id, nil)

	marker := newMarker()
	start := time.Now()
	res, err := p.Exec(ctx, id, sandbox.ExecCommand{
		Command: []string{"sh", "-c", "sleep " + marker + "; echo not reached"},
		Timeout: 300 * time.Millisecond,
	})
	if elapsed := time.Since(start); elapsed > 20*time.Second {
		t.Errorf("Exec with Timeout 300ms returned after %s", elapsed)
	}
	if err == nil && res.ExitCode == 0 {
		t.Errorf("Exec past its Timeout = %+v, nil; want an error or a non-zero exit code", res)
	}
	s.expectGone(t, marker, "the command that timed out")

	// The caller's context ends the command the same way.
	marker = newMarker()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	res, err = p.Exec(short, id, sh("sleep "+marker+"; echo not reached"))
	if err == nil && res.ExitCode == 0 {
		t.Errorf("Exec past its context's deadline = %+v, nil; want an error or a non-zero exit code", res)
	}
	s.expectGone(t, marker, "the command whose context ended")

	// The sandbox survives its commands' timeouts.
	if res := mustExec(t, ctx, p, id, sh("echo alive")); res.Stdout != "alive\n" {
		t.Errorf("Exec after a timeout = %+v; want stdout alive", res)
	}
}

func (s *suite) execStdin(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("stdin")
	s.provision(t, p, id, nil)

	for _, input := range []string{"hello\n", strings.Repeat("0123456789abcdef", 64<<10)} {
		res := mustExec(t, ctx, p, id, sandbox.ExecCommand{Command: []string{"cat"}, Stdin: strings.NewReader(input)})
		if res.ExitCode != 0 || res.Stdout != input {
			t.Errorf("cat of %d bytes of stdin: exit code %d, %d bytes out; want them back", len(input), res.ExitCode, len(res.Stdout))
		}
	}
	// A command that does not read its stdin still finishes.
	res := mustExec(t, ctx, p, id, sandbox.ExecCommand{Command: []string{"true"}, Stdin: strings.NewReader(strings.Repeat("x", 1<<20))})
	if res.ExitCode != 0 {
		t.Errorf("true with unread stdin: exit code %d", res.ExitCode)
	}
}

func (s *suite) environment(t *testing.T) {
	secret := "fleetlift-secret-" + newMarker()
	// Set before Provision so that an agent or a command that inherits the
	// worker's environment would see it.
	t.Setenv("FLEETLIFT_TEST_SECRET", secret)
	ctx, p, id := s.ctx(t), s.h.New(t), newID("env")
	declared := "declared-" + newMarker()
	_, opts := s.provision(t, p, id, map[string]string{"FLEETLIFT_TEST_DECLARED": declared})

	res := mustExec(t, ctx, p, id, sandbox.ExecCommand{
		Command: []string{"env"},
		Env:     map[string]string{"FLEETLIFT_TEST_EXEC": "exec-value"},
	})
	if strings.Contains(res.Stdout, secret) {
		t.Errorf("the worker's FLEETLIFT_TEST_SECRET is visible in the sandbox:\n%s", res.Stdout)
	}
	got := parseEnv(res.Stdout)
	allowed := map[string]bool{"PATH": true, "HOME": true, "FLEETLIFT_TEST_EXEC": true}
	for k := range opts.Env {
		allowed[k] = true
	}
	for _, k := range sortedKeys(got) {
		if !allowed[k] {
			t.Errorf("undeclared variable %s=%s in the sandbox", k, got[k])
		}
	}
	for k, want := range map[string]string{"FLEETLIFT_TEST_DECLARED": declared, "FLEETLIFT_TEST_EXEC": "exec-value"} {
		if got[k] != want {
			t.Errorf("%s = %q in the sandbox; want %q", k, got[k], want)
		}
	}
	for _, k := range []string{"PATH", "HOME"} {
		if got[k] == "" {
			t.Errorf("%s is not set in the sandbox", k)
		}
	}

	// A command's own variables do not stick to the sandbox.
	res = mustExec(t, ctx, p, id, sandbox.ExecCommand{Command: []string{"env"}})
	if v, ok := parseEnv(res.Stdout)["FLEETLIFT_TEST_EXEC"]; ok {
		t.Errorf("FLEETLIFT_TEST_EXEC=%s set by an earlier Exec is still visible", v)
	}
}

// secrets: ProvisionOptions.Secrets are the agent's alone; a command run
// in the sandbox never sees them.
func (s *suite) secrets(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("secrets")
	secret := "fleetlift-agent-secret-" + newMarker()
	opts := s.options(t, id, nil)
	opts.Secrets = map[string]string{"FLEETLIFT_TEST_TOKEN": secret}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_ = p.Cleanup(ctx, id)
	})
	if _, err := p.Provision(ctx, opts); err != nil {
		t.Fatalf("Provision(%s): %v", id, err)
	}
	res := mustExec(t, ctx, p, id, sandbox.ExecCommand{Command: []string{"sh", "-c", "env; cat /proc/1/environ 2>/dev/null; true"}})
	if strings.Contains(res.Stdout, secret) || strings.Contains(res.Stdout, "FLEETLIFT_TEST_TOKEN") {
		t.Errorf("a command in the sandbox sees the agent's secret:\n%s", res.Stdout)
	}
}

func (s *suite) copyRoundTrip(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("copy")
	s.provision(t, p, id, nil)

	copyTo(t, ctx, p, id, "a/b/c.txt", "hello")
	if got := copyFrom(t, ctx, p, id, "a/b/c.txt"); got != "hello" {
		t.Errorf("CopyFrom after CopyTo = %q; want hello", got)
	}
	if res := mustExec(t, ctx, p, id, sandbox.ExecCommand{Command: []string{"cat", "a/b/c.txt"}}); res.Stdout != "hello" {
		t.Errorf("cat in the sandbox = %+v; want hello", res)
	}
	copyTo(t, ctx, p, id, "a/b/c.txt", "hi")
	if got := copyFrom(t, ctx, p, id, "a/b/c.txt"); got != "hi" {
		t.Errorf("CopyFrom after overwriting with a shorter text = %q; want hi", got)
	}
	big := strings.Repeat("fleetlift\n", 200_000)
	copyTo(t, ctx, p, id, "big.txt", big)
	if got := copyFrom(t, ctx, p, id, "big.txt"); got != big {
		t.Errorf("CopyFrom of a 2 MB file returned %d bytes that differ", len(got))
	}
	mustExec(t, ctx, p, id, sh("mkdir -p out && printf made > out/result"))
	if got := copyFrom(t, ctx, p, id, "out/result"); got != "made" {
		t.Errorf("CopyFrom of a file made in the sandbox = %q; want made", got)
	}
}

func (s *suite) copyAtomic(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("atomic")
	s.provision(t, p, id, nil)

	copyTo(t, ctx, p, id, "dir/keep.txt", "old")
	broken := io.MultiReader(strings.NewReader("new but cut"), errReader{errors.New("connection reset")})
	if err := p.CopyTo(ctx, id, broken, "dir/keep.txt"); err == nil {
		t.Error("CopyTo from a failing reader succeeded")
	}
	if got := copyFrom(t, ctx, p, id, "dir/keep.txt"); got != "old" {
		t.Errorf("after a failed CopyTo the file reads %q; want the old content", got)
	}
	if res := mustExec(t, ctx, p, id, sh("ls -A dir")); res.Stdout != "keep.txt\n" {
		t.Errorf("after a failed CopyTo the directory holds %q; want only keep.txt", res.Stdout)
	}
}

func (s *suite) copyFromMissing(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("missing")
	s.provision(t, p, id, nil)
	for _, name := range []string{"missing.txt", "no/such/dir/file"} {
		_, err := p.CopyFrom(ctx, id, name)
		if !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("CopyFrom(%s) = %v; want an error wrapping sandbox.ErrNotFound", name, err)
		}
	}
}

func (s *suite) pathEscapes(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("escape")
	s.provision(t, p, id, nil)
	name := "fleetlift-escape-" + newMarker()
	// Where a broken provider would write; the same paths in the sandbox
	// and, for providers on this host, here.
	targets := []string{"/tmp/" + name, "/etc/" + name}
	t.Cleanup(func() {
		for _, f := range targets {
			os.Remove(f)
		}
	})
	mustExec(t, ctx, p, id, sh("mkdir -p a && ln -s /etc link"))
	// Enough ".." to reach / from any workspace.
	up := strings.Repeat("../", 16)

	// CopyTo is never aimed at /etc/passwd: a broken provider run as root
	// would ruin the host.
	for _, dest := range []string{
		"../" + name,
		up + "tmp/" + name,
		"/tmp/" + name,
		"a/../../" + name,
		"a/" + up + "tmp/" + name,
		"link/" + name,
	} {
		if err := p.CopyTo(ctx, id, strings.NewReader("escaped"), dest); err == nil {
			t.Errorf("CopyTo(%s) succeeded; want it refused", dest)
		}
	}
	// Files that exist, so that an error means refused, not missing.
	for _, src := range []string{up + "etc/passwd", "/etc/passwd", "a/" + up + "etc/passwd", "link/passwd"} {
		if rc, err := p.CopyFrom(ctx, id, src); err == nil {
			data, _ := io.ReadAll(rc)
			rc.Close()
			t.Errorf("CopyFrom(%s) read %d bytes; want it refused", src, len(data))
		}
	}
	for _, dir := range []string{"../", up + "etc", "/etc", "a/../..", "link"} {
		res, err := p.Exec(ctx, id, sandbox.ExecCommand{Command: []string{"pwd"}, WorkingDir: dir})
		if err == nil && res.ExitCode == 0 {
			t.Errorf("Exec with WorkingDir %s ran in %s; want it refused", dir, strings.TrimSpace(res.Stdout))
		}
	}

	check := fmt.Sprintf("for f in ../%s /tmp/%s /etc/%s; do if test -e $f; then echo $f; fi; done", name, name, name)
	if res := mustExec(t, ctx, p, id, sh(check)); res.Stdout != "" {
		t.Errorf("files written outside the workspace, as the sandbox sees it:\n%s", res.Stdout)
	}
	for _, f := range targets {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("%s was written on this host", f)
		}
	}
}

func (s *suite) unknownSandbox(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("never")
	if _, err := p.Status(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Status of an unknown sandbox = %v; want an error wrapping sandbox.ErrNotFound", err)
	}
	if _, err := p.Exec(ctx, id, sh("true")); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Exec in an unknown sandbox = %v; want an error wrapping sandbox.ErrNotFound", err)
	}
	if err := p.CopyTo(ctx, id, strings.NewReader("x"), "x"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("CopyTo to an unknown sandbox = %v; want an error wrapping sandbox.ErrNotFound", err)
	}
	if _, err := p.CopyFrom(ctx, id, "x"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("CopyFrom an unknown sandbox = %v; want an error wrapping sandbox.ErrNotFound", err)
	}
	if err := p.Cleanup(ctx, id); err != nil {
		t.Errorf("Cleanup of an unknown sandbox = %v; want nil", err)
	}
}

func (s *suite) cleanup(t *testing.T) {
	ctx, p, id := s.ctx(t), s.h.New(t), newID("cleanup")
	_, opts := s.provision(t, p, id, nil)
	copyTo(t, ctx, p, id, "old.txt", "from before Cleanup")

	marker := newMarker()
	mustExec(t, ctx, p, id, sh("sleep "+marker+" >/dev/null 2>&1 &"))
	if !eventually(5*time.Second, func() bool { return len(s.h.Processes(t, marker)) > 0 }) {
		t.Fatalf("the background process (marker %s) is not visible; the check after Cleanup could not work", marker)
	}

	if err := p.Cleanup(ctx, id); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if _, err := p.Status(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Status after Cleanup = %v; want an error wrapping sandbox.ErrNotFound", err)
	}
	s.expectGone(t, marker, "a process started in the background by Exec")
	if err := p.Cleanup(ctx, id); err != nil {
		t.Errorf("second Cleanup = %v; want nil", err)
	}

	// The same id provisions a fresh sandbox, as a retried workflow needs.
	sb, err := p.Provision(ctx, opts)
	if err != nil {
		t.Fatalf("Provision after Cleanup: %v", err)
	}
	if sb.Phase != sandbox.PhaseRunning {
		t.Errorf("Provision after Cleanup: phase %s; want running", sb.Phase)
	}
	if _, err := p.CopyFrom(ctx, id, "old.txt"); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("CopyFrom of a file from before Cleanup = %v; want ErrNotFound in a fresh sandbox", err)
	}
}

func (s *suite) concurrent(t *testing.T) {
	ctx, p := s.ctx(t), s.h.New(t)

	var wg sync.WaitGroup
	for i := range 10 {
		id := newID(fmt.Sprintf("many%d", i))
		opts := s.options(t, id, nil)
		t.Cleanup(func() { p.Cleanup(context.Background(), id) })
		wg.Go(func() {
			if _, err := p.Provision(ctx, opts); err != nil {
				t.Errorf("Provision(%s): %v", id, err)
				return
			}
			want := fmt.Sprintf("sandbox %d", i)
			res, err := p.Exec(ctx, id, sandbox.ExecCommand{Command: []string{"echo", want}})
			if err != nil || res.Stdout != want+"\n" {
				t.Errorf("Exec in %s = %+v, %v; want stdout %q", id, res, err, want)
			}
			if err := p.CopyTo(ctx, id, strings.NewReader(want), "f.txt"); err != nil {
				t.Errorf("CopyTo(%s): %v", id, err)
			}
			if st, err := p.Status(ctx, id); err != nil || st.Phase != sandbox.PhaseRunning {
				t.Errorf("Status(%s) = %+v, %v; want running", id, st, err)
			}
			if err := p.Cleanup(ctx, id); err != nil {
				t.Errorf("Cleanup(%s): %v", id, err)
			}
			if _, err := p.Status(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
				t.Errorf("Status(%s) after Cleanup = %v; want ErrNotFound", id, err)
			}
		})
	}
	wg.Wait()

	// Racing Provisions of one id make one sandbox with one agent.
	id := newID("same")
	opts := s.options(t, id, nil)
	t.Cleanup(func() { p.Cleanup(context.Background(), id) })
	dirs := make([]string, 5)
	for i := range dirs {
		wg.Go(func() {
			sb, err := p.Provision(ctx, opts)
			if err != nil {
				t.Errorf("concurrent Provision(%s): %v", id, err)
				return
			}
			dirs[i] = sb.WorkingDir
		})
	}
	wg.Wait()
	for _, d := range dirs[1:] {
		if d != dirs[0] {
			t.Errorf("concurrent Provisions of one id returned working dirs %q", dirs)
			break
		}
	}
	if n := s.h.Agents(t, &sandbox.Sandbox{ID: id, WorkingDir: dirs[0]}); n != 1 {
		t.Errorf("%d agents run after 5 concurrent Provisions of one id; want 1", n)
	}
	for range 3 {
		wg.Go(func() {
			if err := p.Cleanup(ctx, id); err != nil {
				t.Errorf("concurrent Cleanup(%s): %v", id, err)
			}
		})
	}
	wg.Wait()
	if _, err := p.Status(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Status(%s) after concurrent Cleanups = %v; want ErrNotFound", id, err)
	}
}

// expectGone fails the test unless no process with marker in its command
// line remains (after a short wait for the kill to be reaped).
func (s *suite) expectGone(t *testing.T, marker, what string) {
	t.Helper()
	var left []string
	if !eventually(3*time.Second, func() bool {
		left = s.h.Processes(t, marker)
		return len(left) == 0
	}) {
		t.Errorf("%s still runs: %q", what, left)
	}
}

func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newID returns a sandbox id unique to this run, valid for every provider
// (a DNS label).
func newID(name string) string {
	return fmt.Sprintf("st-%s-%08x", name, rand.Uint32())
}

// newMarker returns a number unique to this run, usable as a sleep
// duration (decades) that tells a test's processes from all others.
func newMarker() string {
	return fmt.Sprintf("%d", 900_000_000+rand.IntN(99_999_999))
}

func parseEnv(out string) map[string]string {
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// hostProcesses lists this host's processes, other than the test itself,
// whose command line contains marker.
func hostProcesses(t *testing.T, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("list processes: %v", err)
	}
	self := fmt.Sprint(os.Getpid())
	var found []string
	for _, e := range entries {
		if e.Name() == self || strings.Trim(e.Name(), "0123456789") != "" {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		found = append(found, e.Name()+": "+string(bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte{' '})))
	}
	return found
}
