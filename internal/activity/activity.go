package activity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"time"

	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Activities are fleetlift's activities and their dependencies.
type Activities struct {
	Sandbox sandbox.Provider
	// SandboxEnv is added to every sandbox's environment: agent CLI
	// settings and credentials. It stays in the worker.
	SandboxEnv map[string]string
	// PollInterval is how often WaitForAgentPhase reads status.json
	// (default 100ms: a small file read).
	PollInterval time.Duration
	// MaxResultBytes caps the diffs returned by ReadResult, so a result
	// stays within Temporal's payload limits (default 1 MiB).
	MaxResultBytes int
}

// Error types that the workflows see in ApplicationError.Type().
const (
	// ErrAgentExited: the agent stopped before reaching a phase the
	// workflow waits for.
	ErrAgentExited = "AgentExited"
	// ErrSandboxGone: the sandbox no longer exists.
	ErrSandboxGone = "SandboxGone"
)

// ProvisionInput asks for a sandbox.
type ProvisionInput struct {
	SandboxID string
	Image     string
	Timeout   time.Duration
	Labels    map[string]string
	Resources sandbox.Resources
}

// SandboxRef names a provisioned sandbox.
type SandboxRef struct {
	ID       string
	Provider string
}

// ProvisionSandbox creates the sandbox, or finds the one a previous attempt
// created.
func (a *Activities) ProvisionSandbox(ctx context.Context, in ProvisionInput) (SandboxRef, error) {
	env := map[string]string{}
	for k, v := range a.SandboxEnv {
		env[k] = v
	}
	sb, err := a.Sandbox.Provision(ctx, sandbox.ProvisionOptions{
		ID: in.SandboxID, Image: in.Image, Env: env, Timeout: in.Timeout, Labels: in.Labels, Resources: in.Resources,
	})
	if err != nil {
		return SandboxRef{}, fmt.Errorf("provision sandbox %s: %w", in.SandboxID, err)
	}
	return SandboxRef{ID: sb.ID, Provider: sb.Provider}, nil
}

// SubmitManifestInput is the manifest for a sandbox's agent.
type SubmitManifestInput struct {
	Sandbox  SandboxRef
	Manifest protocol.Manifest
}

// SubmitManifest writes manifest.json; the agent starts on it.
func (a *Activities) SubmitManifest(ctx context.Context, in SubmitManifestInput) error {
	return a.writeJSON(ctx, in.Sandbox.ID, protocol.ManifestFile, in.Manifest)
}

// WaitInput says which phases to wait for.
type WaitInput struct {
	Sandbox SandboxRef
	Phases  []protocol.Phase
	// MinIteration ignores statuses from before a steer: the agent must
	// have reached at least this iteration.
	MinIteration int
}

// WaitForAgentPhase polls status.json until the agent reaches one of the
// phases, heartbeating as it goes. A retried attempt (a new worker after
// the old one died) simply polls the same sandbox again.
func (a *Activities) WaitForAgentPhase(ctx context.Context, in WaitInput) (protocol.Status, error) {
	every := a.PollInterval
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// Whether the agent still runs is asked less often than its status
	// is read: an agent that exits without a word is rare, and noticed
	// within a second.
	var alive time.Time
	for {
		st, err := a.readStatus(ctx, in.Sandbox.ID)
		switch {
		case err == nil:
			sdkactivity.RecordHeartbeat(ctx, st.Phase)
			if slices.Contains(in.Phases, st.Phase) && st.Iteration >= in.MinIteration {
				return st, nil
			}
			if st.Phase.Terminal() {
				// Terminal but not wanted (failed while waiting for
				// awaiting_input, say): the workflow reads the result.
				return st, nil
			}
		case errors.Is(err, sandbox.ErrNotFound):
			sdkactivity.RecordHeartbeat(ctx, "no status yet")
		default:
			return protocol.Status{}, err
		}
		if time.Since(alive) >= max(every, time.Second) {
			if err := a.checkAlive(ctx, in.Sandbox.ID); err != nil {
				return protocol.Status{}, err
			}
			alive = time.Now()
		}
		select {
		case <-ctx.Done():
			return protocol.Status{}, ctx.Err()
		case <-t.C:
		}
	}
}

// checkAlive fails without retry when the agent process has exited or the
// sandbox is gone: nothing more will be written.
func (a *Activities) checkAlive(ctx context.Context, id string) error {
	st, err := a.Sandbox.Status(ctx, id)
	if errors.Is(err, sandbox.ErrNotFound) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("sandbox %s is gone", id), ErrSandboxGone, err)
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
	err := a.readJSON(ctx, id, protocol.StatusFile, &st)
	return st, err
}

// ReadResultInput names the sandbox to read from.
type ReadResultInput struct {
	Sandbox SandboxRef
}

// ReadResult reads result.json, trimming diffs beyond MaxResultBytes.
func (a *Activities) ReadResult(ctx context.Context, in ReadResultInput) (protocol.Result, error) {
	var r protocol.Result
	if err := a.readJSON(ctx, in.Sandbox.ID, protocol.ResultFile, &r); err != nil {
		return r, err
	}
	limit := a.MaxResultBytes
	if limit <= 0 {
		limit = 1 << 20
	}
	used := 0
	for i := range r.Repositories {
		for j := range r.Repositories[i].Diffs {
			d := &r.Repositories[i].Diffs[j]
			if used+len(d.Diff) > limit {
				d.Diff = ""
				d.Truncated = true
				continue
			}
			used += len(d.Diff)
		}
	}
	return r, nil
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

// CleanupSandbox removes the sandbox and everything running in it.
func (a *Activities) CleanupSandbox(ctx context.Context, in CleanupInput) error {
	if err := a.Sandbox.Cleanup(ctx, in.Sandbox.ID); err != nil {
		return fmt.Errorf("clean up sandbox %s: %w", in.Sandbox.ID, err)
	}
	return nil
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

func (a *Activities) readJSON(ctx context.Context, id, name string, v any) error {
	rc, err := a.Sandbox.CopyFrom(ctx, id, path.Join(protocol.Dir, name))
	if err != nil {
		return fmt.Errorf("read %s from sandbox %s: %w", name, id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("read %s from sandbox %s: %w", name, id, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("decode %s from sandbox %s: %w", name, id, err)
	}
	return nil
}
