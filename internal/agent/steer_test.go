package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// startRun runs m in the background and returns a function that waits
// for its result.
func startRun(t *testing.T, o agent.Options, m protocol.Manifest) func() protocol.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	type outcome struct {
		res protocol.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := agent.Run(ctx, o, m)
		done <- outcome{res, err}
	}()
	t.Cleanup(cancel)
	return func() protocol.Result {
		t.Helper()
		out := <-done
		if out.err != nil {
			t.Fatalf("Run: %v", out.err)
		}
		return out.res
	}
}

func awaitingInput(iteration int) func(protocol.Status) bool {
	return func(st protocol.Status) bool {
		return st.Phase == protocol.PhaseAwaitingInput && st.Iteration == iteration
	}
}

func TestSteering(t *testing.T) {
	type step struct {
		steering protocol.Steering
		// wantMessage is part of the status message once it is handled.
		wantMessage string
		iteration   int
	}
	tests := []struct {
		name         string
		maxSteering  int
		steps        []step
		final        protocol.Steering
		wantPhase    protocol.Phase
		wantHistory  []string
		wantFeedback []string // reached the agent (in AGENT_LOG.md on the pushed branch)
	}{
		{
			name: "steer twice then approve",
			steps: []step{
				{protocol.Steering{Action: protocol.ActionSteer, Prompt: "Also update the docs", Iteration: 1}, "applied steering iteration 1", 1},
				{protocol.Steering{Action: protocol.ActionSteer, Prompt: "Use British spelling", Iteration: 2}, "applied steering iteration 2", 2},
				// The worker retried its last write: nothing happens again.
				{protocol.Steering{Action: protocol.ActionSteer, Prompt: "Use British spelling", Iteration: 2}, "already applied", 2},
			},
			final:        protocol.Steering{Action: protocol.ActionApprove},
			wantPhase:    protocol.PhaseComplete,
			wantHistory:  []string{"Also update the docs", "Use British spelling"},
			wantFeedback: []string{"steering iteration 1):\nAlso update the docs", "steering iteration 2):\nUse British spelling", "## iteration=2 attempt=1"},
		},
		{
			name:      "reject",
			final:     protocol.Steering{Action: protocol.ActionReject},
			wantPhase: protocol.PhaseCancelled,
		},
		{
			name:        "steering beyond the limit waits for a decision",
			maxSteering: 1,
			steps: []step{
				{protocol.Steering{Action: protocol.ActionSteer, Prompt: "first"}, "applied steering iteration 1", 1},
				{protocol.Steering{Action: protocol.ActionSteer, Prompt: "second"}, "steering limit reached (1 of 1)", 1},
				{protocol.Steering{Action: "dance"}, `unknown steering action "dance"`, 1},
			},
			final:       protocol.Steering{Action: protocol.ActionCancel},
			wantPhase:   protocol.PhaseCancelled,
			wantHistory: []string{"first"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "Improve the README."}
			m.RequireApproval = true
			if tt.maxSteering != 0 {
				m.MaxSteeringIterations = new(tt.maxSteering)
			}
			wait := startRun(t, o, m)

			waitStatus(t, o.Workspace, "awaiting input", awaitingInput(0))
			var before protocol.Result
			readJSON(t, filepath.Join(o.Workspace, protocol.Dir, protocol.ResultFile), &before)
			if before.Status != protocol.PhaseAwaitingInput || len(repoResult(t, before, "svc").Diffs) == 0 {
				t.Fatalf("result before approval: %+v", before)
			}
			for _, s := range tt.steps {
				steer(t, o.Workspace, s.steering)
				st := waitStatus(t, o.Workspace, s.wantMessage, func(st protocol.Status) bool {
					return st.Phase == protocol.PhaseAwaitingInput && strings.Contains(st.Message, s.wantMessage)
				})
				if st.Iteration != s.iteration {
					t.Fatalf("iteration %d after %+v, want %d", st.Iteration, s.steering, s.iteration)
				}
				if _, err := os.Stat(filepath.Join(o.Workspace, protocol.Dir, protocol.SteeringFile)); err == nil {
					t.Fatal("steering.json not deleted after it was acted on")
				}
			}
			steer(t, o.Workspace, tt.final)
			res := wait()

			if res.Status != tt.wantPhase {
				t.Fatalf("phase %s, want %s (%s)", res.Status, tt.wantPhase, res.Error)
			}
			var history []string
			for i, h := range res.SteeringHistory {
				history = append(history, h.Prompt)
				if h.Iteration != i+1 || h.Timestamp.IsZero() {
					t.Errorf("steering record %+v", h)
				}
			}
			if strings.Join(history, "|") != strings.Join(tt.wantHistory, "|") {
				t.Errorf("steering history %q, want %q", history, tt.wantHistory)
			}
			r := repoResult(t, res, "svc")
			dir, commit := leftChange(t, o, remote, r)
			if tt.wantPhase != protocol.PhaseComplete {
				if commit != "" {
					t.Fatalf("a %s run left change %s for the worker", tt.wantPhase, commit)
				}
				return
			}
			if commit == "" {
				t.Fatal("no change left for the worker")
			}
			log := gittest.Run(t, dir, "show", commit+":AGENT_LOG.md")
			for _, want := range tt.wantFeedback {
				if !strings.Contains(log, want) {
					t.Errorf("the agent never saw %q:\n%s", want, log)
				}
			}
		})
	}
}

// A transform that changes no repository has nothing to approve: it ends,
// its repository skipped and no pull request opened, without waiting for
// a decision.
func TestNoChangeIsNotAwaited(t *testing.T) {
	o := options(t)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := manifest(repo("svc", remote))
	m.RequireApproval = true
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := agent.Run(ctx, o, m)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != protocol.PhaseComplete || len(res.SteeringHistory) != 0 {
		t.Fatalf("phase %s (%s), steering %+v; want complete at once", res.Status, res.Error, res.SteeringHistory)
	}
	if r := repoResult(t, res, "svc"); r.Status != "skipped" || r.Base != "" {
		t.Errorf("repository %s, change on %q; want skipped, none", r.Status, r.Base)
	}
}
