package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/forge/github"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// ForgeSlots is a forge account's bound on git transfers at once
// (parallel_clones) on Temporal: one ForgeSlots workflow per forge host
// and account, which every worker transferring with the account asks
// for its slots (a git.Slots). The first to ask starts it with its
// Input; later askers share that run, whatever they were given.
//
// This process never runs more than Input.Slots transfers itself,
// whether or not the shared slots are served: when no worker runs the
// workflow (an ask is not taken in within AcceptWithin), transfers are
// bounded by this process's count alone, and a warning says so once.
type ForgeSlots struct {
	Client client.Client
	// ID is the workflow's id (ForgeSlotsID).
	ID    string
	Input workflow.ForgeSlotsInput
	// Caller names this process in the workflow's history.
	Caller string
	// OnWait, when set, is told how long each slot waited (metrics).
	OnWait func(time.Duration)
	// AcceptWithin bounds the wait for the workflow to take an ask in;
	// zero: 30 s.
	AcceptWithin time.Duration
	// Logger receives the warning when the shared slots are not served;
	// nil: slog.Default().
	Logger *slog.Logger

	once  sync.Once
	local chan struct{}
	// unserved counts transfers bounded by this process alone.
	unserved atomic.Int64
}

var _ gitx.Slots = (*ForgeSlots)(nil)

// ForgeSlotsID is the workflow id of the transfer slots of the account
// whose token is token on host (a digest of it, never the token).
func ForgeSlotsID(host, token string) string {
	return "fleetlift/forge-slots/" + workflow.ForgeBudgetKey(host, accountDigest(token))
}

// ForgeSlotsInput is the slots of an account allowed n transfers at
// once, each held for lease at most (zero: the workflow's default).
func ForgeSlotsInput(key string, n int, lease time.Duration) workflow.ForgeSlotsInput {
	return workflow.ForgeSlotsInput{Key: key, Slots: n, Lease: lease}
}

// Acquire returns once this process and the account have a slot free
// for a transfer, and the func that gives it back.
func (f *ForgeSlots) Acquire(ctx context.Context) (func(), error) {
	f.once.Do(func() { f.local = make(chan struct{}, max(1, f.Input.Slots)) })
	start := time.Now()
	select {
	case f.local <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	freeLocal := func() { <-f.local }
	id, err := f.take(ctx)
	switch {
	case errors.Is(err, github.ErrSharedUnavailable):
		if f.unserved.Add(1) == 1 {
			f.logger().Warn("forge transfers: the shared transfer slots are not served; bounding this process's transfers itself", "slots", f.ID, "error", err)
		}
		return f.waited(start, freeLocal), nil
	case err != nil:
		freeLocal()
		return nil, err
	}
	return f.waited(start, func() {
		// Given back even when the transfer's own context has ended.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := f.Client.SignalWorkflow(ctx, f.ID, "", workflow.SignalForgeRelease, id); err != nil {
			f.logger().Warn("forge transfers: could not give a slot back; it is taken back at the end of its lease", "slots", f.ID, "error", err)
		}
		freeLocal()
	}), nil
}

// waited tells OnWait how long the slot took since start, and returns
// release made safe to call more than once.
func (f *ForgeSlots) waited(start time.Time, release func()) func() {
	if f.OnWait != nil {
		f.OnWait(time.Since(start))
	}
	var once sync.Once
	return func() { once.Do(release) }
}

func (f *ForgeSlots) logger() *slog.Logger {
	if f.Logger != nil {
		return f.Logger
	}
	return slog.Default()
}

// take asks the workflow for a slot until it is granted, and returns
// its id. An ask cut short by ctx is withdrawn, so that no slot is
// granted to nobody.
func (f *ForgeSlots) take(ctx context.Context) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := f.Caller + "/" + hex.EncodeToString(b[:])
	update := client.UpdateWorkflowOptions{
		WorkflowID: f.ID, UpdateName: workflow.UpdateForgeSlot,
		Args:         []any{workflow.ForgeSlotRequest{ID: id, Caller: f.Caller}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	}
	start := func(ctx context.Context) error {
		_, err := f.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: f.ID, TaskQueue: workflow.TaskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflow.ForgeSlots, f.Input)
		return err
	}
	var slot workflow.ForgeSlot
	err := askUntilAnswered(ctx, func(ctx context.Context) (client.WorkflowUpdateHandle, error) {
		return sendAsk(ctx, f.Client, start, update, f.AcceptWithin)
	}, &slot)
	if err == nil {
		return id, nil
	}
	// Cut short, refused or unserved: a slot granted later goes back.
	f.withdraw(id)
	if err := ended(ctx); err != nil {
		return "", err
	}
	return "", fmt.Errorf("slot from %s: %w", f.ID, err)
}

// withdraw gives back the slot id may have been granted, or withdraws
// its ask.
func (f *ForgeSlots) withdraw(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = f.Client.SignalWorkflow(ctx, f.ID, "", workflow.SignalForgeRelease, id)
}
