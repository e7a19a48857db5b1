package activity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/notify"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Activities are fleetlift's activities and their dependencies.
type Activities struct {
	Sandbox sandbox.Provider
	// PaceAgents, when set, returns once the model account's tokens a
	// minute allow a call (the worker's --tokens-per-minute): an agentic
	// task's sandbox is made then (ProvisionInput.Agentic), not to wait
	// idle at its first call; or after paceAgentsWithin at most.
	PaceAgents func(ctx context.Context) error
	// GatewayUsage, when set, is what the worker's model gateway counted
	// for a sandbox it serves (gateway.Gateway.UsageOf).
	GatewayUsage func(sandboxID string) (protocol.ModelUsage, bool)
	// SandboxEnv is added to every sandbox's environment: the agent's
	// settings and variables for its commands. It stays in the worker.
	SandboxEnv map[string]string
	// SandboxSecrets go to every sandbox's agent alone (the forge and git
	// tokens, the agent CLI's key): never to disk, never to Exec'd
	// commands, never into workflow history. They stay in the worker.
	SandboxSecrets map[string]string
	// Forges are the forges the worker proposes changes on, by the name a
	// manifest gives (Delivery.Forge), with Git to fetch and push with
	// the worker's own credentials, local repositories only under
	// FileRoots (git.CheckLocal). Without them, no change is proposed.
	Forges    func(name string) (forge.Forge, error)
	Git       *git.Git
	FileRoots []string
	// FollowEvery is how often the pull requests a run opened are read
	// from their forges (RefreshPullRequests); 0 means
	// DefaultFollowEvery.
	FollowEvery time.Duration
	// Copies, when set, has the worker's own copies of the repositories
	// sandboxes cloned through its gateway (gateway.GitReads): a change
	// is proposed on the copy its sandbox cloned, whose branch and base
	// the worker read itself, without reading the repository again.
	Copies interface {
		Copy(sandboxID, repository string) (*git.Scratch, bool)
	}
	// MaxSandboxes bounds the sandboxes this worker runs at once (0: no
	// bound): ProvisionSandbox of one more fails with ErrWorkerFull, and
	// the task waits and provisions again (here or on another worker)
	// once one has been removed.
	MaxSandboxes int
	// Adopted are the sandboxes the worker runs already when it starts
	// (an earlier worker's, taken over): they count against MaxSandboxes
	// until removed.
	Adopted  []string
	capacity capacity
	// CredentialVariables are the secret variables a definition's
	// credentials give values (Kubernetes sandboxes).
	CredentialVariables CredentialVariables
	// PollInterval is how often WaitForAgentPhase reads status.json
	// (default 100ms: a small file read).
	PollInterval time.Duration
	// MaxResultBytes caps the diffs returned by ReadResult, so a result
	// stays within Temporal's payload limits (default 1 MiB).
	MaxResultBytes int
	// Queue is the task queue only this worker's host polls, where the
	// steps on the sandboxes it provisions are sent; empty when any worker
	// reaches every sandbox.
	Queue string
	// StillWanted sends the heartbeats of a run of units (RunUnits), the
	// one before each unit and the others, and says whether the campaign
	// has not cancelled the run; nil heartbeats (heartbeatNow).
	StillWanted func(ctx context.Context, p any) (bool, error)
	// UnitGoesOn says whether the unit at work of a run the campaign
	// cancelled goes on; nil asks the campaign (QueryUnitGoesOn).
	UnitGoesOn func(ctx context.Context) (bool, error)
	// UnitStarted and UnitEnded, when set, are told of each unit of a
	// run of units (RunUnits) as it starts and as it ends, with the id of
	// the campaign's workflow: a process that hosts the worker learns of
	// it at once, where the campaign learns of it when the run reports.
	// They must not block.
	UnitStarted func(workflowID string, u status.UnitRef)
	UnitEnded   func(workflowID string, u status.UnitOutcome)
	// NotifyServices are the operator's notification services by name
	// (--notify), with their secrets; NotifyClient sends to them.
	NotifyServices map[string]notify.Service
	NotifyClient   notify.Client
	// NotifyTried, when set, is told of each try to deliver a message:
	// its service, its event, and delivered, retry or failed (metrics).
	NotifyTried func(service, event, outcome string)
}

