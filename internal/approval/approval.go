package approval

import (
	"errors"
	"fmt"
	"strings"
)

// Action is what an approval record asks for.
type Action string

const (
	// Approve accepts the result: pull requests are opened on the targets.
	Approve Action = "approve"
	// Reject discards the result: nothing is opened.
	Reject Action = "reject"
	// Steer sends the agent back to work with Record.Prompt.
	Steer Action = "steer"
	// Continue resumes a campaign paused by its failure threshold.
	Continue Action = "continue"
	// Abort stops a campaign: tasks not yet started are skipped.
	Abort Action = "abort"
	// Retry runs a campaign's failed tasks (or one of them) again.
	Retry Action = "retry"
)

// Actions lists every action, in the order people meet them.
func Actions() []Action { return []Action{Approve, Reject, Steer, Continue, Abort, Retry} }

func (a Action) String() string { return string(a) }

// Known reports whether a is one of Actions.
func (a Action) Known() bool {
	switch a {
	case Approve, Reject, Steer, Continue, Abort, Retry:
		return true
	}
	return false
}

// BindsResult reports whether the action decides about one result and so
// must name the digest of the result it saw (approve, reject, steer).
// Continue, abort and retry act on a campaign's run and need no digest.
func (a Action) BindsResult() bool {
	return a == Approve || a == Reject || a == Steer
}

// BindsRun reports whether the action decides about a campaign's run and
// so must name the run's generation (continue, abort, retry): without it,
// a record left in Git would act again on every later run.
func (a Action) BindsRun() bool {
	return a == Continue || a == Abort || a == Retry
}

// ParseAction reads an action name.
func ParseAction(s string) (Action, error) {
	a := Action(s)
	if !a.Known() {
		return "", fmt.Errorf("unknown approval action %q: want one of approve, reject, steer, continue, abort, retry", s)
	}
	return a, nil
}

// Record is one approval: who decided what about which result.
type Record struct {
	// File is where the record came from, relative to the campaigns
	// repository root (e.g. "approvals/slog-payments.yaml"), or a
	// description of the review it was read from.
	File string `json:"file"`
	// Target names what is approved: a campaign or task id
	// ("slog-rollout"), or a task within a campaign, by the campaign id and
	// the repository or group ("slog-rollout/payments").
	Target string `json:"target"`
	// ResultDigest is the digest of the result the approver saw. Required
	// for approve, reject and steer; ignored for continue, abort, retry.
	ResultDigest string `json:"result_digest,omitempty"`
	// Generation is the generation of the run the record decides about
	// (state.Campaign.Generation). Required for continue, abort and
	// retry; for approve, reject and steer, zero means any generation
	// whose result has ResultDigest.
	Generation int64 `json:"generation,omitempty"`
	// By is who approved.
	By     string `json:"by"`
	Action Action `json:"action"`
	// Prompt is what a steer asks the agent to change.
	Prompt string `json:"prompt,omitempty"`
}

// Campaign returns the campaign or task id of the target: the part before
// the first "/".
func (r Record) Campaign() string {
	id, _, _ := strings.Cut(r.Target, "/")
	return id
}

// Unit returns the task within the campaign the target names (the part
// after the first "/"), or "" when the target is the campaign itself.
func (r Record) Unit() string {
	_, unit, _ := strings.Cut(r.Target, "/")
	return unit
}

// Validate reports what makes the record unusable whatever the run state:
// an unknown action, no target, a missing digest, generation or prompt,
// or a campaign action aimed at one task.
func (r Record) Validate() error {
	var probs []string
	switch {
	case r.Action == "":
		probs = append(probs, "no action")
	case !r.Action.Known():
		probs = append(probs, fmt.Sprintf("unknown action %q", string(r.Action)))
	}
	if r.Campaign() == "" {
		probs = append(probs, "no target")
	}
	if r.Action.BindsResult() && r.ResultDigest == "" {
		probs = append(probs, fmt.Sprintf("no result digest: %s must name the result it saw", r.Action))
	}
	if r.Action.BindsRun() && r.Generation <= 0 {
		probs = append(probs, fmt.Sprintf("no generation: %s must name the run it decides about (the generation `fleetlift status` shows)", r.Action))
	}
	if r.Action == Steer && strings.TrimSpace(r.Prompt) == "" {
		probs = append(probs, "steer without a prompt")
	}
	if (r.Action == Continue || r.Action == Abort) && r.Unit() != "" {
		probs = append(probs, fmt.Sprintf("%s applies to a whole campaign, not to %s", r.Action, r.Target))
	}
	if len(probs) == 0 {
		return nil
	}
	return errors.New(strings.Join(probs, "; "))
}
