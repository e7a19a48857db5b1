package workflow

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/status"
)

// LeaseWorkflowID is the id of the reconciler's lease: the replica whose
// Lease workflow runs under this id leads (package leader).
const LeaseWorkflowID = "fleetlift/reconciler-lease"

// LeaseTaskQueue is the task queue of the Lease workflow. The reconciler
// replicas serve it themselves (leader.Serve), so that they elect a
// leader whether or not any fleetlift worker runs.
const LeaseTaskQueue = "fleetlift-leases"

// Update and query names of the Lease workflow.
const (
	// UpdateRenewLease extends the lease by its TTL; only the holder may.
	UpdateRenewLease = "renew"
	// UpdateReleaseLease ends the lease at once; only the holder may.
	UpdateReleaseLease = "release"
	// QueryLeaseHolder answers with the LeaseState.
	QueryLeaseHolder = "holder"
	// SignalLeaseHints hands the holder LeaseHints that reached another
	// replica: its next renewal returns them.
	SignalLeaseHints = "hints"
)

// LeaseRejected is the type of the application error a renewal or a
// release is rejected with: it came from another holder, or the lease has
// expired or been released.
const LeaseRejected = "LeaseRejected"

// MemoLeaseHolder is the memo key a starter records the holder under, so
// that others can tell who leads from a describe call alone.
const MemoLeaseHolder = "fleetlift.lease.holder"

// DefaultRenewalsPerRun is how many renewals one run of a lease accepts
// before it continues as new (about five events each).
const DefaultRenewalsPerRun = 1000

// LeaseInput is a Lease workflow's input. Expires and Renewals are zero
// on the first run and carry the lease across continue-as-new.
type LeaseInput struct {
	Holder string
	TTL    time.Duration
	// Expires is when the lease ends unless renewed; zero means TTL after
	// the first run starts.
	Expires  time.Time
	Renewals int
	// RenewalsPerRun bounds the history: after that many renewals the
	// lease continues as new (default DefaultRenewalsPerRun).
	RenewalsPerRun int
	// Hints are those not yet handed to the holder (continue-as-new).
	Hints *LeaseHints `json:",omitempty"`
}

// LeaseHints are webhook hints a replica that does not lead received,
// for the one that does: the campaigns repository changed, and pull
// requests changed in these repositories (webhook keys, host/owner/name).
type LeaseHints struct {
	Repository   bool     `json:"repository,omitempty"`
	PullRequests []string `json:"pull_requests,omitempty"`
	// Pushes are the branches pushed to in those repositories.
	Pushes []status.PushHint `json:"pushes,omitempty"`
}

// MaxLeaseHintKeys bounds the repositories a lease holds hints for until
// the next renewal; more are dropped (they are hints: the holder's next
// poll or follower pass reads them anyway).
const MaxLeaseHintKeys = 1000

// Empty reports whether h hints at nothing.
func (h LeaseHints) Empty() bool {
	return !h.Repository && len(h.PullRequests) == 0 && len(h.Pushes) == 0
}

// Merge adds h to l, each key once, within MaxLeaseHintKeys; it reports
// how many keys it dropped.
func (l *LeaseHints) Merge(h LeaseHints) (dropped int) {
	l.Repository = l.Repository || h.Repository
	return addOnce(&l.PullRequests, h.PullRequests) + addOnce(&l.Pushes, h.Pushes)
}

// addOnce appends to *dst each of add it does not hold, within
// MaxLeaseHintKeys; it reports how many it dropped.
func addOnce[T comparable](dst *[]T, add []T) (dropped int) {
	for _, k := range add {
		switch {
		case slices.Contains(*dst, k):
		case len(*dst) >= MaxLeaseHintKeys:
			dropped++
		default:
			*dst = append(*dst, k)
		}
	}
	return dropped
}

// LeaseRenewal is the argument of UpdateRenewLease and
// UpdateReleaseLease: who renews or releases.
type LeaseRenewal struct {
	Holder string `json:"holder"`
}

// LeaseState answers QueryLeaseHolder and both updates, and is the
// Lease workflow's result.
type LeaseState struct {
	Holder  string    `json:"holder"`
	Expires time.Time `json:"expires"`
	// Renewals counts renewals over all runs of this lease.
	Renewals int `json:"renewals"`
	// Released is set when the holder gave the lease up (rather than let
	// it expire).
	Released bool `json:"released,omitempty"`
	// Hints, in a renewal's answer alone, are the hints signalled since
	// the last renewal (SignalLeaseHints).
	Hints *LeaseHints `json:"hints,omitempty"`
}

