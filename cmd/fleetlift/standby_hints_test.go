package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/demo"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

// Two reconciler replicas behind one Service, as deploy/ runs them: a
// push delivered to the one that does not lead still wakes the one that
// does, through the lease, long before its next poll (an hour here).
func TestStandbyForwardsWebhookHintsToTheLeader(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	targets := demoTargetsForTest(t, root)
	campaigns := filepath.Join(root, "campaigns")
	if err := demo.CampaignsRepo(ctx, campaigns); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(root, "state")
	addr, c, _ := serverForTest(t, stateDir)
	t.Setenv("FLEETLIFT_WEBHOOK_SECRET", "s3cret")
	const forgeURL = "https://git.example.com/acme/campaigns.git"
	replica := func() (*upProcess, string) {
		hook := freeAddr(t)
		p := startCommand(t, "reconcile", "--repo", campaigns, "--temporal-address", addr, "--state-dir", stateDir,
			"--interval", "1h", "--watch=false", "--leader-elect", "--webhook-listen", hook, "--webhook-repo", forgeURL)
		waitListening(t, hook)
		return p, hook
	}
	a, hookA := replica()
	b, hookB := replica()
	var standby string
	for deadline := time.Now().Add(time.Minute); standby == ""; time.Sleep(100 * time.Millisecond) {
		switch {
		case strings.Contains(a.out.String(), "acquired leadership"):
			standby = hookB
		case strings.Contains(b.out.String(), "acquired leadership"):
			standby = hookA
		case time.Now().After(deadline):
			t.Fatalf("no replica leads:\n%s\n%s", a.out.String(), b.out.String())
		}
	}
	// The leader's first pass has run (nothing to start yet) before the
	// campaign is committed: only a hint makes it read Git again.
	time.Sleep(2 * time.Second)
	if err := os.WriteFile(filepath.Join(campaigns, "campaigns", "go-version.yaml"), []byte(demo.Campaign(targets)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := demo.Git(ctx, campaigns, demo.Author, "add", "."); err != nil {
		t.Fatal(err)
	}
	if err := demo.Git(ctx, campaigns, demo.Author, "commit", "-q", "-m", "Add a campaign"); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000","repository":{"full_name":"acme/campaigns","clone_url":"` + forgeURL + `"}}`)
	req, _ := http.NewRequest("POST", "http://"+standby+"/webhook", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "d-1")
	req.Header.Set("X-Hub-Signature-256", "sha256="+webhook.Sign([]byte("s3cret"), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery to the standby: status %d, want 202", resp.StatusCode)
	}
	// The lease hands hints over with its holder's next renewal, every
	// TTL/3 (5 s).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := c.DescribeWorkflowExecution(ctx, "campaign/demo-go-version", ""); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery to the standby did not wake the leader\n%s\n%s", a.out.String(), b.out.String())
		}
	}
}
