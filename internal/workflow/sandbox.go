package workflow

import (
	"errors"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// DefaultHostTimeout is how long a task waits for the worker host that
// holds its sandbox to take the sandbox's next step before it counts the
// sandbox lost and provisions another elsewhere.
const DefaultHostTimeout = 2 * time.Minute

// sandboxSteps runs the short sandbox steps of one task (provision,
// write the steering, clean up), each a regular activity: a local one
// runs before the workflow task that scheduled it is recorded, and when
// that task fails to complete its retry runs the step again (a cleanup
// then finds the sandbox gone). Every step but
// provisioning goes to the task queue of the worker that provisioned the
// sandbox (SandboxRef.Queue): a sandbox lives on one host, and only that
// host's worker can reach it. A host that takes no step within
// hostTimeout loses the sandbox (see sandboxLost).
type sandboxSteps struct {
	hostTimeout time.Duration
}

// shortTimeout bounds one short step once started: they take a second or
// two, and one that started on a worker that then died is tried again
// after this long.
const shortTimeout = 30 * time.Second

// provision provisions a sandbox on any worker of the task queue. While
// the worker asked runs as many sandboxes as it may (ErrWorkerFull), the
// task waits and asks again, which any worker may answer; waiting is
// told why it waits, and then "" once it no longer does.
func (s sandboxSteps) provision(ctx workflow.Context, in activity.ProvisionInput, waiting func(why string)) (activity.SandboxRef, error) {
	for attempt := 0; ; attempt++ {
		var ref activity.SandboxRef
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: shortTimeout,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
		})
		err := workflow.ExecuteActivity(actx, a.ProvisionSandbox, in).Get(actx, &ref)
		if !activity.WorkerFull(err) {
			if attempt > 0 {
				waiting("")
			}
			return ref, err
		}
		if attempt == 0 {
			workflow.GetLogger(ctx).Info("no worker has room for the sandbox; waiting", "sandbox", in.SandboxID)
			waiting("waiting for a worker with room for its sandbox (each runs at most its --max-sandboxes at once)")
		}
		if err := workflow.Sleep(ctx, activity.FullWait(attempt)); err != nil {
			return ref, err
		}
	}
}

// run runs a short step on sandbox ref: fn is an activity method, out may
// be nil.
func (s sandboxSteps) run(ctx workflow.Context, ref activity.SandboxRef, attempts int32, fn, arg, out any) error {
	actx := workflow.WithActivityOptions(ctx, s.onHost(ref, workflow.ActivityOptions{
		StartToCloseTimeout: shortTimeout,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: attempts},
	}))
	return workflow.ExecuteActivity(actx, fn, arg).Get(actx, out)
}

// onHost sends an activity to the worker that holds sandbox ref, when
// that worker said which queue it polls.
func (s sandboxSteps) onHost(ref activity.SandboxRef, o workflow.ActivityOptions) workflow.ActivityOptions {
	if ref.Queue != "" {
		o.TaskQueue = ref.Queue
		o.ScheduleToStartTimeout = s.hostTimeout
	}
	return o
}

// cleanup removes sandbox ref, as a regular activity that heartbeats so
// that a worker dying during it hands it to another within seconds (one
// on the same host, for a routed sandbox). It returns what the
// sandbox's model calls used.
func (s sandboxSteps) cleanup(ctx workflow.Context, ref activity.SandboxRef) (*protocol.ModelUsage, error) {
	actx := workflow.WithActivityOptions(ctx, s.onHost(ref, workflow.ActivityOptions{
		StartToCloseTimeout: shortTimeout,
		HeartbeatTimeout:    10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 10},
	}))
	var out activity.CleanupOutcome
	err := workflow.ExecuteActivity(actx, a.CleanupSandbox, activity.CleanupInput{Sandbox: ref}).Get(actx, &out)
	return out.ModelUsage, err
}

// sandboxLost reports whether err says the sandbox was lost rather than
// the work failed: the agent exited without finishing (killed, its host
// gone), the sandbox is gone, or no worker of the sandbox's host took a
// step in time.
func sandboxLost(err error) bool {
	if activity.SandboxLost(err) {
		return true
	}
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START
}
