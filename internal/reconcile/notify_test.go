package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/notify"
	"github.com/fleetlift/fleetlift/internal/reconcile"
	"github.com/fleetlift/fleetlift/internal/state"
)

// notifyConfig is a fleetlift.yaml with notifications.
func notifyConfig(notifications string) string {
	return config("main", false) + "notifications:\n" + notifications
}

// fakeNotifier records what it is handed, and fails while fail is set.
type fakeNotifier struct {
	mu     sync.Mutex
	handed []notify.Delivery
	fail   bool
}

func (f *fakeNotifier) Deliver(_ context.Context, ds []notify.Delivery) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("temporal is down")
	}
	f.handed = append(f.handed, ds...)
	return nil
}

func (f *fakeNotifier) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, d := range f.handed {
		out = append(out, fmt.Sprintf("%s:%s:%s", d.Service, d.Message.Campaign, d.Message.Event))
	}
	f.handed = nil
	slices.Sort(out)
	return out
}

// Each event a subscription is on reaches each of its services once,
// however many passes find it due; a new run or a new reason to pause
// is a new message, a campaign the subscription's globs leave out gets
// none, and a pass whose hand-over fails hands over again.
func TestNotificationsAreHandedOverOncePerEvent(t *testing.T) {
	h := newHarness()
	n := &fakeNotifier{}
	h.r.Notifier = n
	rev := revision(t, "c1", files{
		"fleetlift.yaml": notifyConfig(`  templates:
    short: "{{.Campaign}} {{.Event}}: {{.Message}}"
  subscriptions:
    - on: [paused, failed, completed]
      to: [team-slack, audit]
      campaigns: ["pay-*"]
      template: short
    - on: [done]
      to: [audit]
`),
		"campaigns/pay-a.yaml": camp{id: "pay-a"}.yaml(),
		"campaigns/pay-b.yaml": camp{id: "pay-b"}.yaml(),
		"campaigns/other.yaml": camp{id: "other"}.yaml(),
	})
	h.src.push(rev)
	a := recorded(t, definition(t, rev, "pay-a"), "c1", 1, state.PhasePaused)
	a.Message = "2 of 4 repositories failed"
	b := recorded(t, definition(t, rev, "pay-b"), "c1", 1, state.PhaseRunning)
	o := recorded(t, definition(t, rev, "other"), "c1", 1, state.PhaseCompleted)
	for _, c := range []state.Campaign{a, b, o} {
		h.put(t, c)
	}
	h.once(t)
	if got, want := n.take(), []string{"audit:other:done", "audit:pay-a:paused", "team-slack:pay-a:paused"}; !slices.Equal(got, want) {
		t.Fatalf("first pass handed over %v; want %v", got, want)
	}
	h.once(t)
	if got := n.take(); len(got) != 0 {
		t.Errorf("a second pass handed over %v again", got)
	}

	// Paused again, later, for another reason: told again.
	a.Message = "3 of 4 repositories failed"
	h.put(t, a)
	h.once(t)
	if got, want := n.take(), []string{"audit:pay-a:paused", "team-slack:pay-a:paused"}; !slices.Equal(got, want) {
		t.Errorf("paused for another reason: %v; want %v", got, want)
	}

	// pay-b ends with failures while the hand-over fails: the next pass
	// hands it over.
	n.fail = true
	b.Phase, b.Message = state.PhaseCompletedWithFailures, "1 of 2 repositories failed, 1 completed"
	h.put(t, b)
	h.once(t)
	n.fail = false
	h.once(t)
	if got, want := n.take(), []string{"audit:pay-b:done", "audit:pay-b:failed", "team-slack:pay-b:failed"}; !slices.Equal(got, want) {
		t.Errorf("after a failed hand-over: %v; want %v", got, want)
	}

	// fleetlift retry: a new run of the same generation that ends
	// completed is new news.
	b.RunID, b.Phase, b.Message = "run-1-retry", state.PhaseCompleted, ""
	h.put(t, b)
	h.once(t)
	if got, want := n.take(), []string{"audit:pay-b:completed", "audit:pay-b:done", "team-slack:pay-b:completed"}; !slices.Equal(got, want) {
		t.Errorf("after a retry: %v; want %v", got, want)
	}
}

// What a message says: the subscription's template on the event, the
// built-in line without one; and its key does not move while the event
// holds (a result awaiting approval is one message whatever the run's
// phase does meanwhile).
func TestNotificationsSayWhatHappened(t *testing.T) {
	rev := revision(t, "c1", files{
		"fleetlift.yaml": notifyConfig(`  templates:
    review: "{{.Target}} of {{.Campaign}} awaits approval ({{.ResultDigest}})"
  subscriptions:
    - on: [awaiting_approval]
      to: [reviewers]
      template: review
    - on: [awaiting_approval]
      to: [audit]
`),
		"campaigns/pay.yaml": camp{id: "pay"}.yaml(),
	})
	c := recorded(t, definition(t, rev, "pay"), "c1", 3, state.PhaseAwaitingApproval)
	c.PendingApprovals = []state.PendingApproval{{Target: "pay/ledger", ResultDigest: "sha256:abc"}}
	ds, errs := reconcile.Notifications(rev.Config, []state.Campaign{c})
	if len(errs) > 0 || len(ds) != 2 {
		t.Fatalf("%d messages, errors %v; want 2", len(ds), errs)
	}
	slices.SortFunc(ds, func(a, b notify.Delivery) int { return strings.Compare(a.Service, b.Service) })
	if got := ds[1].Message.Text; got != "pay/ledger of pay awaits approval (sha256:abc)" {
		t.Errorf("templated: %q", got)
	}
	if got := ds[0].Message.Text; got != "fleetlift: campaign/pay (generation 3) has a result awaiting approval for pay/ledger. fleetlift status pay" {
		t.Errorf("built-in: %q", got)
	}
	c.Phase = state.PhaseRunning
	again, _ := reconcile.Notifications(rev.Config, []state.Campaign{c})
	slices.SortFunc(again, func(a, b notify.Delivery) int { return strings.Compare(a.Service, b.Service) })
	if len(again) != 2 || again[0].Message.Key != ds[0].Message.Key || ds[0].Message.Key == ds[1].Message.Key {
		t.Errorf("keys %v then %v; want the same two, one per service", keys(ds), keys(again))
	}
	// Another result of the same task is another message.
	c.PendingApprovals[0].ResultDigest = "sha256:def"
	other, _ := reconcile.Notifications(rev.Config, []state.Campaign{c})
	if len(other) != 2 || slices.Contains(keys(ds), other[0].Message.Key) {
		t.Errorf("another result: keys %v, before %v", keys(other), keys(ds))
	}
}

func keys(ds []notify.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Message.Key)
	}
	return out
}
