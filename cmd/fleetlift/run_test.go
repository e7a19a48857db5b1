package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/payload"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

// demoRepos makes n bare repositories with a go.mod saying go 1.21 and
// returns their file URLs.
func demoRepos(t *testing.T, root string, n int) []string {
	t.Helper()
	var urls []string
	for i := range n {
		src := filepath.Join(root, "src", fmt.Sprintf("svc%d", i))
		bare := filepath.Join(root, fmt.Sprintf("svc%d.git", i))
		script := fmt.Sprintf(`set -e
git init -q -b main %[1]s
printf 'module example.com/svc\n\ngo 1.21\n' > %[1]s/go.mod
git -C %[1]s add go.mod
git -C %[1]s -c user.email=t@example.com -c user.name=t commit -qm init
git clone -q --bare %[1]s %[2]s`, src, bare)
		if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("make repo: %v\n%s", err, out)
		}
		urls = append(urls, "file://"+bare)
	}
	return urls
}

// bumpCampaign is campaign id over urls (repositories demoRepos made):
// a deterministic sed raises their go directive, on branches
// auto/<id>/<id>; fields are more top-level lines, before the
// repositories.
func bumpCampaign(id string, urls []string, fields string) string {
	return sedCampaign(id, "s/^go 1.21$/go 1.26/", "", urls, fields)
}

// sedCampaign is bumpCampaign with the sed expression its command runs
// on go.mod, and more pull_request fields (flow entries, such as
// "keep_current: conflicted"; none when empty).
func sedCampaign(id, sed, pullRequest string, urls []string, fields string) string {
	if pullRequest != "" {
		pullRequest = ", " + pullRequest
	}
	var b strings.Builder
	fmt.Fprintf(&b, `version: 1
kind: Campaign
id: %[1]s
title: Bump go
template:
  execution:
    deterministic:
      image: golang
      command: [sed, -i, %[3]q, go.mod]
  pull_request: {branch_prefix: auto/%[1]s, title: Bump go%[4]s}
%[2]srepositories:
`, id, fields, sed, pullRequest)
	for _, u := range urls {
		fmt.Fprintf(&b, "  - url: %s\n", u)
	}
	return b.String()
}

// entries are the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// freeAddr is a loopback address nothing listens on, for a server the
// test starts there.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := listen.FreeAddr("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func writeDef(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunCampaignEmbedded: `fleetlift run --file` on a campaign over local
// repositories starts the embedded server and a worker, runs to the end,
// prints the per-repository table and exits 0; the branches are there,
// and nothing the run made is left in the temporary directory or among
// the state directory's scratch repositories.
func TestRunCampaignEmbedded(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	def := writeDef(t, root, "bump.yaml", bumpCampaign("bump", urls, ""))
	addr, state := freeAddr(t), filepath.Join(root, "state")
	out, code := runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", state)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"starting the embedded Temporal server", "campaign/bump: completed", "3 repositories: 3 completed, 0 failed", "#auto/bump/bump"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		got, err := exec.Command("git", "-C", bare, "show", "auto/bump/bump:go.mod").Output()
		if err != nil || !strings.Contains(string(got), "go 1.26") {
			t.Errorf("%s: branch auto/bump/bump missing or unchanged: %v", bare, err)
		}
	}
	if left := entries(t, tmp); len(left) > 0 {
		t.Errorf("the run left %v in its temporary directory", left)
	}
	if _, err := os.Stat(filepath.Join(state, "scratch")); !os.IsNotExist(err) {
		t.Errorf("the run left its scratch repositories in the state directory (%v)", err)
	}

	// What a worker that died left among the scratch repositories is
	// removed by the next one that takes its place.
	stale := filepath.Join(state, "scratch", "fleetlift-git-1")
	if err := os.MkdirAll(filepath.Join(stale, "objects"), 0o700); err != nil {
		t.Fatal(err)
	}

	// Run it again: the embedded server restarts from its database, the
	// finished campaign runs anew (idempotently: the branches are there)
	// and the run records generation 2 with the definition's digest.
	out, code = runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", state)
	if code != 0 || !strings.Contains(out, "3 repositories: 3 completed") {
		t.Fatalf("second run: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("a stopped worker's scratch repository is still there after the next run (%v)", err)
	}
	srv := startServer(t, addr, state)
	memo := describeMemo(t, srv, "campaign/bump")
	if memo[statetemporal.MemoGeneration] != "2" || !strings.HasPrefix(memo[statetemporal.MemoDigest], `"sha256:`) || !strings.Contains(memo[statetemporal.MemoSpec], `"id":"bump"`) {
		t.Errorf("memo of the second run: %v", memo)
	}
}

