package workflow

import (
	"time"

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
	// the agent is noticed and the wait resumed elsewhere (default 30s).
	HeartbeatTimeout time.Duration
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
}

// TaskResult is a Task workflow's result.
type TaskResult struct {
	ID           string       `json:"id"`
	Phase        TaskPhase    `json:"phase"`
	Repositories []RepoResult `json:"repositories"`
	Error        string       `json:"error,omitempty"`
	// Steers counts the steering rounds.
	Steers int `json:"steers,omitempty"`
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
	Final  *TaskResult      `json:"final,omitempty"`
}

// SteerSignal is the payload of SignalSteer.
type SteerSignal struct {
	Prompt string `json:"prompt"`
}

// ContinueSignal is the payload of SignalContinue.
type ContinueSignal struct {
	// SkipRemaining finishes the campaign without starting the tasks not
	// yet started.
	SkipRemaining bool `json:"skip_remaining"`
}