// Bounds on what a sandbox hands the worker: its files are written by
// code the worker does not trust to be small.
const (
	// maxStatusBytes bounds status.json.
	maxStatusBytes = 64 << 10
	// maxResultFileBytes bounds result.json as read.
	maxResultFileBytes = 64 << 20
	// maxPayloadBytes bounds a result as ReadResult returns it, below
	// Temporal's 2 MiB limit on a payload in workflow history.
	maxPayloadBytes = 1536 << 10
	// maxFilesListed bounds the files listed per repository.
	maxFilesListed = 1000
	// Text fields are cut at these lengths.
	maxOutputBytes = 16 << 10
	maxErrorBytes  = 4 << 10
	maxReportBytes = 256 << 10
	// maxFrontmatterBytes bounds a report's frontmatter as JSON; one
	// larger is left out, the raw text still holding it.
	maxFrontmatterBytes = 64 << 10
	// maxValidationErrors bounds the schema violations listed per report.
	maxValidationErrors = 100
)

// Error types that the workflows see in ApplicationError.Type().
const (
	// ErrAgentExited: the agent stopped before reaching a phase the
	// workflow waits for.
	ErrAgentExited = "AgentExited"
	// ErrSandboxGone: the sandbox no longer exists.
	ErrSandboxGone = "SandboxGone"
	// ErrResultTooLarge: a protocol file is larger than the worker reads
	// or records.
	ErrResultTooLarge = "ResultTooLarge"
	// ErrManifestInvalid: a manifest no agent could carry out (an
	// output.schema that is not a usable JSON Schema).
	ErrManifestInvalid = "ManifestInvalid"
	// ErrSandboxRefused: the provider cannot make the sandbox as asked,
	// and another attempt would not change that (sandbox.ErrRefused).
	ErrSandboxRefused = "SandboxRefused"
)

// ProvisionInput asks for a sandbox.
type ProvisionInput struct {
	SandboxID string
	Image     string
	Timeout   time.Duration
	Labels    map[string]string
	Resources sandbox.Resources
	// Credentials are the definition's: which Secrets give the agent its
	// forge token and its CLI's key, over the worker's --sandbox-secret-ref.
	Credentials *Credentials `json:",omitempty"`
	// Placement is the definition's sandbox placement.
	Placement *Placement `json:",omitempty"`
	// Agentic says the sandbox runs an agent CLI: it is made once the
	// model account's tokens a minute allow a call (PaceAgents), so that
	// no sandbox waits idle for them.
	Agentic bool `json:",omitempty"`
}

// Placement is where a definition asks its sandboxes to run (its
// sandbox.namespace, runtime_class and node_selector): Kubernetes
// sandboxes apply it, within what the operator allows; the others cannot,
// and the sandbox's notes say so.
type Placement struct {
	Namespace    string            `json:",omitempty"`
	RuntimeClass string            `json:",omitempty"`
	NodeSelector map[string]string `json:",omitempty"`
}

// fields are the definition's fields p sets.
func (p *Placement) fields() []string {
	var out []string
	if p == nil {
		return nil
	}
	if p.Namespace != "" {
		out = append(out, "sandbox.namespace ("+p.Namespace+")")
	}
	if p.RuntimeClass != "" {
		out = append(out, "sandbox.runtime_class ("+p.RuntimeClass+")")
	}
	if len(p.NodeSelector) > 0 {
		out = append(out, "sandbox.node_selector")
	}
	return out
}

// requestFields names the resource requests r asks for, which only
// providers that schedule sandboxes apply.
func requestFields(r sandbox.Resources) []string {
	var out []string
	if r.RequestMemory != "" {
		out = append(out, "sandbox.resources.requests.memory ("+r.RequestMemory+")")
	}
	if r.RequestCPU != "" {
		out = append(out, "sandbox.resources.requests.cpu ("+r.RequestCPU+")")
	}
	return out
}

// paceAgentsWithin bounds paceAgent's wait, within the provisioning
// step's 30 s: past it the sandbox is made, and its agent's calls wait
// at the gateway as any call does. Nothing heartbeats for the wait: the
// activities that provision inside them heartbeat their own progress.
var paceAgentsWithin = 20 * time.Second

// paceAgent waits for PaceAgents, at most paceAgentsWithin.
func (a *Activities) paceAgent(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, paceAgentsWithin)
	defer cancel()
	if err := a.PaceAgents(pctx); err != nil && ctx.Err() != nil {
		return fmt.Errorf("wait for the model account's tokens a minute: %w", err)
	}
	return nil
}

