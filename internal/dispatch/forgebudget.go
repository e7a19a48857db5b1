package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/forge/github"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// ForgeBudget is a forge account's budget of writes on Temporal: one
// ForgeBudget workflow per forge host and account, which every worker
// and replica writing with the account asks for its permits (a
// github.Shared). The first to ask starts it with its Limits; later
// askers share that run, whatever limits they were given.
type ForgeBudget struct {
	Client client.Client
	// ID is the workflow's id (ForgeBudgetID).
	ID string
	// Input is the budget's limits, for the run this one starts.
	Input workflow.ForgeBudgetInput
	// Caller names this process in the budget's history.
	Caller string
	// OnWait, when set, is told how long each permit waited (metrics).
	OnWait func(time.Duration)
	// Join, when set, never starts the budget: this process (a
	// reconciler without a worker) writes through it while the workers
	// that own it have it running, and paces itself otherwise
	// (github.ErrSharedUnavailable).
	Join bool
	// AcceptWithin bounds the wait for the budget to take a permit's
	// ask in (a worker to run it); past it, the ask fails with
	// github.ErrSharedUnavailable. Zero: 30 s.
	AcceptWithin time.Duration

	// asking bounds this process's permits asked at once: the rest wait
	// here, not as updates the server bounds (it refuses more than a
	// few in flight on one workflow).
	once   sync.Once
	asking chan struct{}
}

// maxAsking is how many permits one process asks for at once.
const maxAsking = 4

var _ github.Shared = (*ForgeBudget)(nil)

// ForgeBudgetID is the workflow id of the write budget of the account
// whose token is token on host: the token itself is in no id, only a
// digest that tells accounts apart.
func ForgeBudgetID(host, token string) string {
	return "fleetlift/forge-budget/" + workflow.ForgeBudgetKey(host, accountDigest(token))
}

// ForgeRequestsID is the workflow id of the budget of every request
// (reads and writes: requests_per_hour) of the account whose token is
// token on host; a ForgeBudget workflow as the writes' is.
func ForgeRequestsID(host, token string) string {
	return "fleetlift/forge-requests/" + workflow.ForgeBudgetKey(host, accountDigest(token))
}

// accountDigest tells forge accounts apart by their token without
// holding it.
func accountDigest(token string) string {
	sum := sha256.Sum256([]byte("fleetlift forge budget\x00" + token))
	return hex.EncodeToString(sum[:8])
}

// ForgeBudgetInput is the budget of an account allowed perMinute and
// perHour writes (0: no such limit): GitHub's secondary limits are 80
// and 500. Each window has 2 s of slack, for requests that reach the
// forge later than others granted after them, and grants are spaced by
// the minute's share.
func ForgeBudgetInput(key string, perMinute, perHour int) workflow.ForgeBudgetInput {
	in := workflow.ForgeBudgetInput{Key: key, Slack: 2 * time.Second}
	if perMinute > 0 {
		in.Limits = append(in.Limits, workflow.ForgeLimit{Count: perMinute, Per: time.Minute})
		in.MinInterval = (time.Minute + in.Slack) / time.Duration(perMinute)
	}
	if perHour > 0 {
		in.Limits = append(in.Limits, workflow.ForgeLimit{Count: perHour, Per: time.Hour})
	}
	return in
}

// ForgeRequestsInput is the budget of an account allowed perHour
// requests of any kind, with the writes' 2 s of slack and no spacing: a
// burst may spend the hour's requests, as the forge's own primary limit
// allows.
func ForgeRequestsInput(key string, perHour int) workflow.ForgeBudgetInput {
	return workflow.ForgeBudgetInput{Key: key, Slack: 2 * time.Second, Limits: []workflow.ForgeLimit{{Count: perHour, Per: time.Hour}}}
}

// start is the options the budget's run starts with.
func (f *ForgeBudget) start() client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID: f.ID, TaskQueue: workflow.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}
}

