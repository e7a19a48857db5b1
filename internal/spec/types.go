package spec

import (
	"encoding/json"
	"fmt"
	"time"
)

// SchemaVersion is the only definition schema version this build reads.
const SchemaVersion = 1

// Kind says what a definition file describes.
type Kind string

const (
	KindTask     Kind = "Task"
	KindCampaign Kind = "Campaign"
	KindConfig   Kind = "Config"
	KindApproval Kind = "Approval"
)

func (k Kind) String() string { return string(k) }

// Mode says whether a run changes code or collects reports.
type Mode string

const (
	ModeTransform Mode = "transform"
	ModeReport    Mode = "report"
)

func (m Mode) String() string { return string(m) }

// FailureAction is what a run does when its failure threshold is passed.
type FailureAction string

const (
	FailurePause FailureAction = "pause"
	FailureAbort FailureAction = "abort"
)

func (a FailureAction) String() string { return string(a) }

// Capture says where a report is read from.
type Capture string

const (
	CaptureFile   Capture = "file"
	CaptureStdout Capture = "stdout"
)

func (c Capture) String() string { return string(c) }

// UpdateStrategy says what a changed Campaign spec does to its run.
type UpdateStrategy string

const (
	UpdateInPlace UpdateStrategy = "in_place"
	UpdateRestart UpdateStrategy = "restart"
)

func (s UpdateStrategy) String() string { return string(s) }

// ForgeType names a forge adapter.
type ForgeType string

const (
	ForgeLocal  ForgeType = "local"
	ForgeGitHub ForgeType = "github"
	ForgeGitea  ForgeType = "gitea"
)

func (f ForgeType) String() string { return string(f) }

// Duration is a time.Duration written as a Go duration string ("30m").
// It always encodes in canonical form, so "30m" and "1800s" are equal.
type Duration time.Duration

// MarshalJSON encodes d as its canonical duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON decodes a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string: %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// Repository is a git repository cloned into the sandbox.
type Repository struct {
	URL string `json:"url"`
	// Branch is the branch cloned and the one pull requests go to; empty,
	// the repository's default branch (what its HEAD names).
	Branch     string   `json:"branch,omitempty"`
	Name       string   `json:"name"`
	Setup      []string `json:"setup,omitempty"`
	Submodules bool     `json:"submodules,omitempty"`
}

// RepositoryQuery selects repositories of one owner on the campaigns
// repository's forge (package repoquery resolves it). A repository must
// match every filter set; archived repositories and forks only with
// Archived and Forks.
type RepositoryQuery struct {
	Owner    string   `json:"owner"`
	Topics   []string `json:"topics,omitempty"`
	Language string   `json:"language,omitempty"`
	// Names and Exclude are path.Match patterns over repository names:
	// a name must match one of Names (when given) and none of Exclude.
	Names      []string `json:"names,omitempty"`
	Exclude    []string `json:"exclude,omitempty"`
	Archived   bool     `json:"archived,omitempty"`
	Forks      bool     `json:"forks,omitempty"`
	CodeSearch string   `json:"code_search,omitempty"`
	// Setup and Submodules are given to each repository selected.
	Setup      []string `json:"setup,omitempty"`
	Submodules bool     `json:"submodules,omitempty"`
}

// ForEachTarget is one iteration of a report over parts of a repository.
type ForEachTarget struct {
	Name    string `json:"name"`
	Context string `json:"context"`
}

// Group is a set of repositories that run together as one task.
type Group struct {
	Name         string       `json:"name"`
	Repositories []Repository `json:"repositories"`
	// MaxParallel is how many of the group's repositories its one agent
	// clones and sets up, and pushes and proposes, at once; 0 (left out)
	// means DefaultGroupParallel.
	MaxParallel int `json:"max_parallel,omitempty"`
}

// DefaultGroupParallel is how many repositories of a group are cloned,
// and pushed and proposed, at once when the group does not say.
const DefaultGroupParallel = 4

// Verifier is a command that must succeed before results are accepted.
type Verifier struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
}

// AgentLimits bound an agent's work.
type AgentLimits struct {
	MaxIterations         int `json:"max_iterations"`
	MaxTokens             int `json:"max_tokens"`
	MaxVerifierRetries    int `json:"max_verifier_retries"`
	MaxSteeringIterations int `json:"max_steering_iterations"`
	// MaxCostPerTask is the most the task's model calls may cost, in US
	// dollars; zero: no bound but the worker's.
	MaxCostPerTask float64 `json:"max_cost_per_task,omitempty"`
}

