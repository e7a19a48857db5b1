package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Dir is the protocol directory inside a sandbox workspace.
const Dir = ".fleetlift"

// EnvCommandGOMAXPROCS is set in the agent's environment by a sandbox
// provider that starts the agent with a GOMAXPROCS of its own: it holds
// the GOMAXPROCS the sandbox's environment has (empty: none), which the
// agent gives its commands in place of its own.
const EnvCommandGOMAXPROCS = "FLEETLIFT_COMMAND_GOMAXPROCS"

// Next is the sandbox an agent serves after the one it finished, as a
// sandbox provider that keeps agents for more than one sandbox (the
// local one) tells it on the agent's control socket (fleetlift-agent
// serve --next-fd). The agent writes Idle there, one line, once a
// sandbox's terminal phase is written and nothing it ran is left; the
// provider answers with a Next, one line of JSON, or closes the socket,
// and the agent exits.
type Next struct {
	// Workspace is the new sandbox's workspace, an absolute path: the
	// agent's working directory from then on, and the one directory of
	// it its commands may write beside Home.
	Workspace string `json:"workspace"`
	// Home is the new sandbox's HOME.
	Home string `json:"home"`
	// Lease is the new sandbox's lease file (--lease), empty for none.
	Lease string `json:"lease,omitempty"`
	// Log, when set, is the file the agent's output goes to from then
	// on (appended to, created 0600).
	Log string `json:"log,omitempty"`
}

// Idle is what an agent says on its control socket once it has finished
// a sandbox (see Next).
const Idle = "idle"

// Protocol file names, relative to Dir.
const (
	ManifestFile = "manifest.json"
	StatusFile   = "status.json"
	ResultFile   = "result.json"
	SteeringFile = "steering.json"
	// GatewayKeyFile holds the sandbox's key to the worker's model
	// gateway (written by the sandbox provider, for the agent CLI alone).
	GatewayKeyFile = "gateway-key"
	// GatewayURLFile, when there, holds the http://HOST:PORT the agent
	// reaches the worker's gateway at over the network (Kubernetes
	// sandboxes), written beside the key by the worker that serves the
	// sandbox now: another than the one that started it, once that one
	// is gone.
	GatewayURLFile = "gateway-url"
	// UsageFile is what the model gateway counted for the sandbox
	// (ModelUsage), written by the gateway on the trusted side.
	UsageFile = "usage.json"
)

// The model APIs a worker's gateway may serve, as its provider tells the
// agent (--gateway-api), and where the gateway serves the
// OpenAI-compatible one (the agent CLI's base URL is the gateway's
// address + GatewayOpenAIPrefix + "v1").
const (
	GatewayAnthropic    = "anthropic"
	GatewayOpenAI       = "openai"
	GatewayOpenAIPrefix = "/openai/"
	// GatewayUsagePath answers a sandbox's GET, with its key, with what
	// its model calls used so far (ModelUsage as JSON): the agent reads
	// its usage there when its CLI is done, the gateway's own count.
	GatewayUsagePath = "/fleetlift/usage"
	// GatewayEgressPath is where a sandbox's agent reaches the worker's
	// egress proxy over the network: a GET there with the sandbox's key
	// and "Upgrade: " + GatewayEgressUpgrade is answered with 101, and
	// the connection then speaks to the proxy as to any HTTP proxy.
	GatewayEgressPath    = "/fleetlift/egress"
	GatewayEgressUpgrade = "fleetlift-egress"
)

// BundleFile is where, relative to Dir, the agent leaves the change it
// collected in repository name for the worker to propose: a git bundle
// of one commit on the repository's base (RepositoryResult.Base), under
// BundleRef, whose tree is RepositoryResult.Tree. The worker, which
// holds the forge's credentials, reads it, checks it and pushes; the
// agent never pushes.
func BundleFile(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "out/" + hex.EncodeToString(sum[:12]) + ".bundle"
}

// BundleRef is the one ref of a BundleFile.
const BundleRef = "refs/fleetlift/change"

