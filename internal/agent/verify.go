package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
)

// feedbackTail is how much of a failing verifier's output goes back to
// the agent.
const feedbackTail = 2048

// runVerifiers runs every verifier in u. The error is set only when ctx
// ended.
func (r *runner) runVerifiers(ctx context.Context, u *unit) ([]protocol.VerifierResult, error) {
	var results []protocol.VerifierResult
	for _, v := range r.m.Verifiers {
		out := newTail(outputTail)
		code, err := command{
			argv: v.Command, dir: u.dir,
			env:    withEnv(r.env, protocol.EnvWorkspace+"="+r.ws, protocol.EnvRepository+"="+u.repo.Name),
			stdout: out, stderr: out,
			jail: r.jail(),
			disk: r.disk(),
		}.run(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			if stopsRun(err) {
				return nil, err
			}
			code = 127
			fmt.Fprintf(out, "%v\n", err)
		}
		results = append(results, protocol.VerifierResult{
			Name: v.Name, Success: code == 0, ExitCode: code, Output: r.redact(out.String()),
		})
	}
	return results, nil
}

// check runs the verifiers in units, remembering what they saw, and
// returns the units that fail with a report for the agent.
func (r *runner) check(ctx context.Context, units []*unit) ([]*unit, string, error) {
	var failing []*unit
	var b strings.Builder
	for _, u := range units {
		tree, err := r.snapshot(ctx, []*unit{u})
		if err != nil {
			return nil, "", err
		}
		results, err := r.runVerifiers(ctx, u)
		if err != nil {
			return nil, "", err
		}
		u.checkedTree, u.checks = tree, results
		bad := false
		for _, v := range results {
			if v.Success {
				continue
			}
			bad = true
			out := v.Output
			if len(out) > feedbackTail {
				out = out[len(out)-feedbackTail:]
			}
			fmt.Fprintf(&b, "### %s in %s: exit status %d\n```\n%s\n```\n\n", v.Name, u.repo.Name, v.ExitCode, strings.TrimRight(out, "\n"))
		}
		if bad {
			failing = append(failing, u)
		}
	}
	return failing, b.String(), nil
}

// verify is the final gate: the verifiers run in every repository whose
// work tree changed since they last ran there.
func (r *runner) verify(ctx context.Context) error {
	r.setPhase(protocol.PhaseVerifying, "running_verifiers", "")
	for _, u := range r.units {
		if u.broken || u.skipVerify || len(r.m.Verifiers) == 0 {
			continue
		}
		r.setStep("running_verifiers", "verifying "+u.repo.Name)
		tree, err := r.snapshot(ctx, []*unit{u})
		if err != nil {
			return err
		}
		if tree != u.checkedTree || u.checks == nil {
			results, err := r.runVerifiers(ctx, u)
			if err != nil {
				return err
			}
			u.checkedTree, u.checks = tree, results
		}
		u.res.VerifierResults = u.checks
		for _, v := range u.checks {
			if !v.Success && u.failure == "" {
				u.failure = fmt.Sprintf("verifier %s failed with exit status %d", v.Name, v.ExitCode)
			}
		}
		r.progressed(1)
	}
	return nil
}

// collect records each repository's changes and outcome.
func (r *runner) collect(ctx context.Context) error {
	transform := r.m.Mode == protocol.ModeTransform
	if transform {
		r.setStep("collecting_diffs", "collecting changes")
	}
	for _, u := range r.units {
		if u.broken {
			continue
		}
		if err := r.intact(u); err != nil {
			return err
		}
		if transform {
			changes, err := r.g.Changes(ctx, u.dir, git.DiffOptions{Base: u.base, MaxLines: r.o.MaxDiffLines})
			// On error the tree is empty: no pull request is made of it.
			u.tree = changes.Tree
			if err != nil {
				if ctx.Err() != nil {
					return context.Cause(ctx)
				}
				if u.failure == "" {
					u.failure = "collect changes: " + r.redact(err.Error())
				}
			}
			if len(changes.Files) > 0 {
				u.res.Tree = changes.Tree
			}
			for _, d := range changes.Files {
				u.res.FilesModified = append(u.res.FilesModified, d.Path)
				u.res.Diffs = append(u.res.Diffs, protocol.FileDiff{
					Path: d.Path, Status: d.Status, Additions: d.Additions, Deletions: d.Deletions,
					Diff: r.redactSecrets(d.Patch), Truncated: d.Truncated,
				})
			}
		}
		settle(u, transform)
	}
	if r.recipe != nil && r.recipe.res != nil {
		settle(r.recipe, false)
	}
	return nil
}

// settle sets a repository's status from its outcome: failed, skipped
// (a transform that changed nothing) or success.
func settle(u *unit, transform bool) {
	switch {
	case u.failure != "":
		u.res.Status = "failed"
		u.res.Error = u.failure
		u.res.ErrorKind = u.kind
	case transform && len(u.res.Diffs) == 0:
		u.res.Status = "skipped"
	default:
		u.res.Status = "success"
	}
}
