package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

// TestDemo is the README's first command: the whole loop on this
// machine, from a commit of a campaign to branches on the targets and the
// status mirror.
func TestDemo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	out, code := runCLI(t, "demo", "--dir", dir, "--timeout", "3m")
	if code != 0 {
		t.Fatalf("demo exited %d:\n%s", code, out)
	}
	for _, want := range []string{
		"awaiting approval: demo-go-version/payments",
		"campaign completed",
		"payments.git: ", "refs/heads/fleetlift/go-version/demo-go-version",
		"| Campaign | completed | 1 | 3 / 0 / 3 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"payments", "ledger", "search"} {
		b, err := exec.Command("git", "-C", filepath.Join(dir, "targets", name+".git"), "show", "fleetlift/go-version/demo-go-version:go.mod").Output()
		if err != nil || !strings.Contains(string(b), "go 1.26") {
			t.Errorf("%s: the pushed branch's go.mod = %q (%v), want go 1.26", name, b, err)
		}
	}
	// Temporal's own clients find the demo's campaign by its search
	// attributes, as the Temporal UI and CLI would.
	srv := startServer(t, freeAddr(t), filepath.Join(dir, "state"))
	c, err := dialServer(srv)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := waitForList(t, c, `FleetliftKind = "Campaign"`, 1); !slices.Equal(got, []string{"campaign/demo-go-version"}) {
		t.Errorf(`FleetliftKind = "Campaign" finds %v, want the demo's campaign`, got)
	}
	if got := waitForList(t, c, `FleetliftCampaign = "demo-go-version" AND FleetliftPhase = "completed"`, 4); len(got) != 4 {
		t.Errorf("the demo's campaign and its three repositories' tasks, completed: %v", got)
	}
}

// upProcess is `fleetlift up` running in the test, stoppable like Ctrl-C.
type upProcess struct {
	cancel context.CancelFunc
	done   chan int
	out    *syncbuf.Buffer
}

func startUp(t *testing.T, args ...string) *upProcess {
	t.Helper()
	return startCommand(t, "up", args...)
}

// startCommand runs fleetlift's command name with args in this process
// until the test ends.
func startCommand(t *testing.T, name string, args ...string) *upProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &upProcess{cancel: cancel, done: make(chan int, 1), out: &syncbuf.Buffer{}}
	go func() {
		root := newRootCmd(p.out, p.out)
		root.SetArgs(append([]string{name}, args...))
		if err := root.ExecuteContext(ctx); err != nil {
			fmt.Fprintln(p.out, "fleetlift:", err)
			p.done <- 1
			return
		}
		p.done <- 0
	}()
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *upProcess) stop(t *testing.T) {
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("fleetlift up did not stop:\n%s", p.out.String())
	}
	p.done <- 0 // for a second stop
}

