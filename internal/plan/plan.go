package plan

import (
	"encoding/json"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// Desired is the state read from the campaigns repository at a revision.
type Desired struct {
	// Definitions are the valid Task and Campaign definitions, unique by
	// ID (if not, the first wins).
	Definitions []spec.Definition
	// Errors are the problems with definition files that did not load.
	// Each appears in the plan, and keeps any recorded campaign that may
	// be defined in its file from being orphaned.
	Errors []*spec.Error
	// Approvals are the approval records that count: read from Git and,
	// for committed records, passed by the approval gate (who may
	// approve; the author of a change never approves it alone).
	Approvals []approval.Record
	// Refused are the records the approval gate refused, each with why;
	// the plan shows them as ignored.
	Refused []Refusal
}

// Refusal is an approval record that does not count, and why.
type Refusal struct {
	Record approval.Record
	Reason string
}

// Policy is what the repository config allows.
type Policy struct {
	// Prune allows campaigns removed from Git to be cancelled; each
	// campaign must allow it too (sync_policy.prune).
	Prune bool
}

// Action is what reconciling does to one campaign.
type Action string

const (
	// Unchanged: the recorded spec is the desired one.
	Unchanged Action = "unchanged"
	// Create: defined in Git, never applied; a run starts.
	Create Action = "create"
	// Update: the spec changed; the run takes it as Change.Strategy says.
	Update Action = "update"
	// Suspend: the spec now says suspend; no new task starts.
	Suspend Action = "suspend"
	// Resume: the spec no longer says suspend; tasks start again.
	Resume Action = "resume"
	// Orphaned: recorded, gone from Git, and not allowed to be pruned;
	// nothing is done to it (Change.Reason says why).
	Orphaned Action = "orphaned"
	// Prune: recorded, gone from Git, and allowed to be pruned; its run
	// is cancelled.
	Prune Action = "prune"
	// Unknown: recorded, not among the loaded definitions, and its
	// definition file is invalid (or may be); the run is left as it is.
	Unknown Action = "unknown"
	// Reopen: the spec is unchanged, and repositories whose pull
	// request merged no longer pass its done_when (they regressed):
	// their change is made again (Change.Reopen names their units).
	Reopen Action = "reopen"
)

func (a Action) String() string { return string(a) }

// Changes reports whether the action does something to a run.
func (a Action) Changes() bool {
	switch a {
	case Create, Update, Suspend, Resume, Prune, Reopen:
		return true
	}
	return false
}

// Change is the plan for one campaign or task id.
type Change struct {
	ID     string
	Kind   spec.Kind
	Action Action
	// File is the definition file: the desired one, or for a campaign
	// missing from Git the recorded one (which may be unknown).
	File string
	// PreviousFile is the recorded file when the definition now lives in
	// another file under the same id (a rename).
	PreviousFile string
	// OldDigest is the recorded spec digest ("" on Create); NewDigest the
	// desired one ("" when the campaign is missing from Git).
	OldDigest, NewDigest string
	// Strategy is how the run takes a changed spec: the spec's
	// sync_policy.update for a Campaign; a Task, or a definition whose
	// kind changed, always restarts. Empty when the spec did not change.
	Strategy spec.UpdateStrategy
	// Suspend is the desired spec's suspend: a Create with it set starts
	// no task.
	Suspend bool
	// Fields is the per-field diff of the spec, sorted by path. It is
	// empty when the spec did not change, or when the recorded spec is
	// unknown (then only the digests tell the change).
	Fields []FieldDiff
	// FieldsKnown reports whether the recorded spec was known, so that
	// Fields is the whole diff. When the spec changed and it is false,
	// only the digests tell what changed.
	FieldsKnown bool
	// Repositories are the repositories added and removed: on Create,
	// every repository; on a change, those added or removed by it.
	Repositories RepoDiff
	// Phase is the recorded run's phase ("" on Create).
	Phase state.Phase
	// Reason says why a campaign is Orphaned rather than pruned, or why
	// its action is Unknown.
	Reason string
	// Cost is what the run the change starts or changes is projected to
	// cost, for an agentic definition created or changed; nil otherwise.
	Cost *Cost
	// Merge is the definition's pull_request.merge, for a definition
	// created or changed that declares one: what will merge its pull
	// requests without a command.
	Merge *spec.Merge
	// KeepCurrent is the definition's pull_request.keep_current, for a
	// definition created or changed that declares one other than never:
	// when its pull requests' changes are made again on their bases.
	KeepCurrent string
	// Closes says, for a Prune of a run whose spec declares
	// pull_request.close, which of its pull requests the prune closes.
	Closes *Close
	// Reopen names, for a Reopen, the units (repositories, or groups)
	// whose done_when regressed, sorted.
	Reopen []string
}

// Close is what a prune closes: the run's Open pull requests, each
// with Comment, their branches deleted with DeleteBranch.
type Close struct {
	Open         int    `json:"open"`
	Comment      string `json:"comment,omitempty"`
	DeleteBranch bool   `json:"delete_branch"`
}

// Cost projects what an agentic run costs from what recorded runs cost
// per repository: this campaign's last run when it priced its calls,
// else every recorded run that did, together.
type Cost struct {
	// Repositories is how many repositories the run will work on: all
	// of them for a new run, those not started yet and those added for
	// an update in place.
	Repositories int
	// PerRepository is the recorded cost per repository projected from,
	// in US dollars; From says whose ("this campaign's last run", "3
	// recorded runs"). From is "" when no recorded run priced its calls:
	// there is no projection.
	PerRepository float64
	From          string
	// Budget is the definition's max_cost_per_campaign, and PerTask its
	// limits.max_cost_per_task; zero when it sets none.
	Budget, PerTask float64
}

// Projected is the projected cost in US dollars, and whether there is
// one.
func (c *Cost) Projected() (float64, bool) {
	if c == nil || c.From == "" {
		return 0, false
	}
	return c.PerRepository * float64(c.Repositories), true
}

// SpecChanged reports whether an id both desired and recorded has a new
// spec (a recorded digest that is unknown counts as changed).
func (c Change) SpecChanged() bool {
	switch c.Action {
	case Update, Suspend, Resume, Unchanged:
		return c.OldDigest != c.NewDigest
	}
	return false
}

// FieldDiff is one changed field of a spec. Old and New are JSON values;
// nil means the field is absent on that side.
type FieldDiff struct {
	// Path names the field by its JSON keys, with list elements by name
	// where they have one: "template.execution.agentic.prompt",
	// "repositories[ledger-svc].branch", "sync_policy.update".
	Path string
	Old  json.RawMessage
	New  json.RawMessage
}

// RepoDiff lists repositories by name ("group/name" for a repository in a
// group), sorted.
type RepoDiff struct {
	Added   []string
	Removed []string
}

// Empty reports whether no repository was added or removed.
func (d RepoDiff) Empty() bool { return len(d.Added) == 0 && len(d.Removed) == 0 }

// ApprovalStatus says whether an approval record takes effect.
type ApprovalStatus string

const (
	// ApprovalApply: the record takes effect; its action is sent to the run.
	ApprovalApply ApprovalStatus = "apply"
	// ApprovalIgnored: the record does not apply (ApprovalChange.Reason).
	ApprovalIgnored ApprovalStatus = "ignored"
	// ApprovalDone: the run has carried the record out already.
	ApprovalDone ApprovalStatus = "done"
)

func (s ApprovalStatus) String() string { return string(s) }

// ApprovalChange is the plan for one approval record.
type ApprovalChange struct {
	Record approval.Record
	Status ApprovalStatus
	// Reason says why the record is ignored.
	Reason string
	// Current is the digest of the result awaiting approval for the
	// record's target now, if any.
	Current string
}

// Summary counts a plan's actions.
type Summary struct {
	Create, Update, Suspend, Resume, Unchanged int
	Prune, Orphaned, Unknown, Reopen           int
	// ApprovalsApplied, ApprovalsIgnored and ApprovalsDone count
	// approval records.
	ApprovalsApplied, ApprovalsIgnored, ApprovalsDone int
	// Errors counts problems with definition files.
	Errors int
}

// Plan is what reconciling the desired state with the recorded state
// would do.
type Plan struct {
	// Changes has one entry per id, desired or recorded, sorted by ID,
	// including unchanged ones.
	Changes []Change
	// Approvals has one entry per approval record, sorted by target and
	// file.
	Approvals []ApprovalChange
	// Errors are the invalid definition files' problems, sorted by file
	// and position.
	Errors []*spec.Error
	// Recorded says which recorded state the plan was computed against.
	// Compute leaves it empty; the caller that read the state fills it.
	Recorded Recorded
}

// Recorded says which recorded state a plan was computed against.
type Recorded struct {
	// Source is where the recorded state came from: "temporal",
	// "file:PATH" or "none".
	Source string
	// Assumed, when set, says what the plan assumed instead of the
	// recorded state it could not read, and why it could not.
	Assumed string
}

// HasChanges reports whether carrying out the plan would do anything:
// create, update, suspend, resume or prune a campaign, or apply an
// approval. Orphaned and unknown campaigns are reported but left alone.
func (p Plan) HasChanges() bool {
	s := p.Summary()
	return s.Create+s.Update+s.Suspend+s.Resume+s.Prune+s.Reopen+s.ApprovalsApplied > 0
}

// Empty reports whether there is nothing to show: no changes, nothing
// orphaned or unknown, no approval records and no errors.
func (p Plan) Empty() bool {
	s := p.Summary()
	return !p.HasChanges() && s.Orphaned+s.Unknown+s.ApprovalsIgnored+s.Errors == 0
}

// Summary counts the plan's actions and approvals.
func (p Plan) Summary() Summary {
	var s Summary
	for _, c := range p.Changes {
		switch c.Action {
		case Create:
			s.Create++
		case Update:
			s.Update++
		case Suspend:
			s.Suspend++
		case Resume:
			s.Resume++
		case Unchanged:
			s.Unchanged++
		case Reopen:
			s.Reopen++
		case Prune:
			s.Prune++
		case Orphaned:
			s.Orphaned++
		case Unknown:
			s.Unknown++
		}
	}
	for _, a := range p.Approvals {
		switch a.Status {
		case ApprovalApply:
			s.ApprovalsApplied++
		case ApprovalDone:
			s.ApprovalsDone++
		default:
			s.ApprovalsIgnored++
		}
	}
	s.Errors = len(p.Errors)
	return s
}
