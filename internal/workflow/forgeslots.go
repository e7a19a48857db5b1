package workflow

import (
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ForgeSlots is one forge account's bound on git transfers at once
// (parallel_clones): the clones workers make for their sandboxes and the
// branches they push, counted together for every worker and replica
// that transfers with the account. A transfer asks for a slot
// (UpdateForgeSlot) and starts once the update completes; it gives the
// slot back (SignalForgeRelease) when it ends. Its workflow id names the
// forge and the account (dispatch.ForgeSlotsID).
//
// Slots are granted in the order asked while fewer than Slots are held.
// A slot not given back within Lease (its worker died mid-transfer) is
// taken back, so a lost worker holds no slot for good.
//
// It ends once nothing is held or asked for a minute (the next ask
// starts it again), and continues as new after GrantsPerRun grants,
// carrying the slots held.
func ForgeSlots(ctx workflow.Context, in ForgeSlotsInput) (ForgeSlotsState, error) {
	if in.Slots <= 0 {
		return ForgeSlotsState{}, temporal.NewNonRetryableApplicationError("forge slots "+in.Key+" has no slots", "InvalidForgeSlots", nil)
	}
	s := &forgeSlots{in: in, held: map[string]ForgeSlot{}, given: map[string]bool{}}
	for _, h := range in.Held {
		s.held[h.ID] = h
	}
	if err := s.register(ctx); err != nil {
		return ForgeSlotsState{}, err
	}
	perRun := in.GrantsPerRun
	if perRun <= 0 {
		perRun = 500
	}
	for {
		now := workflow.Now(ctx)
		s.expire(ctx, now)
		for len(s.waiting) > 0 && len(s.held) < in.Slots {
			w := s.waiting[0]
			s.waiting = s.waiting[1:]
			w.slot = ForgeSlot{ID: w.id, Caller: w.caller, Until: now.Add(s.lease())}
			w.granted = true
			s.held[w.id] = w.slot
			s.runGrants++
			s.total++
		}
		if len(s.waiting) == 0 && (s.runGrants >= perRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()) {
			drained, err := s.drain(ctx)
			if err != nil {
				return s.state(ctx), err
			}
			if drained {
				next := s.in
				next.Held, next.Total = s.heldList(), s.total
				return ForgeSlotsState{}, workflow.NewContinueAsNewError(ctx, ForgeSlots, next)
			}
			continue
		}
		// Wait for a release, an ask that can be granted, or the
		// earliest lease to end; idle, for a minute at most.
		wait := time.Minute
		for _, h := range s.held {
			wait = min(wait, max(h.Until.Sub(now), time.Second))
		}
		rev := s.changes
		ok, err := workflow.AwaitWithTimeout(ctx, wait, func() bool {
			return s.changes != rev || len(s.waiting) > 0 && len(s.held) < in.Slots
		})
		if err != nil {
			return s.state(ctx), err
		}
		if !ok && len(s.held) == 0 && len(s.waiting) == 0 {
			drained, err := s.drain(ctx)
			if err != nil || drained {
				return s.state(ctx), err
			}
		}
	}
}

// Update, signal and query names of the ForgeSlots workflow.
const (
	// UpdateForgeSlot completes once the caller holds a slot
	// (ForgeSlotRequest, ForgeSlot).
	UpdateForgeSlot = "slot"
	// SignalForgeRelease gives a slot back, or withdraws an ask, by its
	// id (a string).
	SignalForgeRelease = "release"
	// QueryForgeSlots answers with the ForgeSlotsState.
	QueryForgeSlots = "slots"
)

// ForgeSlotsInput is a ForgeSlots workflow's input. Held and Total are
// empty on the first run and carry the slots across continue-as-new.
type ForgeSlotsInput struct {
	// Key names the forge and account in messages (never a token).
	Key string `json:"key"`
	// Slots is how many transfers may run at once.
	Slots int `json:"slots"`
	// Lease is how long a slot is held at most (default 30 minutes).
	Lease time.Duration `json:"lease,omitempty"`
	// GrantsPerRun bounds a run's history (default 500 grants).
	GrantsPerRun int         `json:"grants_per_run,omitempty"`
	Held         []ForgeSlot `json:"held,omitempty"`
	Total        int         `json:"total,omitempty"`
}

// ForgeSlotRequest asks for a slot: ID, unique to the ask, gives it back
// later; Caller names the asker in the history (a worker's identity).
type ForgeSlotRequest struct {
	ID     string `json:"id"`
	Caller string `json:"caller"`
}

// ForgeSlot is a slot held: by whom, and until when at most.
type ForgeSlot struct {
	ID     string    `json:"id"`
	Caller string    `json:"caller"`
	Until  time.Time `json:"until"`
}

// ForgeSlotsState is what QueryForgeSlots answers.
type ForgeSlotsState struct {
	Key     string      `json:"key"`
	Slots   int         `json:"slots"`
	Held    []ForgeSlot `json:"held"`
	Waiting int         `json:"waiting"`
	// Expired counts the slots taken back at the end of their lease.
	Expired int `json:"expired"`
	Total   int `json:"total"`
}

type slotWaiter struct {
	id, caller string
	granted    bool
	// withdrawn: given back before it was granted.
	withdrawn bool
	slot      ForgeSlot
}

type forgeSlots struct {
	in      ForgeSlotsInput
	held    map[string]ForgeSlot
	waiting []*slotWaiter
	// given remembers ids given back before their ask arrived, so that
	// an ask withdrawn while on its way is never granted.
	given     map[string]bool
	changes   int
	relCh     workflow.ReceiveChannel
	draining  bool
	runGrants int
	total     int
	expired   int
}

func (s *forgeSlots) register(ctx workflow.Context) error {
	s.total = s.in.Total
	if err := workflow.SetQueryHandler(ctx, QueryForgeSlots, func() (ForgeSlotsState, error) { return s.state(ctx), nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, UpdateForgeSlot, s.slot, workflow.UpdateHandlerOptions{
		Validator: func(r ForgeSlotRequest) error {
			if r.ID == "" {
				return temporal.NewNonRetryableApplicationError("a slot's ask needs an id", "InvalidForgeSlot", nil)
			}
			if s.draining {
				return temporal.NewApplicationError("the forge slots "+s.in.Key+" are starting their next run: ask again", ForgeBudgetDraining)
			}
			return nil
		},
	}); err != nil {
		return err
	}
	s.relCh = workflow.GetSignalChannel(ctx, SignalForgeRelease)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var id string
			s.relCh.Receive(ctx, &id)
			s.release(id)
		}
	})
	return nil
}

