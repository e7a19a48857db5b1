package sandbox

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"time"
)

// Provider creates and drives sandboxes. Implementations must be safe for
// concurrent use, and every method must be safe to repeat: a Temporal
// activity that calls it may be retried.
type Provider interface {
	// Provision creates a sandbox and starts the agent in it. Provisioning
	// the same opts.ID again returns the existing sandbox. Its error says
	// why, not what: the caller names the step and the sandbox. An error
	// that another attempt cannot mend wraps ErrRefused.
	Provision(ctx context.Context, opts ProvisionOptions) (*Sandbox, error)
	// Exec runs a command in the sandbox and waits for it.
	Exec(ctx context.Context, id string, cmd ExecCommand) (*ExecResult, error)
	// CopyTo writes src to destPath, relative to the sandbox's workspace,
	// replacing it atomically.
	CopyTo(ctx context.Context, id string, src io.Reader, destPath string) error
	// CopyFrom reads srcPath, relative to the workspace. A missing file
	// gives an error that wraps ErrNotFound.
	CopyFrom(ctx context.Context, id string, srcPath string) (io.ReadCloser, error)
	// Status reports the sandbox's state; an unknown id gives ErrNotFound.
	Status(ctx context.Context, id string) (*Status, error)
	// Cleanup stops everything in the sandbox and removes it. Cleaning up
	// an unknown or already removed sandbox is not an error.
	Cleanup(ctx context.Context, id string) error
	// Name names the provider: "local", "docker", "kubernetes".
	Name() string
}

// ErrNotFound is wrapped by errors about sandboxes or files that do not
// exist.
var ErrNotFound = errors.New("not found")

// ErrRefused is wrapped by a Provision error that another attempt with
// the same options cannot mend: what was asked cannot be made here as it
// stands (an image the engine does not have, since no provider pulls
// one; an id or a variable that cannot be set; a namespace or resources
// the provider does not serve). The task fails at once instead of
// provisioning again.
var ErrRefused = errors.New("refused")

// Refused marks err as a refusal (ErrRefused) without changing its text.
func Refused(err error) error {
	if err == nil {
		return nil
	}
	return refused{err}
}

type refused struct{ error }

func (r refused) Unwrap() []error { return []error{r.error, ErrRefused} }

// ProvisionOptions describe a sandbox to create.
type ProvisionOptions struct {
	// ID names the sandbox; deterministic (derived from the workflow) so
	// that a retried Provision finds the sandbox it made.
	ID    string
	Image string
	// Env is the whole environment the agent sees besides a minimal PATH,
	// HOME and Secrets: nothing else of the worker's environment passes.
	// Exec'd commands see it too.
	Env map[string]string
	// Secrets are more variables for the agent process alone (tokens): a
	// provider never writes them to disk or into the sandbox's files,
	// never hands them to Exec'd commands and never reports them.
	Secrets   map[string]string
	Resources Resources
	// Timeout bounds the sandbox's life; zero means none.
	Timeout time.Duration
	Labels  map[string]string

	// Kubernetes only; other providers ignore them.
	Namespace    string
	NodeSelector map[string]string
	RuntimeClass string
	// SecretRefs say, for this sandbox alone, which Kubernetes Secret key
	// gives each of these secret variables of the agent its value, over
	// the provider's own references (a definition's credentials); a
	// variable named here that Secrets lacks is added. Names only, never
	// values. Kubernetes only: a provider that cannot apply them lists
	// the variables in Sandbox.IgnoredSecretRefs.
	SecretRefs map[string]SecretRef
}

// SecretRef names the key of a Kubernetes Secret that holds a secret
// variable's value.
type SecretRef struct {
	Secret, Key string
}

func (r SecretRef) String() string { return r.Secret + "/" + r.Key }

// Ignoring returns sb with the variables of opts.SecretRefs as its
// IgnoredSecretRefs, and IgnoredPlacement set when opts asks for a
// namespace, runtime class, nodes or resource requests: what a provider that cannot apply
// the Kubernetes-only options returns.
func Ignoring(sb *Sandbox, opts ProvisionOptions) *Sandbox {
	if sb == nil {
		return nil
	}
	if len(opts.SecretRefs) > 0 {
		sb.IgnoredSecretRefs = slices.Sorted(maps.Keys(opts.SecretRefs))
	}
	sb.IgnoredPlacement = opts.Namespace != "" || opts.RuntimeClass != "" || len(opts.NodeSelector) > 0 ||
		opts.Resources.RequestMemory != "" || opts.Resources.RequestCPU != ""
	return sb
}

// Resources are resource limits ("4Gi", "2") and, for providers that
// schedule sandboxes (Kubernetes), what a sandbox is guaranteed: its
// requests, at most its limits.
type Resources struct {
	Memory string
	CPU    string
	// RequestMemory and RequestCPU are the requests; empty, the
	// provider's default (Kubernetes: the limits).
	RequestMemory string `json:",omitempty"`
	RequestCPU    string `json:",omitempty"`
}

// Sandbox is a provisioned sandbox.
type Sandbox struct {
	ID       string
	Provider string
	// WorkingDir is the workspace as the agent sees it.
	WorkingDir string
	Phase      Phase
	// IgnoredSecretRefs are the variables of ProvisionOptions.SecretRefs
	// the provider did not apply (sorted): their values, if any, come
	// from the worker's own configuration.
	IgnoredSecretRefs []string
	// IgnoredPlacement: the provider did not apply ProvisionOptions'
	// Namespace, RuntimeClass and NodeSelector, which asked for some.
	IgnoredPlacement bool
}

// Phase is a sandbox's lifecycle state.
type Phase string

const (
	PhasePending   Phase = "pending"
	PhaseRunning   Phase = "running"
	PhaseSucceeded Phase = "succeeded"
	PhaseFailed    Phase = "failed"
)

func (p Phase) String() string { return string(p) }

// Status is a sandbox's current state.
type Status struct {
	Phase Phase
	// ExitCode is the agent's exit code once it has exited.
	ExitCode int
	Message  string
}

// ExecCommand is a command to run in a sandbox.
type ExecCommand struct {
	Command []string
	// WorkingDir is relative to the workspace; empty means the workspace.
	WorkingDir string
	Env        map[string]string
	Stdin      io.Reader
	Timeout    time.Duration
}

// ExecResult is a finished command's outcome.
type ExecResult struct {
	ExitCode int
	Stdout   string
	Stderr   string
}

// Wakeup makes the channel a Watch returns, which holds at most one
// wake-up pending, and the function that sends one without blocking.
func Wakeup() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	return ch, func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