// Lease holds a lease for in.Holder until in.TTL passes without a
// renewal from the holder, or the holder releases it; then it completes
// and the id is free for the next holder. The deadline counts from when
// the workflow handles a renewal, which is never earlier than when the
// holder sent it.
func Lease(ctx workflow.Context, in LeaseInput) (LeaseState, error) {
	if in.Holder == "" || in.TTL <= 0 {
		return LeaseState{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("lease needs a holder and a positive TTL, got holder %q, TTL %s", in.Holder, in.TTL), "InvalidLease", nil)
	}
	l := &lease{in: in, st: LeaseState{Holder: in.Holder, Expires: in.Expires, Renewals: in.Renewals}}
	if in.Hints != nil {
		l.hints = *in.Hints
	}
	if l.st.Expires.IsZero() {
		l.st.Expires = workflow.Now(ctx).Add(in.TTL)
	}
	if err := l.register(ctx); err != nil {
		return LeaseState{}, err
	}
	hints := workflow.GetSignalChannel(ctx, SignalLeaseHints)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var h LeaseHints
			hints.Receive(ctx, &h)
			l.receive(ctx, h)
		}
	})
	perRun := in.RenewalsPerRun
	if perRun <= 0 {
		perRun = DefaultRenewalsPerRun
	}
	for {
		now := workflow.Now(ctx)
		if l.st.Released || !now.Before(l.st.Expires) {
			return l.st, nil
		}
		if l.runRenewals >= perRun || l.runSignals >= perRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			// The handlers never block, so none is left unfinished;
			// hints signalled but not yet received go along.
			for {
				var h LeaseHints
				if !hints.ReceiveAsync(&h) {
					break
				}
				l.receive(ctx, h)
			}
			next := in
			next.Expires, next.Renewals = l.st.Expires, l.st.Renewals
			next.Hints = nil
			if !l.hints.Empty() {
				next.Hints = &l.hints
			}
			return LeaseState{}, workflow.NewContinueAsNewError(ctx, Lease, next)
		}
		// Sleep until the deadline as it stands. A renewal moves the
		// deadline without waking the loop: the timer fires, and the loop
		// sleeps again for the rest. That costs one timer per TTL rather
		// than one per renewal.
		if _, err := workflow.AwaitWithTimeout(ctx, l.st.Expires.Sub(now), func() bool {
			return l.st.Released || l.runRenewals >= perRun || l.runSignals >= perRun
		}); err != nil {
			return l.st, err
		}
	}
}

type lease struct {
	in          LeaseInput
	st          LeaseState
	runRenewals int
	// hints wait for the holder's next renewal; runSignals counts the
	// hint signals of this run, which bound its history as renewals do.
	hints      LeaseHints
	runSignals int
}

// receive keeps hints h for the holder.
func (l *lease) receive(ctx workflow.Context, h LeaseHints) {
	l.runSignals++
	if n := l.hints.Merge(h); n > 0 {
		workflow.GetLogger(ctx).Warn("lease hints dropped: too many repositories before the next renewal", "dropped", n, "max", MaxLeaseHintKeys)
	}
}

func (l *lease) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, QueryLeaseHolder, func() (LeaseState, error) { return l.st, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateRenewLease, l.renew,
		workflow.UpdateHandlerOptions{Validator: l.validate}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, UpdateReleaseLease, l.release,
		workflow.UpdateHandlerOptions{Validator: l.validate})
}

// validate accepts a renewal or release only from the holder of a lease
// that has neither expired nor been released. A rejected update leaves
// no trace in the history.
func (l *lease) validate(ctx workflow.Context, r LeaseRenewal) error {
	switch {
	case r.Holder != l.st.Holder:
		return temporal.NewApplicationError(fmt.Sprintf("lease is held by %q, not %q", l.st.Holder, r.Holder), LeaseRejected)
	case l.st.Released:
		return temporal.NewApplicationError(fmt.Sprintf("lease of %q was released", l.st.Holder), LeaseRejected)
	case !workflow.Now(ctx).Before(l.st.Expires):
		return temporal.NewApplicationError(fmt.Sprintf("lease of %q expired at %s", l.st.Holder, l.st.Expires.Format(time.RFC3339Nano)), LeaseRejected)
	}
	return nil
}

func (l *lease) renew(ctx workflow.Context, _ LeaseRenewal) (LeaseState, error) {
	l.st.Expires = workflow.Now(ctx).Add(l.in.TTL)
	l.st.Renewals++
	l.runRenewals++
	out := l.st
	if !l.hints.Empty() {
		h := l.hints
		out.Hints, l.hints = &h, LeaseHints{}
	}
	return out, nil
}

func (l *lease) release(workflow.Context, LeaseRenewal) (LeaseState, error) {
	l.st.Released = true
	return l.st, nil
}
