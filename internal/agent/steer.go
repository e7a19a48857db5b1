package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// awaitSteering waits in awaiting_input for steering.json and acts on it
// until approve, reject or cancel.
func (r *runner) awaitSteering(ctx context.Context) error {
	maxSteers := DefaultMaxSteeringIterations
	if n := r.m.MaxSteeringIterations; n != nil {
		maxSteers = *n
	}
	summary, _, _ := protocol.Summarize(r.result.Repositories)
	msg := "waiting for approval: " + summary
	for {
		// Steering written while work ran predates the result it would
		// act on, and may come from the agent itself: only cancel and
		// reject apply then (see watchCancel).
		if r.discardSteering() {
			msg += " (discarded a steering.json written before this result)"
		}
		r.result.Status = protocol.PhaseAwaitingInput
		if err := r.writeResult(); err != nil {
			return err
		}
		r.setPhase(protocol.PhaseAwaitingInput, "awaiting_steering", msg)
		s, err := r.nextSteering(ctx)
		if err != nil {
			if ctx.Err() != nil {
				if werr := r.end(protocol.PhaseFailed, "agent stopped while waiting for input: "+context.Cause(ctx).Error()); werr != nil {
					return werr
				}
				return context.Cause(ctx)
			}
			msg = "ignored " + err.Error() + "; still waiting"
			continue
		}
		switch s.Action {
		case protocol.ActionApprove:
			return r.complete(ctx)
		case protocol.ActionReject:
			return r.end(protocol.PhaseCancelled, "rejected")
		case protocol.ActionCancel:
			return r.end(protocol.PhaseCancelled, "cancelled")
		case protocol.ActionSteer:
			switch {
			case strings.TrimSpace(s.Prompt) == "":
				msg = "ignored a steer without a prompt; still waiting"
				continue
			case s.Iteration > 0 && s.Iteration <= r.iteration:
				msg = fmt.Sprintf("steering iteration %d was already applied; still waiting", s.Iteration)
				continue
			case r.iteration >= maxSteers:
				msg = fmt.Sprintf("steering limit reached (%d of %d): approve or reject", r.iteration, maxSteers)
				continue
			}
			r.iteration++
			r.result.SteeringHistory = append(r.result.SteeringHistory, protocol.SteeringRecord{
				Iteration: r.iteration, Prompt: s.Prompt, Timestamp: r.o.Now().UTC(),
			})
			err := r.active(ctx, func(ctx context.Context) error { return r.work(ctx, s.Prompt) })
			if done, err := r.afterActive(ctx, err); done {
				return err
			}
			summary, _, _ := protocol.Summarize(r.result.Repositories)
			msg = fmt.Sprintf("applied steering iteration %d; waiting for approval: %s", r.iteration, summary)
		default:
			msg = fmt.Sprintf("ignored unknown steering action %q; still waiting", s.Action)
		}
	}
}

// nextSteering waits for steering.json, reads it and deletes it. An
// error that is not ctx's describes a file that could not be used.
func (r *runner) nextSteering(ctx context.Context) (protocol.Steering, error) {
	t := time.NewTicker(r.o.SteeringPoll)
	defer t.Stop()
	for {
		s, ok, err := r.takeSteering(func(protocol.Steering) bool { return true }, true)
		if ok || err != nil {
			return s, err
		}
		select {
		case <-ctx.Done():
			return protocol.Steering{}, ctx.Err()
		case <-t.C:
		}
	}
}

// takeSteering reads steering.json and, when want accepts it, deletes it.
// An invalid file is deleted too when removeInvalid is set; while work runs
// it is left alone, since it may be a write still in progress (the worker
// writes atomically; an agent command may not), and awaitSteering discards
// and reports it. ok reports an accepted instruction.
func (r *runner) takeSteering(want func(protocol.Steering) bool, removeInvalid bool) (s protocol.Steering, ok bool, err error) {
	path := filepath.Join(r.pdir, protocol.SteeringFile)
	data, err := readRegular(path, maxSteeringBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("unreadable steering.json: %v", err)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		if removeInvalid {
			os.Remove(path)
		}
		return s, false, fmt.Errorf("invalid steering.json: %v", err)
	}
	if !want(s) {
		return s, false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s, false, fmt.Errorf("remove steering.json: %v", err)
	}
	return s, true, nil
}

// discardSteering removes steering.json, reporting whether there was one.
func (r *runner) discardSteering() bool {
	err := os.Remove(filepath.Join(r.pdir, protocol.SteeringFile))
	if err == nil {
		r.o.Log.Warn("discarded steering.json written while working")
	}
	return err == nil
}

// watchCancel stops a stretch of work when steering says cancel or
// reject; other instructions wait for awaiting_input.
func (r *runner) watchCancel(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(r.o.SteeringPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, ok, _ := r.takeSteering(func(s protocol.Steering) bool {
			return s.Action == protocol.ActionCancel || s.Action == protocol.ActionReject
		}, false)
		if ok {
			cancel(errCancelled)
			return
		}
	}
}
