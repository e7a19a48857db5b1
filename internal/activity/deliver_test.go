package activity_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/forge/local"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	localsb "github.com/fleetlift/fleetlift/internal/sandbox/local"
)

// delivery is a local sandbox whose agent is the real one, run by the
// test in the sandbox's workspace (the provider's own agent only waits),
// and activities that propose its changes on the local forge, as a
// worker does.
type delivery struct {
	a   *activity.Activities
	env *testsuite.TestActivityEnvironment
	ref activity.SandboxRef
	ws  string
}

func newDelivery(t *testing.T, f func(forge.Forge) forge.Forge) *delivery {
	t.Helper()
	p, err := localsb.New(localsb.Options{Root: t.TempDir(), AgentCommand: []string{"sh", "-c", "exec sleep 1000", "agent"}, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := p.Provision(t.Context(), sandbox.ProvisionOptions{ID: "deliver"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
	g := &git.Git{Env: gittest.Env()}
	base := local.New(g)
	// It keeps a scratch repository for its next pull request.
	t.Cleanup(func() { base.Close() })
	var lf forge.Forge = base
	if f != nil {
		lf = f(lf)
	}
	a := &activity.Activities{
		Sandbox: p, PollInterval: 20 * time.Millisecond,
		Forges:    func(string) (forge.Forge, error) { return lf, nil },
		Git:       g,
		FileRoots: []string{os.TempDir()},
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	return &delivery{a: a, env: env, ref: activity.SandboxRef{ID: sb.ID, Provider: sb.Provider}, ws: sb.WorkingDir}
}

// work runs the agent on m in the sandbox's workspace, to its end.
func (d *delivery) work(t *testing.T, m protocol.Manifest) protocol.Result {
	t.Helper()
	env := gittest.Env()
	o := agent.Options{
		Workspace: d.ws, Env: env,
		Git:          &git.Git{Env: env, ScratchDir: filepath.Join(d.ws, protocol.Dir, "git")},
		FileRoots:    []string{os.TempDir()},
		ManifestPoll: 20 * time.Millisecond, SteeringPoll: 50 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := agent.Run(ctx, o, m)
	if err != nil || res.Status != protocol.PhaseComplete {
		t.Fatalf("agent: %v, %s %q", err, res.Status, res.Error)
	}
	return res
}

// await is the worker's AwaitAgentResult on the finished agent, proposing
// its changes as dl says.
func (d *delivery) await(t *testing.T, dl *activity.Delivery) activity.AgentOutcome {
	t.Helper()
	v, err := d.env.ExecuteActivity(d.a.AwaitAgentResult, activity.WaitInput{
		Sandbox: d.ref, Phases: []protocol.Phase{protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled}, Deliver: dl})
	if err != nil {
		t.Fatal(err)
	}
	var out activity.AgentOutcome
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

func changeManifest(repos ...protocol.Repository) protocol.Manifest {
	return protocol.Manifest{
		TaskID: "task-1", Mode: protocol.ModeTransform, Title: "change", Repositories: repos,
		Execution:      protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", "echo changed >> README.md"}},
		TimeoutSeconds: 60,
		PullRequest:    &protocol.PullRequest{BranchPrefix: "fleetlift", Title: "Change the README", Body: "Why.", Labels: []string{"automated"}},
		GitConfig:      protocol.GitConfig{UserName: "Fleetlift Bot", UserEmail: "bot@example.com"},
		Forge:          "local",
	}
}

const deliveredBranch = "fleetlift/task-1"

func branchAt(t *testing.T, bare string) string {
	t.Helper()
	return strings.TrimSpace(gittest.Run(t, bare, "for-each-ref", "--format=%(objectname)", "refs/heads/"+deliveredBranch))
}

// The worker, not the agent, proposes a finished transform's change: the
// tree the result shows, committed by the manifest's author on the
// commit the work started from, pushed and recorded by the forge.
func TestDeliverProposesTheChange(t *testing.T) {
	d := newDelivery(t, nil)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	main := strings.TrimSpace(gittest.Run(t, remote, "rev-parse", "main"))
	m := changeManifest(protocol.Repository{Name: "svc", URL: remote, Branch: "main"})
	res := d.work(t, m)
	if got := branchAt(t, remote); got != "" {
		t.Fatalf("the agent pushed %s", got)
	}
	out := d.await(t, activity.DeliveryOf(m, nil))
	r := out.Result.Repositories[0]
	if out.Status.Phase != protocol.PhaseComplete || r.Status != "success" || r.PullRequest == nil {
		t.Fatalf("phase %s, repository %s %q, pull request %+v", out.Status.Phase, r.Status, r.Error, r.PullRequest)
	}
	head := branchAt(t, remote)
	if r.PullRequest.Commit != head || r.PullRequest.Branch != deliveredBranch || r.PullRequest.Tree != res.Repositories[0].Tree {
		t.Fatalf("pull request %+v; branch at %s, tree collected %s", r.PullRequest, head, res.Repositories[0].Tree)
	}
	if got := gittest.Run(t, remote, "log", "-1", "--format=%P|%T|%an <%ae>|%B", head); got != main+"|"+r.Tree+"|Fleetlift Bot <bot@example.com>|Change the README\n\nWhy." {
		t.Errorf("commit pushed: %q", got)
	}
	if rec := gittest.Run(t, remote, "show", local.RecordRefPrefix+deliveredBranch+":"+local.RecordFile); !strings.Contains(rec, `"title": "Change the README"`) {
		t.Errorf("pull request record %s", rec)
	}
	// A retried attempt finds the pull request it opened.
	again := d.await(t, activity.DeliveryOf(m, nil))
	if pr := again.Result.Repositories[0].PullRequest; pr == nil || pr.URL != r.PullRequest.URL || again.Status.Phase != protocol.PhaseComplete {
		t.Errorf("again: %s, %+v", again.Status.Phase, pr)
	}
}

// With approval required, the worker proposes only the tree approved: a
// change nobody approved (an agent that went on after a forged approval)
// or another tree fails its repository and pushes nothing.
func TestDeliverProposesOnlyTheApprovedTree(t *testing.T) {
	d := newDelivery(t, nil)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := changeManifest(protocol.Repository{Name: "svc", URL: remote, Branch: "main"})
	res := d.work(t, m)
	m.RequireApproval = true
	other := res
	other.Repositories = []protocol.RepositoryResult{{Name: "svc", Tree: strings.TrimSpace(gittest.Run(t, remote, "rev-parse", "main^{tree}"))}}
	for _, tc := range []struct {
		name     string
		approved *protocol.Result
		want     string
	}{
		{"none approved", nil, "no approved change in svc"},
		{"another tree approved", &other, "not the approved tree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := d.await(t, activity.DeliveryOf(m, tc.approved))
			r := out.Result.Repositories[0]
			if r.Status != "failed" || !strings.Contains(r.Error, tc.want) || r.PullRequest != nil || out.Status.Phase != protocol.PhaseFailed {
				t.Fatalf("phase %s, repository %s %q, pull request %+v; want failed %q", out.Status.Phase, r.Status, r.Error, r.PullRequest, tc.want)
			}
			if got := branchAt(t, remote); got != "" {
				t.Fatalf("pushed %s", got)
			}
		})
	}
	out := d.await(t, activity.DeliveryOf(m, &res))
	if r := out.Result.Repositories[0]; r.PullRequest == nil || branchAt(t, remote) != r.PullRequest.Commit {
		t.Fatalf("the approved change: %s %q, %+v", r.Status, r.Error, r.PullRequest)
	}
}

// A sandbox that vanishes while its change is proposed (an attempt of
// the same activity the server gave up on, its heartbeat late, removed
// it as it ended) is a lost sandbox, whose work runs again in a new one,
// not a change the agent failed to leave; nothing is pushed from it.
func TestDeliverFromAVanishedSandboxLosesIt(t *testing.T) {
	d := newDelivery(t, nil)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := changeManifest(protocol.Repository{Name: "svc", URL: remote, Branch: "main"})
	d.work(t, m)
	forges := d.a.Forges
	d.a.Forges = func(name string) (forge.Forge, error) {
		if err := d.a.Sandbox.Cleanup(context.Background(), d.ref.ID); err != nil {
			t.Error(err)
		}
		return forges(name)
	}
	v, err := d.env.ExecuteActivity(d.a.AwaitAgentResult, activity.WaitInput{
		Sandbox: d.ref, Phases: []protocol.Phase{protocol.PhaseComplete, protocol.PhaseFailed, protocol.PhaseCancelled}, Deliver: activity.DeliveryOf(m, nil)})
	if !activity.SandboxLost(err) {
		var out activity.AgentOutcome
		if err == nil {
			_ = v.Get(&out)
		}
		t.Fatalf("err %v, outcome %+v; want the sandbox lost", err, out.Result.Repositories)
	}
	if got := branchAt(t, remote); got != "" {
		t.Fatalf("pushed %s", got)
	}
}

// What the sandbox left is checked, not trusted: a bundle with another
// tree than the result shows, or a base that is not on the target
// branch, is not proposed.
func TestDeliverChecksWhatTheSandboxLeft(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, d *delivery, remote string, res protocol.Result)
		want   string
	}{
		{"a bundle of another change", func(t *testing.T, d *delivery, remote string, res protocol.Result) {
			work := t.TempDir()
			gittest.Run(t, work, "clone", "--quiet", remote, ".")
			gittest.WriteFiles(t, work, map[string]string{"EVIL": "not approved\n"})
			gittest.Run(t, work, "add", "-A")
			gittest.Run(t, work, "commit", "--quiet", "-m", "evil")
			gittest.Run(t, work, "update-ref", protocol.BundleRef, "HEAD")
			bundle := filepath.Join(d.ws, protocol.Dir, protocol.BundleFile("svc"))
			gittest.Run(t, work, "bundle", "create", "--quiet", bundle, protocol.BundleRef, "^HEAD~1")
		}, "the change left in svc has tree"},
		{"a base off the branch", func(t *testing.T, d *delivery, remote string, res protocol.Result) {
			// The work's own history, a commit no branch of the
			// repository holds.
			res.Repositories[0].Base = strings.Repeat("ab", 20)
			writeResult(t, d, res)
		}, "which is not among the last 200 commits of main"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDelivery(t, nil)
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := changeManifest(protocol.Repository{Name: "svc", URL: remote, Branch: "main"})
			res := d.work(t, m)
			tc.tamper(t, d, remote, res)
			out := d.await(t, activity.DeliveryOf(m, nil))
			r := out.Result.Repositories[0]
			if r.Status != "failed" || !strings.Contains(r.Error, tc.want) || r.PullRequest != nil {
				t.Fatalf("repository %s %q, pull request %+v; want failed %q", r.Status, r.Error, r.PullRequest, tc.want)
			}
			if got := branchAt(t, remote); got != "" {
				t.Fatalf("pushed %s", got)
			}
		})
	}
}

func writeResult(t *testing.T, d *delivery, res protocol.Result) {
	t.Helper()
	data, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.ws, protocol.Dir, protocol.ResultFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// inFlight wraps a forge and counts the pull requests being opened at
// once: each waits (up to a second) until want of them are open, as a
// forge's round trip keeps a serial worker waiting.
type inFlight struct {
	forge.Forge
	want int

	mu       sync.Mutex
	now, max int
}

func (f *inFlight) CreatePullRequest(ctx context.Context, req forge.PullRequestRequest) (*forge.PullRequest, error) {
	f.mu.Lock()
	f.now++
	f.max = max(f.max, f.now)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	}()
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		enough := f.max >= f.want
		f.mu.Unlock()
		if enough {
			break
		}
	}
	return f.Forge.CreatePullRequest(ctx, req)
}

// A group's changes are proposed Manifest.Parallel at once, so four pull
// requests are open at the forge together; without it, one after
// another. Either way every repository gets its pull request.
func TestDeliverProposesInParallel(t *testing.T) {
	for _, parallel := range []int{0, 4} {
		t.Run(fmt.Sprintf("parallel %d", parallel), func(t *testing.T) {
			var f *inFlight
			d := newDelivery(t, func(lf forge.Forge) forge.Forge {
				f = &inFlight{Forge: lf, want: max(parallel, 1)}
				return f
			})
			parent := t.TempDir()
			var repos []protocol.Repository
			for i := range 6 {
				name := fmt.Sprintf("svc-%d", i)
				repos = append(repos, protocol.Repository{Name: name, URL: gittest.NewRemote(t, parent, name, map[string]string{"README.md": "# " + name + "\n"}), Branch: "main"})
			}
			m := changeManifest(repos...)
			m.Parallel = parallel
			d.work(t, m)
			out := d.await(t, activity.DeliveryOf(m, nil))
			for _, r := range out.Result.Repositories {
				if r.Status != "success" || r.PullRequest == nil {
					t.Errorf("%s: %s, pull request %v (%s)", r.Name, r.Status, r.PullRequest, r.Error)
				}
			}
			if want := max(parallel, 1); f.max != want {
				t.Errorf("%d pull requests opened at once, want %d", f.max, want)
			}
		})
	}
}

// copies are the worker's copies of repositories, as its gateway keeps
// them, by sandbox and repository.
type copies map[[2]string]*git.Scratch

func (c copies) Copy(id, name string) (*git.Scratch, bool) {
	s, ok := c[[2]string{id, name}]
	return s, ok
}

// A change is proposed from the worker's copy of the repository its
// sandbox cloned (through the gateway), on the branch that copy holds:
// what the work started from, as the worker read it, not what the
// repository's HEAD names by the time the work is done.
func TestDeliverProposesFromTheWorkersCopy(t *testing.T) {
	d := newDelivery(t, nil)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	main := strings.TrimSpace(gittest.Run(t, remote, "rev-parse", "main"))
	copied, err := d.a.Git.CloneBare(t.Context(), remote, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { copied.Close() })
	d.a.Copies = copies{{d.ref.ID, "svc"}: copied}
	m := changeManifest(protocol.Repository{Name: "svc", URL: remote})
	d.work(t, m)
	// Meanwhile the repository's HEAD moves to a branch the work never
	// saw, whose history the base is not in.
	work := t.TempDir()
	gittest.Run(t, work, "init", "--quiet", "-b", "develop")
	gittest.Run(t, work, "commit", "--quiet", "--allow-empty", "-m", "unrelated")
	gittest.Run(t, work, "push", "--quiet", remote, "develop")
	gittest.Run(t, remote, "symbolic-ref", "HEAD", "refs/heads/develop")

	out := d.await(t, activity.DeliveryOf(m, nil))
	r := out.Result.Repositories[0]
	if out.Status.Phase != protocol.PhaseComplete || r.PullRequest == nil {
		t.Fatalf("phase %s, repository %s %q", out.Status.Phase, r.Status, r.Error)
	}
	if got := gittest.Run(t, remote, "log", "-1", "--format=%P", branchAt(t, remote)); strings.TrimSpace(got) != main {
		t.Errorf("the change's parent is %s, want main's %s", got, main)
	}
	if rec := gittest.Run(t, remote, "show", local.RecordRefPrefix+deliveredBranch+":"+local.RecordFile); !strings.Contains(rec, `"base": "main"`) {
		t.Errorf("the pull request does not go to main, the branch the work cloned:\n%s", rec)
	}
}