// TestUpRestartMidFlow: the local forge with commit-based approvals, and
// the reconciler restarted while a campaign awaits approval and while the
// approval is committed. It ends with one run, one task per repository,
// one branch per repository, and the approvals carried out.
func TestUpRestartMidFlow(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	targets := demoTargetsForTest(t, root)
	campaigns := filepath.Join(root, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(root, "state")
	addr, c, reader := serverForTest(t, stateDir)
	upArgs := []string{"--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir, "--interval", "1s"}

	up := startUp(t, upArgs...)
	write := func(name, body, who, msg string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(campaigns, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := demo.Git(ctx, campaigns, who, "add", name); err != nil {
			t.Fatal(err)
		}
		if err := demo.Git(ctx, campaigns, who, "commit", "-q", "-m", msg); err != nil {
			t.Fatal(err)
		}
	}
	write("campaigns/go-version.yaml", demo.Campaign(targets), demo.Author, "Raise the go directive")

	wait := func(what string, cond func(state.Campaign) bool) state.Campaign {
		t.Helper()
		var got state.Campaign
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) {
			rec, err := reader.Get(ctx, "demo-go-version")
			if err == nil && cond(rec) {
				return rec
			}
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				t.Fatal(err)
			}
			got = rec
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("%s: gave up; last state %+v\n%s", what, got, up.out.String())
		return got
	}
	rec := wait("awaiting approval", func(c state.Campaign) bool { return len(c.PendingApprovals) == 3 })

	// Restart while the tasks wait; then commit the approvals while no
	// reconciler runs: nothing is lost, the next one carries them out.
	up.stop(t)
	up = startUp(t, upArgs...)
	up.stop(t)
	for _, p := range rec.PendingApprovals {
		// The approver, and a record by someone who may not approve.
		write("approvals/"+strings.ReplaceAll(p.Target, "/", "-")+".yaml",
			fmt.Sprintf("version: 1\nkind: Approval\ntarget: %s\naction: approve\nresult_digest: %s\nby: %s\n", p.Target, p.ResultDigest, demo.Approver),
			demo.Approver, "Approve "+p.Target)
	}
	write("approvals/mallory.yaml", fmt.Sprintf("version: 1\nkind: Approval\ntarget: %s\naction: reject\nresult_digest: %s\nby: mallory\n",
		rec.PendingApprovals[0].Target, rec.PendingApprovals[0].ResultDigest), "mallory", "Reject it")
	up = startUp(t, upArgs...)
	done := wait("completed", func(c state.Campaign) bool { return c.Phase.Done() })
	if done.Phase != state.PhaseCompleted {
		t.Fatalf("campaign %s, want completed:\n%s", done.Phase, up.out.String())
	}
	for _, r := range done.Repos {
		if r.Status != state.RepoCompleted || r.PullRequestURL == "" {
			t.Errorf("%s: %s, pull request %q; want completed with a branch (mallory's reject must not count)\n%s", r.Name, r.Status, r.PullRequestURL, unitErrors(t, c, "campaign/demo-go-version"))
		}
	}

	// The approver's records count as carried out (the plan and the
	// status mirror say so); mallory's does not.
	applied := strings.Join(done.AppliedApprovals, " ")
	if len(done.AppliedApprovals) != 3 || strings.Contains(applied, "mallory") {
		t.Errorf("approval records carried out: %q, want the approver's three", done.AppliedApprovals)
	}

	// Exactly one campaign run and one task per repository, however many
	// reconcilers came and went.
	count := func(query string) int {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: devserver.Namespace, Query: query})
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Executions)
	}
	if n := count(`WorkflowType = "Campaign"`); n != 1 {
		t.Errorf("%d campaign runs, want 1", n)
	}
	if n := count(`WorkflowType = "Task"`); n != 3 {
		t.Errorf("%d task runs, want 3", n)
	}
	for _, tgt := range targets {
		b, err := exec.Command("git", "-C", tgt, "for-each-ref", "--format=%(refname)", "refs/heads/fleetlift/").Output()
		if err != nil || strings.Count(string(b), "\n") != 1 {
			t.Errorf("%s: branches %q (%v), want exactly one", tgt, b, err)
		}
	}
	// The plan of the campaigns repository shows why mallory's record did
	// not count.
	out, _ := runCLI(t, "plan", "--repo", campaigns, "--state", "none")
	if !strings.Contains(out, "mallory") || !strings.Contains(out, "may not approve") {
		t.Errorf("plan does not say why mallory's record is ignored:\n%s", out)
	}
}