// SandboxRef names a provisioned sandbox.
type SandboxRef struct {
	ID       string
	Provider string
	// Queue is the task queue of the worker that provisioned the sandbox:
	// the steps on it go there. Empty means any worker's.
	Queue string `json:",omitempty"`
	// Notes say what of the definition the sandbox could not apply (a
	// credentials secret_ref in a local sandbox) and what it did instead.
	Notes []string `json:",omitempty"`
}

// ProvisionSandbox creates the sandbox, or finds the one a previous attempt
// created.
func (a *Activities) ProvisionSandbox(ctx context.Context, in ProvisionInput) (ref SandboxRef, err error) {
	if in.Agentic && a.PaceAgents != nil {
		if err := a.paceAgent(ctx); err != nil {
			return SandboxRef{}, err
		}
	}
	if err := a.reserve(in.SandboxID); err != nil {
		return SandboxRef{}, err
	}
	defer func() {
		if err != nil {
			a.release(in.SandboxID)
		}
	}()
	env := map[string]string{}
	for k, v := range a.SandboxEnv {
		env[k] = v
	}
	refs := a.CredentialVariables.secretRefs(in.Credentials, env)
	opts := sandbox.ProvisionOptions{
		ID: in.SandboxID, Image: in.Image, Env: env, Secrets: cloneSecrets(a.SandboxSecrets),
		Timeout: in.Timeout, Labels: in.Labels, Resources: in.Resources, SecretRefs: refs,
	}
	if p := in.Placement; p != nil {
		opts.Namespace, opts.RuntimeClass, opts.NodeSelector = p.Namespace, p.RuntimeClass, maps.Clone(p.NodeSelector)
	}
	sb, err := a.Sandbox.Provision(ctx, opts)
	if err != nil {
		// The step, not the sandbox: the task or unit that failed is
		// named where the error is shown, and the sandbox's long name
		// would crowd out why. The log names it.
		if sdkactivity.IsActivity(ctx) {
			sdkactivity.GetLogger(ctx).Warn("could not provision the sandbox", "sandbox", in.SandboxID, "error", err)
		}
		if errors.Is(err, sandbox.ErrRefused) {
			return SandboxRef{}, temporal.NewNonRetryableApplicationError("provision sandbox: "+err.Error(), ErrSandboxRefused, err)
		}
		return SandboxRef{}, fmt.Errorf("provision sandbox: %w", err)
	}
	notes := a.CredentialVariables.notes(in.Credentials, sb.Provider, sb.IgnoredSecretRefs)
	if f := append(in.Placement.fields(), requestFields(in.Resources)...); len(f) > 0 && sb.IgnoredPlacement {
		notes = append(notes, fmt.Sprintf("%s: not applied to %s sandboxes, which run where this worker runs them", strings.Join(f, ", "), sb.Provider))
	}
	return SandboxRef{ID: sb.ID, Provider: sb.Provider, Queue: a.Queue, Notes: notes}, nil
}

// SubmitManifestInput is the manifest for a sandbox's agent.
type SubmitManifestInput struct {
	Sandbox  SandboxRef
	Manifest protocol.Manifest
}

// SubmitManifest writes manifest.json; the agent starts on it.
func (a *Activities) SubmitManifest(ctx context.Context, in SubmitManifestInput) error {
	if err := checkSchema(in.Manifest); err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrManifestInvalid, nil)
	}
	return a.writeJSON(ctx, in.Sandbox.ID, protocol.ManifestFile, in.Manifest)
}

// WaitInput says which phases to wait for.
type WaitInput struct {
	Sandbox SandboxRef
	Phases  []protocol.Phase
	// MinIteration ignores statuses from before a steer: the agent must
	// have reached at least this iteration.
	MinIteration int
	// Manifest, when set, is written first, as SubmitManifest writes it
	// (AwaitAgentResult): the first wait on a sandbox hands its agent the
	// manifest on the sandbox's host, a step less for the task. An agent
	// starts on the first manifest it reads; a retried attempt writes the
	// same one again.
	Manifest *protocol.Manifest `json:",omitempty"`
	// Reports, when set, is what the result's reports are checked
	// against (AwaitAgentResult, as ReadResultInput.Reports).
	Reports *ReportCheck `json:",omitempty"`
	// Deliver, when set, is how a transform's changes are proposed once
	// the agent completed, before the sandbox goes (Activities.deliver).
	Deliver *Delivery `json:",omitempty"`
	// CleanUp removes the sandbox once the agent is found finished (a
	// terminal phase) and its result read (AwaitAgentResult): a finished
	// agent's task ends, and its sandbox goes without a step of its own.
	CleanUp bool `json:",omitempty"`
}