// slot waits for its grant. An ask for a slot its id holds already (an
// ask sent again) is answered with it.
func (s *forgeSlots) slot(ctx workflow.Context, r ForgeSlotRequest) (ForgeSlot, error) {
	if h, ok := s.held[r.ID]; ok {
		return h, nil
	}
	if s.given[r.ID] {
		return ForgeSlot{}, temporal.NewNonRetryableApplicationError("slot "+r.ID+" was given back before it was granted", "ForgeSlotWithdrawn", nil)
	}
	w := &slotWaiter{id: r.ID, caller: r.Caller}
	s.waiting = append(s.waiting, w)
	if err := workflow.Await(ctx, func() bool { return w.granted || w.withdrawn }); err != nil {
		return ForgeSlot{}, err
	}
	if w.withdrawn {
		return ForgeSlot{}, temporal.NewNonRetryableApplicationError("slot "+r.ID+" was given back before it was granted", "ForgeSlotWithdrawn", nil)
	}
	return w.slot, nil
}

// release gives the slot id back, or withdraws its ask.
func (s *forgeSlots) release(id string) {
	s.changes++
	if _, ok := s.held[id]; ok {
		delete(s.held, id)
		return
	}
	for i, w := range s.waiting {
		if w.id == id {
			w.withdrawn = true
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return
		}
	}
	// Bounded: the ids of a run's grants at most.
	if len(s.given) < 4*max(s.in.GrantsPerRun, 500) {
		s.given[id] = true
	}
}

// expire takes back the slots whose lease ended.
func (s *forgeSlots) expire(ctx workflow.Context, now time.Time) {
	for id, h := range s.held {
		if !h.Until.After(now) {
			delete(s.held, id)
			s.expired++
			workflow.GetLogger(ctx).Warn("forge slot taken back at the end of its lease", "slots", s.in.Key, "caller", h.Caller, "slot", id)
		}
	}
}

// lease is Lease, 30 minutes when unset.
func (s *forgeSlots) lease() time.Duration {
	if s.in.Lease > 0 {
		return s.in.Lease
	}
	return 30 * time.Minute
}

// heldList is the slots held, in the order of their ends.
func (s *forgeSlots) heldList() []ForgeSlot {
	out := make([]ForgeSlot, 0, len(s.held))
	for _, h := range s.held {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b ForgeSlot) int {
		if c := a.Until.Compare(b.Until); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

func (s *forgeSlots) state(ctx workflow.Context) ForgeSlotsState {
	return ForgeSlotsState{Key: s.in.Key, Slots: s.in.Slots, Held: s.heldList(), Waiting: len(s.waiting),
		Expired: s.expired, Total: s.total}
}

// drain refuses new asks (they go to the next run) and reports whether
// the run may end: no handler is left, and no release is left untaken.
// An ask made meanwhile is served first: draining stops.
func (s *forgeSlots) drain(ctx workflow.Context) (bool, error) {
	s.draining = true
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) || len(s.waiting) > 0 }); err != nil {
		return false, err
	}
	if len(s.waiting) > 0 {
		s.draining = false
		return false, nil
	}
	for {
		var id string
		if !s.relCh.ReceiveAsync(&id) {
			break
		}
		s.release(id)
	}
	return true, nil
}