// TestDemoLeavesOtherDirectoriesAlone: --dir pointing at a directory the
// demo did not make is refused, not emptied.
func TestDemoLeavesOtherDirectoriesAlone(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious.txt")
	if err := os.WriteFile(keep, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "demo", "--dir", dir)
	if code == 0 || !strings.Contains(out, "was not made by `fleetlift demo`") {
		t.Errorf("demo in a foreign directory: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("the demo removed a file it did not make: %v", err)
	}
}

// TestUpWebhookWakesTheLoop: with an hour between polls and no file
// watching, a verified push delivery makes the reconciler read Git at
// once; a delivery with a wrong signature does not.
func TestUpWebhookWakesTheLoop(t *testing.T) {
	ctx := context.Background()
	h := newHookedCampaigns(t)
	addr, c, reader := serverForTest(t, h.stateDir)
	hook := freeAddr(t)
	up := startUp(t, h.args(addr, hook)...)
	waitListening(t, hook)

	h.commitCampaign(t)
	send := func(id, sig string) int { return h.deliverPush(t, hook, id, sig) }
	body := h.pushBody()
	if code := send("d-1", webhook.Sign([]byte("wrong"), body)); code != http.StatusUnauthorized {
		t.Errorf("forged delivery: status %d, want 401", code)
	}
	time.Sleep(2 * time.Second)
	if _, err := reader.Get(ctx, "demo-go-version"); err == nil {
		t.Fatal("a forged delivery made the reconciler start the campaign")
	}
	if code := send("d-2", webhook.Sign([]byte("s3cret"), body)); code != http.StatusAccepted {
		t.Fatalf("signed delivery: status %d, want 202\n%s", code, up.out.String())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := reader.Get(ctx, "demo-go-version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the signed delivery did not wake the reconciler\n%s", up.out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The campaign's agents work until they await approval; the test
	// ends once they do, so that nothing is still writing its sandbox
	// when up stops and the state directory is removed.
	awaitApprovals(t, c, "campaign/demo-go-version")
}

// awaitApprovals waits until every unit of campaign id awaits approval:
// three minutes at most, for a machine busy with other suites (a fresh
// clone's CI once saw two of three there after one), then it says where
// each unit is.
func awaitApprovals(t *testing.T, c client.Client, id string) {
	t.Helper()
	ctx := context.Background()
	rd := runReader(c, "")
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st, err := rd.Status(ctx, id)
		waiting := 0
		var phases []string
		if err == nil && st.Campaign != nil {
			for _, u := range st.Campaign.Units {
				phase, ok := rd.UnitPhase(ctx, u)
				if ok && phase == status.TaskAwaitingApproval {
					waiting++
				}
				phases = append(phases, fmt.Sprintf("%s: %v (read: %v, error: %q)", u.Key, phase, ok, u.Error))
			}
		}
		if err == nil && st.Campaign != nil && len(st.Campaign.Units) > 0 && waiting == len(st.Campaign.Units) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d units await approval after three minutes (%v); the units: %s", id, waiting, err, strings.Join(phases, "; "))
		}
	}
}

// demoTargetsForTest makes the demo's target repositories under root.
func demoTargetsForTest(t *testing.T, root string) []string {
	t.Helper()
	targets, err := demo.Targets(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	return targets
}

// serverForTest starts an embedded server keeping its state in stateDir,
// for as long as the test runs, and returns its address, a client and a
// reader of the runs it records.
func serverForTest(t *testing.T, stateDir string) (string, client.Client, *statetemporal.Reader) {
	t.Helper()
	addr := freeAddr(t)
	c, err := dialServer(startServer(t, addr, stateDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return addr, c, &statetemporal.Reader{Client: c, Namespace: devserver.Namespace}
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if listening(addr) {
			return
		}
	}
	t.Fatalf("nothing listens at %s", addr)
}

// unitErrors says why a campaign's units failed, for a test's failure
// message.
func unitErrors(t *testing.T, c client.Client, workflowID string) string {
	t.Helper()
	var st status.CampaignState
	if err := c.GetWorkflow(context.Background(), workflowID, "").Get(context.Background(), &st); err != nil {
		return "(no result: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, u := range st.Units {
		if u.Error != "" {
			fmt.Fprintf(&b, "%s: %s\n", u.Key, u.Error)
		}
	}
	return b.String()
}

// hookedCampaigns is a demo campaigns repository that a reconciler
// polls only hourly, told of pushes by webhook deliveries for the forge
// URL forgeURL.
type hookedCampaigns struct {
	campaigns, stateDir string
	targets             []string
}

const hookedForgeURL = "https://git.example.com/acme/campaigns.git"

func newHookedCampaigns(t *testing.T) *hookedCampaigns {
	t.Helper()
	root := t.TempDir()
	h := &hookedCampaigns{campaigns: filepath.Join(root, "campaigns"), stateDir: filepath.Join(root, "state"), targets: demoTargetsForTest(t, root)}
	if err := demo.CampaignsRepo(context.Background(), h.campaigns); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLEETLIFT_WEBHOOK_SECRET", "s3cret")
	return h
}

// args are a reconciler's flags: the server at addr, webhooks at hook.
func (h *hookedCampaigns) args(addr, hook string, more ...string) []string {
	return append([]string{"--repo", h.campaigns, "--temporal-address", addr, "--state-dir", h.stateDir,
		"--interval", "1h", "--watch=false", "--webhook-listen", hook, "--webhook-repo", hookedForgeURL}, more...)
}

// commitCampaign commits the demo campaign to the repository.
func (h *hookedCampaigns) commitCampaign(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(h.campaigns, "campaigns", "go-version.yaml"), []byte(demo.Campaign(h.targets)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := demo.Git(ctx, h.campaigns, demo.Author, "add", "."); err != nil {
		t.Fatal(err)
	}
	if err := demo.Git(ctx, h.campaigns, demo.Author, "commit", "-q", "-m", "Add a campaign"); err != nil {
		t.Fatal(err)
	}
}

func (h *hookedCampaigns) pushBody() []byte {
	return []byte(`{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000","repository":{"full_name":"acme/campaigns","clone_url":"` + hookedForgeURL + `"}}`)
}

// deliverPush delivers a push to the campaigns repository at hook, as
// GitHub would, with delivery id and signature sig; it returns the status.
func (h *hookedCampaigns) deliverPush(t *testing.T, hook, id, sig string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+hook+"/webhook", bytes.NewReader(h.pushBody()))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