// WaitForAgentPhase polls status.json until the agent reaches one of the
// phases, heartbeating as it goes. A retried attempt (a new worker after
// the old one died) simply polls the same sandbox again.
func (a *Activities) WaitForAgentPhase(ctx context.Context, in WaitInput) (protocol.Status, error) {
	return a.waitPhase(ctx, in, func(details string) { sdkactivity.RecordHeartbeat(ctx, details) })
}

// waitPhase is WaitForAgentPhase, telling heartbeat (when not nil) what
// it read at each poll.
func (a *Activities) waitPhase(ctx context.Context, in WaitInput, heartbeat func(details string)) (protocol.Status, error) {
	// The safety net below, unless the polls are this wait's heartbeats:
	// then they come often enough that the heartbeat timeout does not
	// pass between two.
	net := watchedEvery
	if heartbeat == nil {
		heartbeat = func(string) {}
	} else if sdkactivity.IsActivity(ctx) {
		if t := sdkactivity.GetInfo(ctx).HeartbeatTimeout; t > 0 {
			net = min(net, max(t/4, time.Second))
		}
	}
	every := a.PollInterval
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	// Where the sandbox says when the agent writes its files and when it
	// exits, the status is read then, and whether the agent still runs is
	// asked then too; the ticker is only a safety net (watchedEvery).
	var changed <-chan struct{}
	if w, ok := a.Sandbox.(watcher); ok {
		if ch, stop, err := w.Watch(in.Sandbox.ID, path.Join(protocol.Dir, protocol.StatusFile)); err == nil {
			defer stop()
			changed = ch
			every = max(every, net)
		}
	}
	// Where it does not (a Kubernetes sandbox, whose every read is an
	// exec in its pod), the status is read less often while it stands:
	// twice as long each time up to a second, and again every poll
	// interval once it changes.
	wait, slowest := every, max(every, time.Second)
	t := time.NewTimer(wait)
	defer t.Stop()
	var last protocol.Status
	// Unwatched, whether the agent still runs is asked less often than
	// its status is read: an agent that exits without a word is rare, and
	// noticed within a second.
	var alive time.Time
	for {
		st, err := a.readStatus(ctx, in.Sandbox.ID)
		if changed == nil {
			if err == nil && !sameStatus(st, last) {
				wait = every
			} else {
				wait = min(2*wait, slowest)
			}
			last = st
		}
		switch {
		case err == nil:
			heartbeat(string(st.Phase))
			if slices.Contains(in.Phases, st.Phase) && st.Iteration >= in.MinIteration {
				return st, nil
			}
			if st.Phase.Terminal() {
				// Terminal but not wanted (failed while waiting for
				// awaiting_input, say): the workflow reads the result.
				return st, nil
			}
		case errors.Is(err, sandbox.ErrNotFound):
			heartbeat("no status yet")
		default:
			return protocol.Status{}, err
		}
		if changed != nil || time.Since(alive) >= max(every, time.Second) {
			if err := a.checkAlive(ctx, in.Sandbox.ID); err != nil {
				return protocol.Status{}, err
			}
			alive = time.Now()
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return protocol.Status{}, ctx.Err()
		case <-t.C:
		case <-changed:
		}
	}
}

// watchedEvery is how often a wait reads the status of a sandbox that
// says when the agent writes it and when the agent exits: a safety net,
// should a wake-up be lost. Each read of a local sandbox's status was
// about 0.2 ms of the worker's processor, five of every six of them on
// this net at a second, for units of work that take seconds.
const watchedEvery = 10 * time.Second

// sameStatus reports whether two reads of status.json say the same.
func sameStatus(a, b protocol.Status) bool {
	return a.Phase == b.Phase && a.Step == b.Step && a.Message == b.Message && a.Progress == b.Progress &&
		a.Iteration == b.Iteration && a.UpdatedAt.Equal(b.UpdatedAt)
}

