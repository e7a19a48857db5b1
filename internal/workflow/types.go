package workflow

import (
	"time"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// TaskQueue is the task queue fleetlift's workers poll.
const TaskQueue = "fleetlift"

// Signal names. Task workflows take approve, reject, steer and cancel;
// Campaign workflows take continue, abort and retry-failed.
const (
	SignalApprove     = "approve"
	SignalReject      = "reject"
	SignalSteer       = "steer"
	SignalCancel      = "cancel"
	SignalContinue    = "continue"
	SignalAbort       = "abort"
	SignalRetryFailed = "retry-failed"
	// SignalSuspend and SignalResume stop and restart the starting of
	// new units of a campaign (the spec's suspend).
	SignalSuspend = "suspend"
	SignalResume  = "resume"
	// SignalUpdate hands a running campaign a new spec (UpdateSignal):
	// units not yet started take it; started ones keep what they ran.
	SignalUpdate = "update"
)

// Memo keys every run records when it starts; a campaign updated in
// place records the new spec's under the same keys. The state reader
// (package state/temporal) reads them.
const (
	MemoKind       = "fleetlift.kind"
	MemoID         = "fleetlift.id"
	MemoDigest     = "fleetlift.digest"
	MemoFile       = "fleetlift.file"
	MemoSpec       = "fleetlift.spec"
	MemoGeneration = "fleetlift.generation"
	MemoRevision   = "fleetlift.revision"
	MemoPhase      = "fleetlift.phase"
)

// QueryStatus is the query both workflows answer with their state.
const QueryStatus = "status"

// TaskInput is a Task workflow's input: what the agent is to do, already
// in protocol form, and how to run it. It holds no secrets.
type TaskInput struct {
	// ID is the task's id; with a campaign, the campaign's id and the
	// repository, e.g. "slog-rollout/payments".
	ID       string
	Manifest protocol.Manifest
	Image    string
	// Timeout bounds the agent's work (not the wait for approval).
	Timeout time.Duration
	// ApprovalTimeout bounds the wait for an approval; zero waits as long
	// as it takes.
	ApprovalTimeout time.Duration
	Resources       sandbox.Resources
	// HeartbeatTimeout is how soon a worker that died while waiting for
	// the agent is noticed and the wait resumed elsewhere (default 10s).
	HeartbeatTimeout time.Duration
	// HostTimeout is how long a step waits for a worker of the host that
	// holds the sandbox before the sandbox counts as lost and the work
	// runs again elsewhere (default DefaultHostTimeout).
	HostTimeout time.Duration
	// Credentials are the definition's credentials: which Kubernetes
	// Secret keys give the agent its forge token and its CLI's key, names
	// only.
	Credentials *activity.Credentials `json:",omitempty"`
	// Placement is the definition's sandbox placement.
	Placement *activity.Placement `json:",omitempty"`
}

// provision is how to provision a sandbox sandboxID for in's work.
func (in TaskInput) provision(sandboxID string) activity.ProvisionInput {
	p := activity.ProvisionInput{SandboxID: sandboxID, Image: in.Image, Resources: in.Resources,
		Credentials: in.Credentials, Placement: in.Placement}
	if in.ID != "" {
		p.Labels = map[string]string{"fleetlift.io/task-id": in.ID}
	}
	return p
}

// agentTimeout is Timeout, 30 minutes when unset.
func (in TaskInput) agentTimeout() time.Duration {
	if in.Timeout > 0 {
		return in.Timeout
	}
	return 30 * time.Minute
}

// heartbeatTimeout is HeartbeatTimeout, 10 seconds when unset.
func (in TaskInput) heartbeatTimeout() time.Duration {
	if in.HeartbeatTimeout > 0 {
		return in.HeartbeatTimeout
	}
	return 10 * time.Second
}

// TaskPhase is where a Task workflow is.
type TaskPhase string

const (
	TaskProvisioning     TaskPhase = "provisioning"
	TaskRunning          TaskPhase = "running"
	TaskAwaitingApproval TaskPhase = "awaiting_approval"
	TaskCreatingPRs      TaskPhase = "creating_prs"
	TaskCompleted        TaskPhase = "completed"
	TaskFailed           TaskPhase = "failed"
	TaskCancelled        TaskPhase = "cancelled"
	// TaskQueued: the unit is in a run of units that one activity works
	// through in turn (RunUnits), behind the one running; it starts once
	// those before it have ended, unless the campaign has stopped by
	// then.
	TaskQueued TaskPhase = "queued"
)

func (p TaskPhase) String() string { return string(p) }

// Done reports whether the phase is final.
func (p TaskPhase) Done() bool {
	return p == TaskCompleted || p == TaskFailed || p == TaskCancelled
}

// RepoResult is the outcome in one repository.
type RepoResult struct {
	Name          string                    `json:"name"`
	Status        string                    `json:"status"`
	FilesModified []string                  `json:"files_modified,omitempty"`
	PullRequest   *protocol.PullRequestInfo `json:"pull_request,omitempty"`
	Report        *protocol.Report          `json:"report,omitempty"`
	ForEach       []protocol.ForEachResult  `json:"for_each,omitempty"`
	Error         string                    `json:"error,omitempty"`
	// ErrorKind says how a report failed (protocol.ReportMissing,
	// ReportFrontmatterInvalid, ReportSchemaInvalid); empty otherwise.
	ErrorKind string `json:"error_kind,omitempty"`
}

// TaskResult is a Task workflow's result.
type TaskResult struct {
	ID           string       `json:"id"`
	Phase        TaskPhase    `json:"phase"`
	Repositories []RepoResult `json:"repositories"`
	Error        string       `json:"error,omitempty"`
	// Steers counts the steering rounds.
	Steers int `json:"steers,omitempty"`
	// Applied lists the approval records the task carried out (approve,
	// steer or reject), in order; an approval counts only when the task
	// completed.
	Applied []string `json:"applied,omitempty"`
	// SandboxesLost counts the sandboxes lost to crashes and replaced.
	SandboxesLost int `json:"sandboxes_lost,omitempty"`
	// Notes say what of the definition the task's sandboxes could not
	// apply, and what they did instead (each once).
	Notes []string `json:"notes,omitempty"`
	// ModelUsage is what the task's agent used of its model, as the
	// worker's gateway counted it; nil when it made no model call
	// through one.
	ModelUsage *protocol.ModelUsage `json:"model_usage,omitempty"`
}

// TaskState answers QueryStatus on a Task workflow.
type TaskState struct {
	ID         string         `json:"id"`
	Phase      TaskPhase      `json:"phase"`
	AgentPhase protocol.Phase `json:"agent_phase,omitempty"`
	Message    string         `json:"message,omitempty"`
	Iteration  int            `json:"iteration"`
	// Result is the agent's latest result, with the diffs awaiting
	// approval.
	Result *protocol.Result `json:"result,omitempty"`
	// ResultDigest identifies the result awaiting approval (set while
	// Phase is awaiting_approval): a decision naming another digest is
	// about a result that has since changed, and is ignored.
	ResultDigest string `json:"result_digest,omitempty"`
	// AwaitingSince is when the result awaiting approval began to wait
	// (workflow time); zero when none waits.
	AwaitingSince time.Time   `json:"awaiting_since,omitzero"`
	Final         *TaskResult `json:"final,omitempty"`
	// Ignored lists the decisions ignored because they named a result
	// that was no longer the one awaiting approval (the latest 20).
	Ignored []string `json:"ignored,omitempty"`
	// Applied lists the approval records carried out so far.
	Applied []string `json:"applied,omitempty"`
	// Sandbox is the sandbox the task runs in now.
	Sandbox string `json:"sandbox,omitempty"`
	// Lost says, for each sandbox lost to a crash and replaced, what
	// happened.
	Lost []string `json:"lost,omitempty"`
	// Notes are TaskResult.Notes so far.
	Notes []string `json:"notes,omitempty"`
}

// DecisionSignal is the payload of SignalApprove and SignalReject (and,
// through SteerSignal, of SignalSteer). Every field is optional: a
// decision without a digest applies to whatever result awaits approval,
// as `fleetlift approve` sends it after showing that result.
type DecisionSignal struct {
	// ResultDigest is the digest of the result decided about.
	ResultDigest string `json:"result_digest,omitempty"`
	// By is who decided; Record the approval record or review it came from.
	By     string `json:"by,omitempty"`
	Record string `json:"record,omitempty"`
}

// SteerSignal is the payload of SignalSteer.
type SteerSignal struct {
	Prompt string `json:"prompt"`
	DecisionSignal
}

// ContinueSignal is the payload of SignalContinue.
type ContinueSignal struct {
	// SkipRemaining finishes the campaign without starting the tasks not
	// yet started.
	SkipRemaining bool `json:"skip_remaining"`
	// Record identifies the approval record the signal carries out, if
	// any: a campaign acts on each record once (CampaignState.Applied).
	Record string `json:"record,omitempty"`
	// Generation, when set, is the generation of the run the signal is
	// for: a run of another generation ignores it.
	Generation int64 `json:"generation,omitempty"`
}

// RecordSignal is the payload of SignalAbort and SignalRetryFailed: the
// approval record carried out, if any.
type RecordSignal struct {
	Record string `json:"record,omitempty"`
	// Unit limits retry-failed to one unit; empty retries every failed one.
	Unit string `json:"unit,omitempty"`
	// Generation, when set, is the generation of the run the signal is
	// for: a run of another generation ignores it.
	Generation int64 `json:"generation,omitempty"`
}

// UpdateSignal is the payload of SignalUpdate: the campaign's new spec,
// already translated (ForDefinition), and the memo describing it.
type UpdateSignal struct {
	Input CampaignInput  `json:"input"`
	Memo  map[string]any `json:"memo"`
}