// ModelUsage is what a sandbox's model calls used, as the model gateway
// counted them from the model's own responses.
type ModelUsage struct {
	Requests                 int64 `json:"requests"`
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
	// CostUSD is what the tokens cost, in US dollars, at the prices of
	// the worker's price table for the model that answered each call.
	CostUSD float64 `json:"cost_usd,omitempty"`
	// Unpriced names the models that answered calls the price table has
	// no price for, separated by ", ": CostUSD leaves those calls out.
	Unpriced string `json:"unpriced_models,omitempty"`
	// Refused says why the gateway refused a request (a spent
	// limits.max_tokens or limits.max_cost_per_task), "" when it refused
	// none.
	Refused string `json:"refused,omitempty"`
}

// Plus is u and o together, nil when both are nil: what a task's
// sandboxes used across its runs. Refused is o's, or else u's.
func (u *ModelUsage) Plus(o *ModelUsage) *ModelUsage {
	if u == nil && o == nil {
		return nil
	}
	var sum ModelUsage
	for _, x := range []*ModelUsage{u, o} {
		if x == nil {
			continue
		}
		sum.Requests += x.Requests
		sum.InputTokens += x.InputTokens
		sum.OutputTokens += x.OutputTokens
		sum.CacheCreationInputTokens += x.CacheCreationInputTokens
		sum.CacheReadInputTokens += x.CacheReadInputTokens
		sum.CostUSD += x.CostUSD
		for m := range strings.SplitSeq(x.Unpriced, ", ") {
			sum.Unpriced = addName(sum.Unpriced, m)
		}
		if x.Refused != "" {
			sum.Refused = x.Refused
		}
	}
	return &sum
}

// USD is an amount of US dollars as fleetlift shows it: to the cent, or
// to a hundredth of a cent below a dollar ($0.0123).
func USD(x float64) string {
	if x != 0 && x < 1 && x > -1 {
		return fmt.Sprintf("$%.4f", x)
	}
	return fmt.Sprintf("$%.2f", x)
}

// addName adds name to list, names separated by ", ", unless it is
// there already or empty.
func addName(list, name string) string {
	switch {
	case name == "" || slices.Contains(strings.Split(list, ", "), name):
		return list
	case list == "":
		return name
	}
	return list + ", " + name
}