// watcher is a sandbox provider that tells when a file of a sandbox's
// workspace (or something in a directory of it) may have changed, and
// when the sandbox's agent exits (the local one, on the file alone; the
// Docker one, on the agent's output).
type watcher interface {
	Watch(id, path string) (changed <-chan struct{}, stop func() error, err error)
}

// AgentOutcome is the agent's status once it reached a phase waited for,
// and the result it wrote.
type AgentOutcome struct {
	Status protocol.Status
	Result protocol.Result
	// CleanedUp says the sandbox was removed (WaitInput.CleanUp).
	CleanedUp bool `json:",omitempty"`
}

// AwaitAgentResult is WaitForAgentPhase and then ReadResult in one
// activity (after SubmitManifest, when in.Manifest is set, and then
// CleanupSandbox, when in.CleanUp is set and the agent finished): one
// round trip through the workflow instead of two to four. A retried
// attempt waits (at once satisfied) and reads again; one retried after
// its sandbox was removed (its worker died in between) finds the sandbox
// gone, and the work runs again in a new one, as after any lost sandbox.
func (a *Activities) AwaitAgentResult(ctx context.Context, in WaitInput) (AgentOutcome, error) {
	if in.Manifest != nil {
		if err := a.SubmitManifest(ctx, SubmitManifestInput{Sandbox: in.Sandbox, Manifest: *in.Manifest}); err != nil {
			return AgentOutcome{}, err
		}
	}
	st, err := a.WaitForAgentPhase(ctx, in)
	if err != nil {
		return AgentOutcome{}, err
	}
	r, err := a.ReadResult(ctx, ReadResultInput{Sandbox: in.Sandbox, Reports: in.Reports})
	if err != nil {
		return AgentOutcome{}, err
	}
	if in.Reports != nil {
		in.Reports.settle(&st, &r)
	}
	if err := a.deliver(ctx, in.Sandbox.ID, in.Deliver, &st, &r, func() { sdkactivity.RecordHeartbeat(ctx, "proposing changes") }); err != nil {
		return AgentOutcome{}, err
	}
	out := AgentOutcome{Status: st, Result: r}
	if in.CleanUp && st.Phase.Terminal() {
		// A sandbox left behind is removed by the workflow's own step.
		if err := a.cleanup(ctx, CleanupInput{Sandbox: in.Sandbox}); err != nil {
			sdkactivity.GetLogger(ctx).Warn("remove the finished sandbox; the task removes it after", "sandbox", in.Sandbox.ID, "error", err)
		} else {
			out.CleanedUp = true
		}
	}
	return out, nil
}

// sandboxGone is the error, without retry, of a step that found sandbox
// id gone (err says how).
func sandboxGone(id string, err error) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("sandbox %s is gone", id), ErrSandboxGone, err)
}

// checkAlive fails without retry when the agent process has exited or the
// sandbox is gone: nothing more will be written.
func (a *Activities) checkAlive(ctx context.Context, id string) error {
	st, err := a.Sandbox.Status(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return sandboxGone(id, err)
	}
	if err != nil {
		return fmt.Errorf("sandbox status %s: %w", id, err)
	}
	if st.Phase == sandbox.PhaseSucceeded || st.Phase == sandbox.PhaseFailed {
		// One last read: the agent may have written a terminal status
		// just before exiting.
		if s, err := a.readStatus(ctx, id); err == nil && s.Phase.Terminal() {
			return nil
		}
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("agent in sandbox %s exited (code %d) without finishing: %s", id, st.ExitCode, st.Message), ErrAgentExited, nil)
	}
	return nil
}

func (a *Activities) readStatus(ctx context.Context, id string) (protocol.Status, error) {
	var st protocol.Status
	err := a.readJSON(ctx, id, protocol.StatusFile, &st, maxStatusBytes)
	return st, err
}

// ReadResultInput names the sandbox to read from.
type ReadResultInput struct {
	Sandbox SandboxRef
	// Reports, when set, is what each report's frontmatter is checked
	// against: the control plane's verdict, not the sandbox's, decides
	// whether a report matches output.schema.
	Reports *ReportCheck `json:",omitempty"`
}

