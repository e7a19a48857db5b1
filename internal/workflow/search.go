package workflow

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/status"
)

// The search attributes fleetlift's runs carry, so that Temporal's own
// clients (its UI, its CLI, any SDK) can filter them: FleetliftKind =
// "Campaign", FleetliftPhase = "awaiting_approval", FleetliftCampaign =
// "slog-rollout". They are Keyword attributes; a namespace must have them
// registered (the embedded server does) for runs to carry them, and runs
// started in one that has not are started without them.
var (
	// SearchKind is what the run is: "Campaign" or "Task". A Task
	// definition with groups runs as a Campaign workflow of kind "Task";
	// each repository (or group) of a campaign runs as a child of kind
	// "Task".
	SearchKind = temporal.NewSearchAttributeKeyKeyword("FleetliftKind")
	// SearchID is the definition's id; a child's is "<campaign>/<key>".
	SearchID = temporal.NewSearchAttributeKeyKeyword("FleetliftID")
	// SearchCampaign is the id of the campaign a run belongs to: a
	// Campaign workflow's own id, and its children's.
	SearchCampaign = temporal.NewSearchAttributeKeyKeyword("FleetliftCampaign")
	// SearchSpecDigest is the digest of the definition the run carries
	// out (a child's is its campaign's); it changes when a running
	// campaign takes a new spec in place.
	SearchSpecDigest = temporal.NewSearchAttributeKeyKeyword("FleetliftSpecDigest")
	// SearchPhase is the run's phase, kept current: a TaskPhase or a
	// CampaignPhase.
	SearchPhase = temporal.NewSearchAttributeKeyKeyword(status.SearchPhase)
)

// SearchAttributeNames are the names of the search attributes above, all
// of type Keyword.
func SearchAttributeNames() []string {
	return []string{SearchKind.GetName(), SearchID.GetName(), SearchCampaign.GetName(), SearchSpecDigest.GetName(), SearchPhase.GetName()}
}

// StartAttributes are the search attributes a run starts with: campaign
// is empty for a Task workflow of its own, phase is where the workflow
// starts (TaskProvisioning, CampaignRunning).
func StartAttributes(kind, id, campaign, digest, phase string) temporal.SearchAttributes {
	u := []temporal.SearchAttributeUpdate{SearchKind.ValueSet(kind), SearchID.ValueSet(id), SearchPhase.ValueSet(phase)}
	if campaign != "" {
		u = append(u, SearchCampaign.ValueSet(campaign))
	}
	if digest != "" {
		u = append(u, SearchSpecDigest.ValueSet(digest))
	}
	return temporal.NewSearchAttributes(u...)
}

// searchAttributes keeps a run's search attributes current: each change
// of its phase (and of a campaign's digest) upserts them. It is on only
// for a run started with them (its namespace has them registered).
type searchAttributes struct {
	on    bool
	phase string
}

func newSearchAttributes(ctx workflow.Context) *searchAttributes {
	sa := workflow.GetTypedSearchAttributes(ctx)
	if _, ok := sa.GetKeyword(SearchKind); !ok {
		return &searchAttributes{}
	}
	phase, _ := sa.GetKeyword(SearchPhase)
	return &searchAttributes{on: true, phase: phase}
}

// setPhase records the run's phase, when it changed.
func (s *searchAttributes) setPhase(ctx workflow.Context, phase string) {
	if !s.on || phase == s.phase {
		return
	}
	s.phase = phase
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchPhase.ValueSet(phase)); err != nil {
		workflow.GetLogger(ctx).Error("record the phase search attribute", "phase", phase, "error", err)
	}
}

// setDigest records the digest of a spec taken in place.
func (s *searchAttributes) setDigest(ctx workflow.Context, digest string) {
	if !s.on || digest == "" {
		return
	}
	if err := workflow.UpsertTypedSearchAttributes(ctx, SearchSpecDigest.ValueSet(digest)); err != nil {
		workflow.GetLogger(ctx).Error("record the spec digest search attribute", "error", err)
	}
}

// child returns the search attributes of a campaign's child task id, when
// the campaign carries them.
func (s *searchAttributes) child(ctx workflow.Context, id, campaign string) temporal.SearchAttributes {
	if !s.on {
		return temporal.SearchAttributes{}
	}
	digest, _ := workflow.GetTypedSearchAttributes(ctx).GetKeyword(SearchSpecDigest)
	return StartAttributes(string(kindTask), id, campaign, digest, string(status.TaskProvisioning))
}

// kindTask is the kind of a campaign's child tasks, in their memo and
// search attributes.
const kindTask = "Task"

// MemoCampaign is the memo key of the campaign a child task belongs to.
const MemoCampaign = "fleetlift.campaign"

// childMemo is the memo of a campaign's child task id: its kind and id,
// its campaign, and the campaign's digest and generation as the
// campaign's memo has them.
func childMemo(ctx workflow.Context, id, campaign string, generation int64) map[string]any {
	m := map[string]any{status.MemoKind: kindTask, status.MemoID: id, MemoCampaign: campaign}
	if p, ok := workflow.GetInfo(ctx).Memo.GetFields()[status.MemoDigest]; ok {
		var digest string
		if payload.Converter.FromPayload(p, &digest) == nil && digest != "" {
			m[status.MemoDigest] = digest
		}
	}
	if generation > 0 {
		m[status.MemoGeneration] = generation
	}
	return m
}
