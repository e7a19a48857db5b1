package workflow

import (
	"crypto/sha256"
	"encoding/hex"

	"go.temporal.io/sdk/workflow"
)

// LatchInput is a Latch workflow's input: what set it, for people
// reading the workflow in Temporal.
type LatchInput struct {
	// Name says what the latch holds ("require_reviewed_merge of
	// https://forge.example/acme/campaigns.git, branch main").
	Name string `json:"name"`
	// Revision is the campaigns commit that set it.
	Revision string `json:"revision,omitempty"`
}

// Latch holds a flag in Temporal: the flag is set while a Latch workflow
// runs under its id, and cleared when it is terminated (or cancelled).
// It does nothing but wait, so it needs no worker to be set, read
// (DescribeWorkflowExecution) or cleared (TerminateWorkflow), and a
// running workflow outlives the namespace's retention: the flag survives
// restarts of every reconciler and worker.
func Latch(ctx workflow.Context, _ LatchInput) error {
	// Await returns only when the workflow is cancelled.
	_ = workflow.Await(ctx, func() bool { return false })
	return nil
}

// ReviewedMergeLatchID is the id of the Latch workflow that remembers
// that the campaigns repository's watched branch requires reviewed merges
// (watch.require_reviewed_merge). The repository URL is hashed: it may
// carry user-info that has no place in an id.
func ReviewedMergeLatchID(repository, branch string) string {
	sum := sha256.Sum256([]byte(repository + "\n" + branch))
	return "fleetlift/require-reviewed-merge/" + hex.EncodeToString(sum[:8])
}