// ReadResult reads result.json and trims it to what workflow history can
// hold: diffs beyond MaxResultBytes, files beyond a thousand per
// repository (counted in FilesOmitted), long outputs, errors and reports
// (bodies and raw texts over 256 KiB, frontmatter over 64 KiB, schema
// violations beyond a hundred).
// A result that is still too large, or a result.json over 64 MiB, fails
// without retry. What an approval approves is each repository's tree,
// which trimming never touches.
func (a *Activities) ReadResult(ctx context.Context, in ReadResultInput) (protocol.Result, error) {
	var r protocol.Result
	if err := a.readJSON(ctx, in.Sandbox.ID, protocol.ResultFile, &r, maxResultFileBytes); err != nil {
		return r, err
	}
	if in.Reports != nil {
		in.Reports.check(&r)
	}
	limit := a.MaxResultBytes
	if limit <= 0 {
		limit = 1 << 20
	}
	trimResult(&r, limit)
	b, err := json.Marshal(r)
	if err == nil && len(b) > maxPayloadBytes {
		// Drop every diff text, then every report body, before giving up.
		for i := range r.Repositories {
			rr := &r.Repositories[i]
			for j := range rr.Diffs {
				rr.Diffs[j].Diff, rr.Diffs[j].Truncated = "", true
			}
		}
		if b, err = json.Marshal(r); err == nil && len(b) > maxPayloadBytes {
			for i := range r.Repositories {
				rr := &r.Repositories[i]
				dropReportText(rr.Report)
				for j := range rr.ForEach {
					dropReportText(rr.ForEach[j].Report)
				}
			}
			b, err = json.Marshal(r)
		}
	}
	if err != nil {
		return r, fmt.Errorf("encode result from sandbox %s: %w", in.Sandbox.ID, err)
	}
	if len(b) > maxPayloadBytes {
		return protocol.Result{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("result.json from sandbox %s is too large to record: %d bytes after trimming, over %d", in.Sandbox.ID, len(b), maxPayloadBytes), ErrResultTooLarge, nil)
	}
	return r, nil
}

// trimResult cuts r's lists and texts to their bounds, and its diffs to
// limit bytes in all.
func trimResult(r *protocol.Result, limit int) {
	r.AgentOutput = cut(r.AgentOutput, maxOutputBytes)
	r.Error = cut(r.Error, maxErrorBytes)
	used := 0
	for i := range r.Repositories {
		rr := &r.Repositories[i]
		rr.Error = cut(rr.Error, maxErrorBytes)
		if n := max(len(rr.FilesModified), len(rr.Diffs)); n > maxFilesListed {
			rr.FilesOmitted += n - maxFilesListed
			rr.FilesModified = rr.FilesModified[:min(len(rr.FilesModified), maxFilesListed)]
			rr.Diffs = rr.Diffs[:min(len(rr.Diffs), maxFilesListed)]
		}
		for j := range rr.VerifierResults {
			rr.VerifierResults[j].Output = cut(rr.VerifierResults[j].Output, maxOutputBytes)
		}
		cutReport(rr.Report)
		for j := range rr.ForEach {
			rr.ForEach[j].Error = cut(rr.ForEach[j].Error, maxErrorBytes)
			cutReport(rr.ForEach[j].Report)
		}
		for j := range rr.Diffs {
			d := &rr.Diffs[j]
			if used+len(d.Diff) > limit {
				d.Diff = ""
				d.Truncated = true
				continue
			}
			used += len(d.Diff)
		}
	}
}

func cutReport(rep *protocol.Report) {
	if rep == nil {
		return
	}
	rep.Body = cut(rep.Body, maxReportBytes)
	rep.Raw = cut(rep.Raw, maxReportBytes)
	rep.Warning = cut(rep.Warning, maxErrorBytes)
	if n := len(rep.ValidationErrors); n > maxValidationErrors {
		rep.ValidationErrors = append(rep.ValidationErrors[:maxValidationErrors-1:maxValidationErrors-1],
			fmt.Sprintf("and %d more", n-maxValidationErrors+1))
	}
	for i, e := range rep.ValidationErrors {
		rep.ValidationErrors[i] = cut(e, maxErrorBytes/4)
	}
	if b, err := json.Marshal(rep.Frontmatter); err != nil || len(b) > maxFrontmatterBytes {
		rep.Frontmatter = nil
		note := fmt.Sprintf("the frontmatter is over the %d KiB a result records: left out (the raw text holds it)", maxFrontmatterBytes>>10)
		if rep.Warning != "" {
			note = rep.Warning + "; " + note
		}
		rep.Warning = note
	}
}