// TestRunWaitsForApproval: a task that needs approval waits; `fleetlift
// approve` from "another terminal" lets it finish; nothing is pushed
// before.
func TestRunWaitsForApproval(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 1)
	def := writeDef(t, root, "task.yaml", fmt.Sprintf(`version: 1
id: needs-ok
title: Bump go
repositories: [{url: %s}]
execution:
  deterministic: {image: golang, command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]}
require_approval: true
pull_request: {branch_prefix: auto/ok, title: Bump go}
`, urls[0]))
	addr := freeAddr(t)
	state := filepath.Join(root, "state")
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"run", "--file", def, "--temporal-address", addr, "--state-dir", state}, &out, &out)
	}()

	deadline := time.Now().Add(2 * time.Minute)
	for !strings.Contains(out.String(), "awaits approval") {
		if time.Now().After(deadline) {
			t.Fatalf("never awaited approval:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	bare := strings.TrimPrefix(urls[0], "file://")
	if b, _ := exec.Command("git", "-C", bare, "branch", "--list", "auto/*").Output(); len(bytes.TrimSpace(b)) != 0 {
		t.Fatalf("pushed before approval: %s", b)
	}
	status, code := runCLI(t, "status", "needs-ok", "--temporal-address", addr, "--state-dir", state)
	if code != 0 || !strings.Contains(status, "awaiting_approval") || !strings.Contains(status, "go.mod") {
		t.Fatalf("status while waiting (exit %d):\n%s", code, status)
	}
	// --diff shows the patch an approval would push.
	status, code = runCLI(t, "status", "needs-ok", "--diff", "--temporal-address", addr, "--state-dir", state)
	if code != 0 || !strings.Contains(status, "-go 1.21") || !strings.Contains(status, "+go 1.26") {
		t.Fatalf("status --diff while waiting (exit %d):\n%s", code, status)
	}
	// A decision names the result it decides: the digest status shows.
	if msg, code := runCLI(t, "approve", "needs-ok", "--temporal-address", addr, "--state-dir", state); code == 0 || !strings.Contains(msg, "--digest") || !strings.Contains(msg, "fleetlift status needs-ok") {
		t.Fatalf("approve without a digest: exit %d: %s", code, msg)
	}
	digest := regexp.MustCompile(`sha256:[0-9a-f]{64}`).FindString(status)
	if digest == "" {
		t.Fatalf("status shows no digest to approve:\n%s", status)
	}
	if msg, code := runCLI(t, "approve", "needs-ok", "--digest", "sha256:"+strings.Repeat("0", 64), "--temporal-address", addr, "--state-dir", state); code == 0 || !strings.Contains(msg, "no result awaiting approval") {
		t.Fatalf("approve of another result: exit %d: %s", code, msg)
	}
	if msg, code := runCLI(t, "approve", "needs-ok", "--digest", digest[:len("sha256:")+16], "--temporal-address", addr, "--state-dir", state); code != 0 {
		t.Fatalf("approve: exit %d: %s", code, msg)
	}
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(out.String(), "task/needs-ok: completed") {
			t.Fatalf("run after approval: exit %d:\n%s", code, out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("run did not finish after approval:\n%s", out.String())
	}
	if b, _ := exec.Command("git", "-C", bare, "branch", "--list", "auto/*").Output(); !strings.Contains(string(b), "auto/ok/needs-ok") {
		t.Errorf("no branch after approval: %q", b)
	}
}

// startServer starts the embedded server on the run's database and with
// its credentials, as a later `fleetlift server` would, and stops it when
// the test ends.
func startServer(t *testing.T, addr, state string) *devserver.Server {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(state, "temporal.db"), TLSDir: credentialDir(state), IP: host, Port: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// describeMemo returns a workflow's memo fields as JSON text.
func describeMemo(t *testing.T, srv *devserver.Server, id string) map[string]string {
	t.Helper()
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.DescribeWorkflowExecution(t.Context(), id, "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, p := range d.WorkflowExecutionInfo.GetMemo().GetFields() {
		out[k] = string(p.GetData())
	}
	return out
}

// dialServer connects to srv with the install's credential.
func dialServer(srv *devserver.Server) (client.Client, error) {
	return client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}, DataConverter: payload.Converter})
}

// TestRunStoppedGoesOnWhenRunAgain: a `fleetlift run` stopped midway (an
// interrupt), whose embedded server and worker stop with it, says so and
// how to go on, not that the run goes on; `fleetlift status` reads it
// without a server, and says why its state cannot be read; another
// definition of the same id is refused while the run is there; the same
// command again goes on with the run to its end, and the repository
// finished before the stop is not pushed again.
func TestRunStoppedGoesOnWhenRunAgain(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	def := writeDef(t, root, "resume.yaml", slowBump("resume", urls, 2, "1.26"))
	other := writeDef(t, root, "other.yaml", slowBump("resume", urls, 2, "1.27"))
	addr, state := freeAddr(t), filepath.Join(root, "state")
	args := []string{"--temporal-address", addr, "--state-dir", state}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runContext(ctx, append([]string{"run", "--file", def}, args...), &out, &out) }()
	finished := regexp.MustCompile(`(?m)^\S+\s+svc\d\s+completed$`)
	for deadline := time.Now().Add(2 * time.Minute); !finished.MatchString(out.String()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no repository finished:\n%s", out.String())
		}
	}
	cancel()
	if code := <-done; code == 0 {
		t.Fatalf("an interrupted run exited 0:\n%s", out.String())
	}
	if s := out.String(); !strings.Contains(s, "it stopped with this process and is kept in "+filepath.Join(state, "temporal.db")+": run the same command again to go on with it") || strings.Contains(s, "it goes on:") {
		t.Errorf("the interrupted run does not say how it goes on:\n%s", s)
	}
	heads := map[string]string{}
	for _, u := range urls {
		if head, err := exec.Command("git", "-C", strings.TrimPrefix(u, "file://"), "rev-parse", "auto/resume/resume").Output(); err == nil {
			heads[u] = string(head)
		}
	}
	if len(heads) == 0 || len(heads) == len(urls) {
		t.Fatalf("%d of %d repositories pushed before the stop; want some, not all", len(heads), len(urls))
	}

	// Read without a server: the list shows it running; its state, which
	// only a worker answers for, is refused at once, saying why.
	if s, code := runCLI(t, append([]string{"status"}, args...)...); code != 0 || !regexp.MustCompile(`campaign/resume\s+Campaign\s+running`).MatchString(s) {
		t.Errorf("status of the runs: exit %d:\n%s", code, s)
	}
	if s, code := runCLI(t, append([]string{"status", "resume"}, args...)...); code == 0 || !strings.Contains(s, "campaign/resume is running, and nothing runs it now") {
		t.Errorf("status of the stopped run: exit %d:\n%s", code, s)
	}

	if s, code := runCLI(t, append([]string{"run", "--file", other, "--no-worker"}, args...)...); code == 0 ||
		!strings.Contains(s, "campaign/resume is already running another version of this definition") || !strings.Contains(s, "fleetlift abort campaign/resume") {
		t.Errorf("another definition while the run is there: exit %d:\n%s", code, s)
	}

	s, code := runCLI(t, append([]string{"run", "--file", def}, args...)...)
	if code != 0 || !strings.Contains(s, "going on with campaign/resume") || !strings.Contains(s, "3 repositories: 3 completed") {
		t.Fatalf("run again: exit %d:\n%s", code, s)
	}
	// What the stopped run finished shows finished from the first line on,
	// never at work again.
	shown := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\S+\s+(svc\d)\s+(\S+)$`).FindAllStringSubmatch(s, -1) {
		if shown[m[1]] == "completed" && m[2] != "completed" {
			t.Errorf("run again: %s shown %s after it was shown completed:\n%s", m[1], m[2], s)
		}
		shown[m[1]] = m[2]
	}
	if s, code := runCLI(t, append([]string{"status", "resume"}, args...)...); code != 0 || !strings.Contains(s, "campaign/resume: completed (3 repositories completed)") {
		t.Errorf("status of the ended run, read without a server: exit %d:\n%s", code, s)
	}
	for _, u := range urls {
		bare := strings.TrimPrefix(u, "file://")
		if got, err := exec.Command("git", "-C", bare, "show", "auto/resume/resume:go.mod").Output(); err != nil || !strings.Contains(string(got), "go 1.26") {
			t.Errorf("%s: branch auto/resume/resume missing or unchanged: %v", bare, err)
		}
		if before, ok := heads[u]; ok {
			if now, _ := exec.Command("git", "-C", bare, "rev-parse", "auto/resume/resume").Output(); string(now) != before {
				t.Errorf("%s: pushed again after the stop (%s, was %s)", bare, now, before)
			}
		}
	}
}

// TestRunDetachNeedsAServer: `fleetlift run --detach` with no server to
// leave the run to is refused before anything starts: an embedded server
// would stop as the command returns, and the run with it.
func TestRunDetachNeedsAServer(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 1)
	def := writeDef(t, root, "bump.yaml", bumpCampaign("detached", urls, ""))
	addr, state := freeAddr(t), filepath.Join(root, "state")
	out, code := runCLI(t, "run", "--file", def, "--detach", "--temporal-address", addr, "--state-dir", state)
	if code == 0 || !strings.Contains(out, "--detach leaves the run to a Temporal server and workers that outlive this command, and nothing listens at "+addr) ||
		strings.Contains(out, "starting the embedded Temporal server") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(state, "temporal.db")); !os.IsNotExist(err) {
		t.Errorf("a database was made for a run that was refused: %v", err)
	}
}

// TestRunFailedOnly: a `fleetlift run` whose campaign fell short says
// which command runs the failed repositories again (its own, with
// --failed-only), and that command runs only them, from the same
// database, keeping the others as they were; with nothing failed, or
// another version of the definition, it says why it does not run.
func TestRunFailedOnly(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	def := writeDef(t, root, "retry.yaml", bumpCampaign("retry", urls, ""))
	other := writeDef(t, root, "other.yaml", sedCampaign("retry", "s/^go 1.21$/go 1.27/", "", urls, ""))
	// svc1's repository is not there yet: its unit fails at the clone,
	// saying so.
	missing := strings.TrimPrefix(urls[1], "file://")
	if err := os.Rename(missing, missing+".later"); err != nil {
		t.Fatal(err)
	}
	addr, state := freeAddr(t), filepath.Join(root, "state")
	args := []string{"--file", def, "--temporal-address", addr, "--state-dir", state}
	out, code := runCLI(t, append([]string{"run"}, args...)...)
	// The command it names is its own: its flags (the environment's
	// too), then --failed-only.
	again := regexp.MustCompile("run the failed repositories again with `fleetlift run (--[^`]+ )?--file " + regexp.QuoteMeta(def) +
		" (--[^`]+ )?--state-dir " + regexp.QuoteMeta(state) + " --temporal-address " + regexp.QuoteMeta(addr) + " --failed-only`")
	if code != 1 || !strings.Contains(out, "3 repositories: 2 completed, 1 failed") || !again.MatchString(out) ||
		!strings.Contains(out, "local repository "+urls[1]+" does not exist") {
		t.Fatalf("first run: exit %d; want 1, svc1 failed for a repository that does not exist, and the command that runs it again:\n%s", code, out)
	}
	heads := map[string]string{}
	for _, u := range []string{urls[0], urls[2]} {
		head, err := exec.Command("git", "-C", strings.TrimPrefix(u, "file://"), "rev-parse", "auto/retry/retry").Output()
		if err != nil {
			t.Fatal(err)
		}
		heads[u] = string(head)
	}
	if err := os.Rename(missing+".later", missing); err != nil {
		t.Fatal(err)
	}

	if s, code := runCLI(t, "run", "--file", other, "--temporal-address", addr, "--state-dir", state, "--failed-only"); code == 0 || !strings.Contains(s, "campaign/retry last ran another version of this definition") {
		t.Errorf("--failed-only with another version: exit %d:\n%s", code, s)
	}
	out, code = runCLI(t, append([]string{"run", "--failed-only"}, args...)...)
	if code != 0 || !strings.Contains(out, "started campaign/retry again for 1 failed repositories") || !strings.Contains(out, "3 repositories: 3 completed") {
		t.Fatalf("--failed-only: exit %d:\n%s", code, out)
	}
	for u, head := range heads {
		if now, _ := exec.Command("git", "-C", strings.TrimPrefix(u, "file://"), "rev-parse", "auto/retry/retry").Output(); string(now) != head {
			t.Errorf("%s: pushed again (%s, was %s)", u, now, head)
		}
	}
	if got, err := exec.Command("git", "-C", missing, "show", "auto/retry/retry:go.mod").Output(); err != nil || !strings.Contains(string(got), "go 1.26") {
		t.Errorf("svc1 not changed by the retry: %v", err)
	}
	if s, code := runCLI(t, append([]string{"run", "--failed-only"}, args...)...); code == 0 || !strings.Contains(s, "campaign/retry has no failed repositories") {
		t.Errorf("--failed-only with none failed: exit %d:\n%s", code, s)
	}
}

// slowBump is a campaign over urls that raises their go directive to to
// one repository at a time, each taking seconds.
func slowBump(id string, urls []string, seconds int, to string) string {
	return strings.Replace(bumpCampaign(id, urls, "max_parallel: 1\n"), `command: [sed, -i, "s/^go 1.21$/go 1.26/", go.mod]`,
		fmt.Sprintf(`command: [sh, -c, "sleep %d; sed -i 's/^go 1.21$/go %s/' go.mod"]`, seconds, to), 1)
}

// TestRunsShareAnEmbeddedServer: a second `fleetlift run` on the same
// state directory (another terminal) uses the embedded server the first
// started; when the first ends and stops it, the second serves the
// database itself and runs to its end. (The first runs no worker here,
// so the second's runs both campaigns: a worker in the first would take
// steps of the second's run and drop them when it stops, and they would
// run again only after the host timeout.)
func TestRunsShareAnEmbeddedServer(t *testing.T) {
	root := t.TempDir()
	urls := demoRepos(t, root, 3)
	first := writeDef(t, root, "first.yaml", slowBump("first", urls[:1], 3, "1.26"))
	second := writeDef(t, root, "second.yaml", slowBump("second", urls, 2, "1.26"))
	flags := []string{"--temporal-address", freeAddr(t), "--state-dir", filepath.Join(root, "state")}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var outA, outB syncbuf.Buffer
	doneA, doneB := make(chan int, 1), make(chan int, 1)
	go func() {
		doneA <- runContext(ctx, append([]string{"run", "--file", first, "--no-worker"}, flags...), &outA, &outA)
	}()
	for !strings.Contains(outA.String(), "started campaign/first") {
		if ctx.Err() != nil {
			t.Fatalf("the first run did not start:\n%s", outA.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() { doneB <- runContext(ctx, append([]string{"run", "--file", second}, flags...), &outB, &outB) }()
	if code := <-doneA; code != 0 {
		t.Fatalf("the first run: exit %d:\n%s", code, outA.String())
	}
	code := <-doneB
	s := outB.String()
	if code != 0 || !strings.Contains(s, "3 repositories: 3 completed") {
		t.Fatalf("the second run: exit %d:\n%s", code, s)
	}
	if strings.Index(s, "this process serves its database now") > strings.Index(s, "starting the embedded Temporal server") {
		t.Errorf("the second run did not start the server in the place of the first's:\n%s", s)
	}
}
