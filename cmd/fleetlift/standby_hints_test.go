package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/webhook"
)

// Two reconciler replicas behind one Service, as deploy/ runs them: a
// push delivered to the one that does not lead still wakes the one that
// does, through the lease, long before its next poll (an hour here).
func TestStandbyForwardsWebhookHintsToTheLeader(t *testing.T) {
	ctx := context.Background()
	h := newHookedCampaigns(t)
	addr, c, _ := serverForTest(t, h.stateDir)
	replica := func() (*upProcess, string) {
		hook := freeAddr(t)
		p := startCommand(t, "reconcile", h.args(addr, hook, "--leader-elect")...)
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
	h.commitCampaign(t)
	if code := h.deliverPush(t, standby, "d-1", webhook.Sign([]byte("s3cret"), h.pushBody())); code != http.StatusAccepted {
		t.Fatalf("delivery to the standby: status %d, want 202", code)
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