func dropReportText(rep *protocol.Report) {
	if rep != nil {
		rep.Body, rep.Raw = "", ""
	}
}

// cut shortens s to at most n bytes, on a rune boundary, saying so.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "\n[cut: too long]"
	i := n - len(mark)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + mark
}

// SteeringInput is an instruction for a waiting agent.
type SteeringInput struct {
	Sandbox  SandboxRef
	Steering protocol.Steering
}

// SubmitSteering writes steering.json.
func (a *Activities) SubmitSteering(ctx context.Context, in SteeringInput) error {
	return a.writeJSON(ctx, in.Sandbox.ID, protocol.SteeringFile, in.Steering)
}

// CleanupInput names the sandbox to remove.
type CleanupInput struct {
	Sandbox SandboxRef
}

// CleanupOutcome is what CleanupSandbox found before it removed the
// sandbox.
type CleanupOutcome struct {
	// ModelUsage is what the sandbox's model calls used (usageOf); nil
	// when nothing counted them.
	ModelUsage *protocol.ModelUsage `json:",omitempty"`
}

// CleanupSandbox removes the sandbox and everything running in it,
// heartbeating while it waits for processes to stop, so that a worker that
// dies meanwhile hands the cleanup to another at the heartbeat timeout.
// It first reads what the sandbox's model calls used: a task whose
// sandbox was lost counts it in its own.
func (a *Activities) CleanupSandbox(ctx context.Context, in CleanupInput) (CleanupOutcome, error) {
	out := CleanupOutcome{ModelUsage: a.usageOf(ctx, in.Sandbox.ID)}
	return out, a.cleanup(ctx, in)
}

// usageOf is what sandbox id's model calls used: as the worker's gateway
// counts them (GatewayUsage), or, when it serves the sandbox no more (a
// worker started again), as it last saved them in the sandbox
// (protocol.UsageFile); nil when neither says.
func (a *Activities) usageOf(ctx context.Context, id string) *protocol.ModelUsage {
	if a.GatewayUsage != nil {
		if u, ok := a.GatewayUsage(id); ok {
			return &u
		}
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	rc, err := a.Sandbox.CopyFrom(rctx, id, path.Join(protocol.Dir, protocol.UsageFile))
	if err != nil {
		return nil
	}
	defer rc.Close()
	var u protocol.ModelUsage
	if json.NewDecoder(io.LimitReader(rc, 64<<10)).Decode(&u) != nil {
		return nil
	}
	return &u
}

// cleanup is CleanupSandbox's removal.
func (a *Activities) cleanup(ctx context.Context, in CleanupInput) error {
	done := make(chan error, 1)
	go func() {
		err := a.Sandbox.Cleanup(ctx, in.Sandbox.ID)
		if err == nil {
			a.release(in.Sandbox.ID)
		}
		done <- err
	}()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("clean up sandbox %s: %w", in.Sandbox.ID, err)
			}
			return nil
		case <-t.C:
			if sdkactivity.IsActivity(ctx) {
				sdkactivity.RecordHeartbeat(ctx, "cleaning up")
			}
		}
	}
}

func (a *Activities) writeJSON(ctx context.Context, id, name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	if err := a.Sandbox.CopyTo(ctx, id, bytes.NewReader(b), path.Join(protocol.Dir, name)); err != nil {
		return fmt.Errorf("write %s to sandbox %s: %w", name, id, err)
	}
	return nil
}

// readJSON decodes the protocol file name, refusing one over limit bytes
// without retry: reading it again would not make it smaller.
func (a *Activities) readJSON(ctx context.Context, id, name string, v any, limit int64) error {
	rc, err := a.Sandbox.CopyFrom(ctx, id, path.Join(protocol.Dir, name))
	if err != nil {
		return fmt.Errorf("read %s from sandbox %s: %w", name, id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return fmt.Errorf("read %s from sandbox %s: %w", name, id, err)
	}
	if int64(len(b)) > limit {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s in sandbox %s is over %d bytes: refused", name, id, limit), ErrResultTooLarge, nil)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s from sandbox %s: %w", name, id, err)
	}
	return nil
}
