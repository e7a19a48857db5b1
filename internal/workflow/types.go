package workflow

import (
	"time"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/status"
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
	// SignalRegenerate has a campaign run units that have finished
	// again (RegenerateSignal): their change made anew on their
	// repositories as they are now, to bring their pull requests up to
	// date (keep_current, `fleetlift prs update`).
	SignalRegenerate = "regenerate"
)

// RegenerateActivity is the activity that has a campaign run units
// again (RegenerateInput; it returns how many a campaign that had ended
// started again with). The worker registers it from the dispatch
// package, which starts and signals runs.
const RegenerateActivity = "RegenerateUnits"

// RegenerateInput asks RegenerateActivity to run Units of campaign
// Source again.
type RegenerateInput struct {
	Source string   `json:"source"`
	Units  []string `json:"units"`
}

// PendingChecksActivity is the activity that counts a campaign's open
// pull requests whose checks are pending, as their followers last read
// them (PendingChecksInput; it returns the count), for
// max_pending_checks. The worker registers it from the dispatch
// package, which reads runs.
const PendingChecksActivity = "PendingChecks"

// PendingChecksInput asks PendingChecksActivity about the pull requests
// of run Source; Campaign, for a page of a campaign, is the campaign's
// workflow id: the pull requests of all its pages count.
type PendingChecksInput struct {
	Source   string `json:"source"`
	Campaign string `json:"campaign,omitempty"`
	// Opened is how many pull requests Source's units have opened, as
	// it counts them: those its follower has not read from it yet count
	// as pending too.
	Opened int `json:"opened,omitempty"`
}

// RegenerateSignal is the payload of SignalRegenerate.
type RegenerateSignal struct {
	// Units are the keys of the units to run again; a unit that has not
	// finished, or is queued already, is left as it is.
	Units []string `json:"units"`
}

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
	// Merge is the definition's pull_request.merge.
	Merge *status.MergePolicy `json:",omitempty"`
	// KeepCurrent is the definition's pull_request.keep_current; empty
	// for never.
	KeepCurrent string `json:",omitempty"`
	// Done is the definition's done_when, as the follower runs it.
	Done *status.DoneCheck `json:",omitempty"`
	// Open are the pull requests the task's campaign unit opened in an
	// earlier run: while the change made again for them awaits a
	// decision they carry a pending fleetlift/approval status, and what
	// the decision was once it is taken.
	Open []protocol.PullRequestInfo `json:",omitempty"`
}

// provision is how to provision a sandbox sandboxID for in's work.
func (in TaskInput) provision(sandboxID string) activity.ProvisionInput {
	p := activity.ProvisionInput{SandboxID: sandboxID, Image: in.Image, Resources: in.Resources,
		Credentials: in.Credentials, Placement: in.Placement, Agentic: in.Manifest.Execution.Type == protocol.ExecutionAgentic}
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