// Tokens is every token the model processed: input, output and cache
// alike. A token budget counts these.
func (u ModelUsage) Tokens() int64 {
	return u.InputTokens + u.OutputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

// Phase is where the agent is in its pipeline. It moves forward only:
// initializing → executing → verifying → awaiting_input → creating_prs →
// complete | failed | cancelled (steering returns awaiting_input to
// executing).
type Phase string

const (
	PhaseInitializing  Phase = "initializing"
	PhaseExecuting     Phase = "executing"
	PhaseVerifying     Phase = "verifying"
	PhaseAwaitingInput Phase = "awaiting_input"
	PhaseCreatingPRs   Phase = "creating_prs"
	PhaseComplete      Phase = "complete"
	PhaseFailed        Phase = "failed"
	PhaseCancelled     Phase = "cancelled"
)

func (p Phase) String() string { return string(p) }

// Terminal reports whether the agent has finished for good.
func (p Phase) Terminal() bool {
	return p == PhaseComplete || p == PhaseFailed || p == PhaseCancelled
}

// Mode is transform (change code, open PRs), report (collect reports)
// or check (run a command read-only: a definition's done_when).
type Mode string

const (
	ModeTransform Mode = "transform"
	ModeReport    Mode = "report"
	// ModeCheck runs a deterministic command in each repository and
	// keeps nothing it changed: a repository succeeds when the command
	// exits 0, and fails with ErrorKind CheckFailed when it does not.
	ModeCheck Mode = "check"
)

// CheckFailed is the ErrorKind of a repository whose check command
// exited with a status other than 0: the check ran and said no.
const CheckFailed = "check_failed"

// ExecutionType selects the transform step.
type ExecutionType string

const (
	ExecutionAgentic       ExecutionType = "agentic"
	ExecutionDeterministic ExecutionType = "deterministic"
)

// Repository is a repository to clone. Name is the directory under the
// workspace (or under targets/ for targets); it is validated by the spec
// loader and checked again by the agent.
type Repository struct {
	URL        string   `json:"url"`
	Branch     string   `json:"branch,omitempty"`
	Name       string   `json:"name"`
	Setup      []string `json:"setup,omitempty"`
	Submodules bool     `json:"submodules,omitempty"`
}

// ForEachTarget is one iteration of a report.
type ForEachTarget struct {
	Name    string `json:"name"`
	Context string `json:"context"`
}

// Verifier is a command that must exit 0 in each repository.
type Verifier struct {
	Name    string   `json:"name"`
	Command []string `json:"command"`
}

// Execution describes the transform step.
type Execution struct {
	Type ExecutionType `json:"type"`
	// Agentic.
	Prompt string `json:"prompt,omitempty"`
	// Agent names the agent CLI ("claude-code" or another configured one).
	Agent string `json:"agent,omitempty"`
	// Deterministic: Command + Args run in each repository, with Env.
	Image   string            `json:"image,omitempty"`
	Command []string          `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
}

// Limits bound the agent's work.
type Limits struct {
	MaxIterations int `json:"max_iterations,omitempty"`
	MaxTokens     int `json:"max_tokens,omitempty"`
	// MaxCostUSD is the most the task's model calls may cost, in US
	// dollars, at the worker's prices (limits.max_cost_per_task); zero:
	// no bound but the worker's own.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// Spent is what the task's earlier sandboxes, lost to crashes, used:
	// MaxTokens and MaxCostUSD bound it and this sandbox's calls
	// together. Set by the worker, never by a definition.
	Spent *ModelUsage `json:"spent,omitempty"`
	// MaxVerifierRetries is how many times the agent runs again after
	// failing verifiers; nil: the agent's default (0 is none).
	MaxVerifierRetries *int `json:"max_verifier_retries,omitempty"`
}

// Output configures report collection.
type Output struct {
	// Schema is a JSON Schema for the REPORT.md frontmatter.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Capture is "file" (REPORT.md in the repository) or "stdout".
	Capture string `json:"capture,omitempty"`
}

// HasSchema reports whether o has a schema (see SchemaSet): then a report
// must have frontmatter, and the control plane checks it.
func (o *Output) HasSchema() bool {
	return o != nil && SchemaSet(o.Schema)
}

// SchemaSet reports whether raw, an output.schema, is a schema: neither
// empty nor null.
func SchemaSet(raw []byte) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && string(t) != "null"
}

// PullRequest configures the branch pushed and the PR opened in each
// repository; the branch is BranchName(BranchPrefix, id).
type PullRequest struct {
	BranchPrefix string   `json:"branch_prefix"`
	Title        string   `json:"title"`
	Body         string   `json:"body,omitempty"`
	Labels       []string `json:"labels,omitempty"`
	Reviewers    []string `json:"reviewers,omitempty"`
	Draft        bool     `json:"draft,omitempty"`
}

// CommitMessage is the message of the commit proposed: the title, and
// the body after a blank line when there is one.
func (p PullRequest) CommitMessage() string {
	if strings.TrimSpace(p.Body) == "" {
		return p.Title
	}
	return p.Title + "\n\n" + p.Body
}

// BranchName is the deterministic branch for the changes of a Task or
// Campaign with the given id (the same in every repository, as Turbolift
// does): a retry finds the branch, and PR, it already made.
func BranchName(prefix, taskID string) string {
	return fmt.Sprintf("%s/%s", prefix, taskID)
}

// GitConfig is the identity and clone settings the agent uses.
type GitConfig struct {
	UserEmail  string `json:"user_email"`
	UserName   string `json:"user_name"`
	CloneDepth int    `json:"clone_depth,omitempty"`
}

// Manifest is what the worker asks the agent to do (manifest.json).
type Manifest struct {
	TaskID string `json:"task_id"`
	// Team is the team the definition names (team:), for chargeback:
	// the worker's metrics count the task's model calls and their cost
	// under it. "" when it names none.
	Team           string          `json:"team,omitempty"`
	Mode           Mode            `json:"mode"`
	Title          string          `json:"title"`
	Repositories   []Repository    `json:"repositories,omitempty"`
	Transformation *Repository     `json:"transformation,omitempty"`
	Targets        []Repository    `json:"targets,omitempty"`
	ForEach        []ForEachTarget `json:"for_each,omitempty"`
	Execution      Execution       `json:"execution"`
	Verifiers      []Verifier      `json:"verifiers,omitempty"`
	Limits         Limits          `json:"limits,omitempty"`
	Output         *Output         `json:"output,omitempty"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	// RequireApproval makes the agent stop at awaiting_input after
	// executing and wait for steering.json.
	RequireApproval bool `json:"require_approval"`
	// MaxSteeringIterations is how many steers one result may take;
	// nil: the agent's default (0 is none).
	MaxSteeringIterations *int         `json:"max_steering_iterations,omitempty"`
	PullRequest           *PullRequest `json:"pull_request,omitempty"`
	GitConfig             GitConfig    `json:"git_config"`
	// Forge says how PRs are created: "local" pushes a branch to the
	// repository URL; others come later.
	Forge string `json:"forge,omitempty"`
	// Parallel is how many repositories the agent clones and sets up,
	// and pushes and opens pull requests for, at once; 0 or 1 means one
	// after another. Transforms and verifiers run one after another.
	Parallel int `json:"parallel,omitempty"`
}

// Progress counts repositories done.
type Progress struct {
	CompletedRepos int `json:"completed_repos"`
	TotalRepos     int `json:"total_repos"`
}

// Status is the agent's small, frequently written state (status.json).
type Status struct {
	Phase     Phase     `json:"phase"`
	Step      string    `json:"step,omitempty"`
	Message   string    `json:"message,omitempty"`
	Progress  Progress  `json:"progress"`
	Iteration int       `json:"iteration"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FileDiff is one changed file.
type FileDiff struct {
	Path string `json:"path"`
	// Status is added, modified, deleted or renamed.
	Status    string `json:"status"`
	Additions int    `json:"additions"`
	Deletions int    `json:"deletions"`
	Diff      string `json:"diff"`
	// Truncated is set when Diff was cut at the per-file line limit.
	Truncated bool `json:"truncated,omitempty"`
}

// VerifierResult is the outcome of one verifier in one repository.
type VerifierResult struct {
	Name     string `json:"name"`
	Success  bool   `json:"success"`
	ExitCode int    `json:"exit_code"`
	Output   string `json:"output,omitempty"`
}

// PullRequestInfo identifies the PR (or, for the local forge, the pushed
// branch) made for a repository.
type PullRequestInfo struct {
	URL    string `json:"url"`
	Number int    `json:"number,omitempty"`
	Branch string `json:"branch"`
	// Repository is the clone URL of the repository it was opened in,
	// and Forge the worker's forge that opened it (as Manifest.Forge
	// names it): where the worker follows it.
	Repository string `json:"repository,omitempty"`
	Forge      string `json:"forge,omitempty"`
	// Commit is the head commit pushed.
	Commit string `json:"commit,omitempty"`
	// Tree is Commit's tree: the worker checks it is the tree approved.
	Tree string `json:"tree,omitempty"`
	// NotOverwritten says why fleetlift took over this pull request
	// without pushing its change: its branch has a commit someone else
	// made (forge.ErrForeignBranch). Commit is then that commit.
	NotOverwritten string `json:"not_overwritten,omitempty"`
}

// Report is a report-mode result: the validated frontmatter, the prose
// body and the raw text (seed 001's ReportOutput). A report that failed
// keeps what could be read of it: the raw text always, the frontmatter
// when it parsed.
type Report struct {
	Frontmatter map[string]any `json:"frontmatter,omitempty"`
	Body        string         `json:"body,omitempty"`
	Raw         string         `json:"raw"`
	// Warning flags a report for a person to look at without failing it:
	// a report that is empty, or has neither data nor text.
	Warning string `json:"warning,omitempty"`
	// ValidationErrors lists every way the frontmatter fails
	// output.schema, each "<JSON pointer>: <what is wrong>" ("/score:
	// maximum: got 11, want 10"); the pointer is left out for the
	// frontmatter as a whole ("missing property 'score'").
	ValidationErrors []string `json:"validation_errors,omitempty"`
}

// ReportEmptyWarning is the Warning of a report that is empty or says
// nothing.
const ReportEmptyWarning = "the report is empty: a person should look at this repository"

// Report failure kinds.
const (
	ReportMissing            = "report_missing"
	ReportFrontmatterInvalid = "frontmatter_invalid"
	ReportSchemaInvalid      = "schema_invalid"
)

// ForEachResult is one for_each iteration's report.
type ForEachResult struct {
	Name   string  `json:"name"`
	Report *Report `json:"report,omitempty"`
	Error  string  `json:"error,omitempty"`
	// ErrorKind is one of the Report* kinds when the report failed.
	ErrorKind string `json:"error_kind,omitempty"`
}

// RepositoryResult is the outcome in one repository.
type RepositoryResult struct {
	Name string `json:"name"`
	// Status is success, failed or skipped.
	Status        string     `json:"status"`
	FilesModified []string   `json:"files_modified,omitempty"`
	Diffs         []FileDiff `json:"diffs,omitempty"`
	// Tree is the git tree of the change collected, what Diffs show and
	// what a pull request proposes; part of the digest an approval names.
	Tree string `json:"tree,omitempty"`
	// Base is the commit the repository was cloned at, which the change
	// in BundleFile(Name) builds on; set when the agent left one there.
	// The worker proposes it only once it found Base on the branch the
	// change targets.
	Base string `json:"base,omitempty"`
	// FilesOmitted counts changed files left out of FilesModified and
	// Diffs to keep the result within what the worker records.
	FilesOmitted    int              `json:"files_omitted,omitempty"`
	VerifierResults []VerifierResult `json:"verifier_results,omitempty"`
	PullRequest     *PullRequestInfo `json:"pull_request,omitempty"`
	Report          *Report          `json:"report,omitempty"`
	ForEach         []ForEachResult  `json:"for_each,omitempty"`
	Error           string           `json:"error,omitempty"`
	ErrorKind       string           `json:"error_kind,omitempty"`
}

// SteeringRecord is one steering instruction the agent acted on.
type SteeringRecord struct {
	Iteration int       `json:"iteration"`
	Prompt    string    `json:"prompt"`
	Timestamp time.Time `json:"timestamp"`
}

// Result is the agent's full outcome (result.json), rewritten after
// execution, after each steer and after PRs.
type Result struct {
	Status          Phase              `json:"status"`
	Repositories    []RepositoryResult `json:"repositories"`
	AgentOutput     string             `json:"agent_output,omitempty"`
	SteeringHistory []SteeringRecord   `json:"steering_history"`
	Error           string             `json:"error,omitempty"`
	// ModelUsage is what the agent CLI's model calls used, from the
	// model gateway; nil without one.
	ModelUsage  *ModelUsage `json:"model_usage,omitempty"`
	StartedAt   time.Time   `json:"started_at"`
	CompletedAt *time.Time  `json:"completed_at,omitempty"`
}

// Action is a steering instruction.
type Action string

const (
	ActionSteer   Action = "steer"
	ActionApprove Action = "approve"
	ActionReject  Action = "reject"
	ActionCancel  Action = "cancel"
)

// Steering is the worker's instruction to an agent waiting for input
// (steering.json). The agent deletes the file once it has acted on it.
type Steering struct {
	Action    Action    `json:"action"`
	Prompt    string    `json:"prompt,omitempty"`
	Iteration int       `json:"iteration"`
	Timestamp time.Time `json:"timestamp"`
}