// ReportOutput configures report collection.
type ReportOutput struct {
	// Schema is a JSON Schema for the report's frontmatter.
	Schema  map[string]any `json:"schema,omitempty"`
	Capture Capture        `json:"capture"`
}

// Agentic runs an AI coding agent with a prompt.
type Agentic struct {
	Prompt    string        `json:"prompt"`
	Verifiers []Verifier    `json:"verifiers,omitempty"`
	Limits    AgentLimits   `json:"limits"`
	Output    *ReportOutput `json:"output,omitempty"`
	Agent     string        `json:"agent"`
}

// Deterministic runs a fixed command in an image.
type Deterministic struct {
	Image     string            `json:"image"`
	Command   []string          `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	Verifiers []Verifier        `json:"verifiers,omitempty"`
}

// Execution holds exactly one of Agentic and Deterministic.
type Execution struct {
	Agentic       *Agentic       `json:"agentic,omitempty"`
	Deterministic *Deterministic `json:"deterministic,omitempty"`
}

// Failure says when a run stops to ask.
type Failure struct {
	ThresholdPercent int           `json:"threshold_percent"`
	Action           FailureAction `json:"action"`
}

// PullRequest configures the pull requests a transform opens.
type PullRequest struct {
	BranchPrefix string   `json:"branch_prefix"`
	Title        string   `json:"title"`
	Body         string   `json:"body,omitempty"`
	Labels       []string `json:"labels,omitempty"`
	Reviewers    []string `json:"reviewers,omitempty"`
	Draft        bool     `json:"draft,omitempty"`
	// Merge, when set, has fleetlift merge each pull request once it may.
	Merge *Merge `json:"merge,omitempty"`
	// Close, when set, closes the pull requests still open when the
	// definition is removed and pruned.
	Close *Close `json:"close,omitempty"`
	// KeepCurrent is when an open pull request's change is made again
	// on its base as it is now: KeepCurrentNever, KeepCurrentConflicted
	// or KeepCurrentBehind.
	KeepCurrent string `json:"keep_current,omitempty"`
}

// pull_request.keep_current values.
const (
	KeepCurrentNever      = "never"
	KeepCurrentConflicted = "conflicted"
	KeepCurrentBehind     = "behind"
)

// Close is how the open pull requests of a removed definition close.
type Close struct {
	Comment      string `json:"comment,omitempty"`
	DeleteBranch bool   `json:"delete_branch"`
}

// Merge is when and how fleetlift merges the pull requests it opened.
type Merge struct {
	Method        string   `json:"method"`
	RequireReview bool     `json:"require_review"`
	After         Duration `json:"after,omitempty"`
	DeleteBranch  bool     `json:"delete_branch"`
}

// SecretRef names a Kubernetes secret key.
type SecretRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// Credential refers to a secret; the secret's value never appears in specs.
type Credential struct {
	SecretRef SecretRef `json:"secret_ref"`
}

// Credentials are the secrets a task may use.
type Credentials struct {
	GitHub    *Credential `json:"github,omitempty"`
	Anthropic *Credential `json:"anthropic,omitempty"`
}

// ResourceList is a set of resource quantities.
type ResourceList struct {
	Memory string `json:"memory,omitempty"`
	CPU    string `json:"cpu,omitempty"`
}

// Resources are sandbox resource limits and requests.
type Resources struct {
	Limits   *ResourceList `json:"limits,omitempty"`
	Requests *ResourceList `json:"requests,omitempty"`
}

// Sandbox configures where a task runs.
type Sandbox struct {
	Namespace    string            `json:"namespace,omitempty"`
	RuntimeClass string            `json:"runtime_class,omitempty"`
	NodeSelector map[string]string `json:"node_selector,omitempty"`
	Resources    *Resources        `json:"resources,omitempty"`
}

// DoneWhen is a transform's done_when: the check that says a merged
// repository's change is finished.
type DoneWhen struct {
	Command []string `json:"command"`
	// Image is the check's image; empty, the deterministic execution's.
	Image string `json:"image,omitempty"`
	// Every is how often a merged repository is checked again; 0 means
	// DefaultDoneEvery.
	Every Duration `json:"every,omitempty"`
}

// DefaultDoneEvery is how often a merged repository's done_when runs
// again when the definition does not say.
const DefaultDoneEvery = 24 * time.Hour

// Work is what a task does, independent of the repositories it does it on.
type Work struct {
	Mode            Mode            `json:"mode"`
	Transformation  *Repository     `json:"transformation,omitempty"`
	ForEach         []ForEachTarget `json:"for_each,omitempty"`
	Execution       Execution       `json:"execution"`
	Timeout         Duration        `json:"timeout"`
	RequireApproval bool            `json:"require_approval"`
	PullRequest     *PullRequest    `json:"pull_request,omitempty"`
	DoneWhen        *DoneWhen       `json:"done_when,omitempty"`
	Sandbox         *Sandbox        `json:"sandbox,omitempty"`
	Credentials     *Credentials    `json:"credentials,omitempty"`
}

// normalize fills what the schema cannot default without a cycle: an
// agentic report with no output section reads REPORT.md.
func (w *Work) normalize() {
	if w.Mode == ModeReport && w.Execution.Agentic != nil && w.Execution.Agentic.Output == nil {
		w.Execution.Agentic.Output = &ReportOutput{Capture: CaptureFile}
	}
}

// Task is one change, or one report, over a fixed set of repositories.
type Task struct {
	Version     int    `json:"version"`
	Kind        Kind   `json:"kind"`
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Team is who the task's model calls are counted for (metrics).
	Team string `json:"team,omitempty"`
	Work
	Repositories []Repository `json:"repositories,omitempty"`
	// RepositoriesFrom are queries whose repositories, once resolved,
	// are among Repositories (see Definition.Resolved).
	RepositoriesFrom []RepositoryQuery `json:"repositories_from,omitempty"`
	Targets          []Repository      `json:"targets,omitempty"`
	Groups           []Group           `json:"groups,omitempty"`
	MaxParallel      int               `json:"max_parallel"`
	Failure          Failure           `json:"failure"`
}

// RateLimit is a campaign's own pull-request creation budget, on top of
// the forge's.
type RateLimit struct {
	PullRequestsPerHour int `json:"pull_requests_per_hour"`
	Burst               int `json:"burst"`
}

// SyncPolicy says how a campaign follows changes to its definition.
type SyncPolicy struct {
	Prune  bool           `json:"prune,omitempty"`
	Update UpdateStrategy `json:"update"`
}

// Campaign applies a task template to each of many repositories.
type Campaign struct {
	Version     int    `json:"version"`
	Kind        Kind   `json:"kind"`
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Team is who the campaign's model calls are counted for (metrics).
	Team     string `json:"team,omitempty"`
	Template Work   `json:"template"`
	// MaxCostPerCampaign, when above zero, pauses the campaign once its
	// tasks' model calls cost that many US dollars.
	MaxCostPerCampaign float64      `json:"max_cost_per_campaign,omitempty"`
	Repositories       []Repository `json:"repositories,omitempty"`
	// RepositoriesFrom are queries whose repositories, once resolved,
	// are among Repositories (see Definition.Resolved).
	RepositoriesFrom []RepositoryQuery `json:"repositories_from,omitempty"`
	Groups           []Group           `json:"groups,omitempty"`
	BatchSize        int               `json:"batch_size"`
	// StrictBatches starts each batch of BatchSize tasks only once the
	// one before has finished; by default a task starts as soon as one
	// finishes, MaxParallel at once.
	StrictBatches bool    `json:"strict_batches,omitempty"`
	MaxParallel   int     `json:"max_parallel"`
	Failure       Failure `json:"failure"`
	// MaxPendingChecks, when above zero, holds new tasks back while that
	// many of the campaign's open pull requests have checks pending.
	MaxPendingChecks int `json:"max_pending_checks,omitempty"`
	// RateLimit, when set, paces the campaign's pull requests; nil leaves
	// them to the forge's own budget.
	RateLimit  *RateLimit `json:"rate_limit,omitempty"`
	Suspend    bool       `json:"suspend,omitempty"`
	SyncPolicy SyncPolicy `json:"sync_policy"`
}

// Watch is the branch and directory a reconciler launches from.
type Watch struct {
	Branch string `json:"branch"`
	Path   string `json:"path"`
	// RequireReviewedMerge launches only from a head commit that is the
	// merge (or squash or rebase result) of a pull request approved by
	// someone other than its author. The schema refuses it with the
	// local forge; unset, it is on with github and gitea.
	RequireReviewedMerge bool `json:"require_reviewed_merge,omitempty"`
}

// ApproverRule lists who may approve the definitions under a path glob.
type ApproverRule struct {
	Path  string   `json:"path"`
	Users []string `json:"users,omitempty"`
	Teams []string `json:"teams,omitempty"`
}

// Forge selects where pull requests go: the local forge, or one of the
// forges the operator allows, by Name or by Type and URL. Which forges
// fleetlift talks to, and with which tokens, is the operator's choice:
// the schema refuses a token variable here.
type Forge struct {
	Type ForgeType `json:"type"`
	Name string    `json:"name,omitempty"`
	URL  string    `json:"url,omitempty"`
}

// StatusMirror is where the readable status is written back to Git.
type StatusMirror struct {
	Branch string `json:"branch"`
}

// Notifications are a config's notification templates and
// subscriptions (#Notifications). LoadConfig has checked that every
// template parses as package notify executes it and that every
// subscription names a template that is there and globs that compile.
type Notifications struct {
	Templates     map[string]string `json:"templates,omitempty"`
	Subscriptions []Subscription    `json:"subscriptions,omitempty"`
}

// Subscription sends events (#NotifyEvent) to the operator's services.
type Subscription struct {
	On        []string `json:"on"`
	To        []string `json:"to"`
	Campaigns []string `json:"campaigns,omitempty"`
	Template  string   `json:"template,omitempty"`
}

// Config is a campaigns repository's fleetlift.yaml or fleetlift.cue.
type Config struct {
	// File is the config's path relative to the load root; it is not
	// part of the config.
	File       string         `json:"-"`
	Version    int            `json:"version"`
	Kind       Kind           `json:"kind"`
	Watch      Watch          `json:"watch"`
	Approvers  []ApproverRule `json:"approvers,omitempty"`
	CodeOwners bool           `json:"codeowners,omitempty"`
	Forge      Forge          `json:"forge"`
	Prune      bool           `json:"prune,omitempty"`
	Status     StatusMirror   `json:"status"`
	// Notifications say whom to tell when a campaign needs someone or
	// ends (package notify).
	Notifications *Notifications `json:"notifications,omitempty"`

	// positions locate the forge section's fields in the file (see
	// FieldError).
	positions map[string][2]int
}

// FieldError is a problem with field of the config (such as "forge.url")
// found after loading, located in the config's file where the loader saw
// the field.
func (c *Config) FieldError(field, msg string) *Error {
	e := &Error{File: c.File, Field: field, Msg: msg}
	if p, ok := c.positions[field]; ok {
		e.Line, e.Column = p[0], p[1]
	}
	return e
}

// Approval is an approval record: one YAML file under approvals/ in a
// campaigns repository saying who decided what about which result. The
// schema (#Approval) has checked it: Action is one of approve, reject,
// steer, continue, abort and retry; approve, reject and steer name a
// ResultDigest; continue, abort and retry a Generation; steer has a
// Prompt. Package approval gives the record its meaning (approval.Record)
// and decides who may make it.
type Approval struct {
	// File is the record's path relative to the load root; it is not
	// part of the record.
	File    string `json:"-"`
	Version int    `json:"version"`
	Kind    Kind   `json:"kind"`
	// Target is a campaign or task id, optionally followed by
	// "/<repository or group>" ("slog-rollout/payments").
	Target string `json:"target"`
	Action string `json:"action"`
	// ResultDigest is the "sha256:<hex>" digest of the result the
	// approver saw.
	ResultDigest string `json:"result_digest,omitempty"`
	// Generation is the generation of the run decided about (the
	// recorded state's generation); required for continue, abort and
	// retry, optional for the others.
	Generation int64 `json:"generation,omitempty"`
	// By is the forge login of who decided.
	By     string `json:"by"`
	Prompt string `json:"prompt,omitempty"`
	// Comment is for people; fleetlift does not act on it.
	Comment string `json:"comment,omitempty"`
}