// Acquire asks the budget for a permit, starting its workflow when none
// runs, and returns once it is granted. A budget between runs refuses
// the ask; it is asked again.
func (f *ForgeBudget) Acquire(ctx context.Context) error {
	f.once.Do(func() { f.asking = make(chan struct{}, maxAsking) })
	start := time.Now()
	select {
	case f.asking <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	p, err := f.ask(ctx)
	<-f.asking
	if err != nil {
		return err
	}
	// The permit is for its time: wait for it.
	if err := sleep(ctx, time.Until(p.At)); err != nil {
		return err
	}
	if f.OnWait != nil {
		f.OnWait(time.Since(start))
	}
	return nil
}

// ask asks the budget for a permit until it is granted.
func (f *ForgeBudget) ask(ctx context.Context) (workflow.ForgePermit, error) {
	var p workflow.ForgePermit
	if err := askUntilAnswered(ctx, f.send, &p); err != nil {
		if err := ended(ctx); err != nil {
			return p, err
		}
		return p, fmt.Errorf("permit from %s: %w", f.ID, err)
	}
	return p, nil
}

// askUntilAnswered sends an ask (send) and waits for its answer into
// out, asking again, a little later each time, while the answer says to
// (askAgain), at most 100 times; an ask no worker takes in
// (github.ErrSharedUnavailable) or a done ctx ends it.
func askUntilAnswered(ctx context.Context, send func(context.Context) (client.WorkflowUpdateHandle, error), out any) error {
	for attempt := 0; ; attempt++ {
		h, err := send(ctx)
		if err == nil {
			err = h.Get(ctx, out)
		}
		if err == nil {
			return nil
		}
		if ended(ctx) != nil || errors.Is(err, github.ErrSharedUnavailable) || !askAgain(err) || attempt >= 100 {
			return err
		}
		if err := sleep(ctx, time.Duration(10*min(attempt+1, 10))*time.Millisecond); err != nil {
			return err
		}
	}
}

// ended is ctx's error once it is done or its deadline has passed. The
// server and gRPC may report a deadline a moment before ctx's own timer
// fires (more so on a loaded machine); a call cut short then is still
// the caller's deadline, not a failure of the call.
func ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// sleep waits for d (none when it is not positive) or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// send sends a permit's ask and returns once the budget took it in,
// starting the budget first unless it runs (with Join, only to a budget
// running). An ask the budget does not take in within AcceptWithin, or
// one to join a budget that does not run, fails with
// github.ErrSharedUnavailable.
func (f *ForgeBudget) send(ctx context.Context) (client.WorkflowUpdateHandle, error) {
	update := client.UpdateWorkflowOptions{
		WorkflowID: f.ID, UpdateName: workflow.UpdateForgePermit, Args: []any{workflow.ForgePermitRequest{Caller: f.Caller}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	}
	var start func(context.Context) error
	if !f.Join {
		start = func(ctx context.Context) error {
			_, err := f.Client.ExecuteWorkflow(ctx, f.start(), workflow.ForgeBudget, f.Input)
			return err
		}
	}
	return sendAsk(ctx, f.Client, start, update, f.AcceptWithin)
}

// sendAsk sends the ask update to an account's budget workflow and
// returns once the workflow took it in, calling start first unless it is
// nil (nil: join a workflow that runs). An ask not taken in within
// within (zero: 30 s), or one to join a workflow that does not run,
// fails with github.ErrSharedUnavailable.
func sendAsk(ctx context.Context, c client.Client, start func(context.Context) error, update client.UpdateWorkflowOptions, within time.Duration) (client.WorkflowUpdateHandle, error) {
	if within <= 0 {
		within = 30 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if start != nil {
		// Start the workflow unless it runs (the existing run otherwise).
		if err := start(ctx); err != nil {
			return nil, fmt.Errorf("start %s: %w", update.WorkflowID, err)
		}
	}
	h, err := c.UpdateWorkflow(actx, update)
	var nf *serviceerror.NotFound
	if start == nil && err != nil && (errors.As(err, &nf) || strings.Contains(err.Error(), "workflow execution already completed")) {
		return nil, fmt.Errorf("%w: %s does not run: %w", github.ErrSharedUnavailable, update.WorkflowID, err)
	}
	// The call's own deadline is actx's; gRPC may report it a moment
	// before actx's timer says so. A deadline that is the caller's own
	// is the caller's, not an unserved budget.
	var timedOut *client.WorkflowUpdateServiceTimeoutOrCanceledError
	if err != nil && ended(ctx) == nil && (ended(actx) != nil || errors.As(err, &timedOut)) {
		return nil, fmt.Errorf("%w: %s took no ask in %s (is a fleetlift worker running?): %w", github.ErrSharedUnavailable, update.WorkflowID, within, err)
	}
	return h, err
}

// askAgain reports whether err says to ask again: the budget's run was
// ending (it refused a permit while continuing as new, or closed
// meanwhile), and the next ask goes to the next run; or the server had
// too many updates in flight on it.
func askAgain(err error) bool {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.Type() == workflow.ForgeBudgetDraining {
		return true
	}
	var nf *serviceerror.NotFound
	var busy *serviceerror.ResourceExhausted
	return errors.As(err, &nf) || errors.As(err, &busy) || strings.Contains(err.Error(), "workflow execution already completed")
}

// Spend counts n more against the budget's windows (what a request
// spent beyond its permit), starting the budget's workflow when none
// runs (unless it only joins: then a budget that does not run counts
// nothing).
func (f *ForgeBudget) Spend(ctx context.Context, n int64) error {
	sp := workflow.ForgeSpend{Count: n}
	var err error
	if f.Join {
		err = f.Client.SignalWorkflow(ctx, f.ID, "", workflow.SignalForgeSpend, sp)
	} else {
		_, err = f.Client.SignalWithStartWorkflow(ctx, f.ID, workflow.SignalForgeSpend, sp, f.start(), workflow.ForgeBudget, f.Input)
	}
	if err != nil {
		return fmt.Errorf("spend %d of %s: %w", n, f.ID, err)
	}
	return nil
}

// Hold holds every permit back until until, starting the budget's
// workflow when none runs.
func (f *ForgeBudget) Hold(ctx context.Context, until time.Time, reason string) error {
	_, err := f.Client.SignalWithStartWorkflow(ctx, f.ID, workflow.SignalForgeHold, workflow.ForgeHold{Until: until, Reason: reason},
		f.start(), workflow.ForgeBudget, f.Input)
	if err != nil {
		return fmt.Errorf("hold %s: %w", f.ID, err)
	}
	return nil
}
