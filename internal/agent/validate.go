package agent

import (
	"errors"
	"fmt"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
)

// targetsDir holds the target repositories of the transformation +
// targets layout.
const targetsDir = "targets"

// validate checks what the spec loader already checked, again, and what
// only the agent can check (the agent CLI). It fills in
// defaults in m.
func validate(m *protocol.Manifest) error {
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if m.TaskID == "" {
		add("task_id is empty")
	}
	if m.Parallel < 0 || m.Parallel > 100 {
		add("parallel %d is not between 0 and 100", m.Parallel)
	}
	switch m.Mode {
	case "":
		m.Mode = protocol.ModeTransform
	case protocol.ModeTransform, protocol.ModeReport:
	case protocol.ModeCheck:
		if m.Execution.Type != protocol.ExecutionDeterministic || len(m.Verifiers) > 0 || m.Transformation != nil || m.RequireApproval || m.PullRequest != nil {
			add("mode check runs a deterministic command in repositories, without verifiers, a transformation, approval or pull requests")
		}
	default:
		add("mode %q is neither transform, report nor check", m.Mode)
	}

	checkRepo := func(field string, r protocol.Repository) {
		if err := git.ValidateName(r.Name); err != nil {
			add("%s: %v", field, err)
		}
		if err := git.CheckURL(r.URL); err != nil {
			add("%s: %v", field, err)
		}
		if r.Branch != "" {
			if err := git.CheckBranch(r.Branch); err != nil {
				add("%s: %v", field, err)
			}
		}
	}
	unique := func(field string, repos []protocol.Repository) {
		seen := map[string]bool{}
		for i, r := range repos {
			checkRepo(fmt.Sprintf("%s[%d]", field, i), r)
			if seen[r.Name] {
				add("%s[%d]: name %q is used twice", field, i, r.Name)
			}
			seen[r.Name] = true
		}
	}
	switch {
	case m.Transformation != nil:
		if len(m.Repositories) > 0 {
			add("use either repositories or transformation + targets, not both")
		}
		if len(m.Targets) == 0 {
			add("transformation needs at least one target")
		}
		checkRepo("transformation", *m.Transformation)
		unique("targets", m.Targets)
	case len(m.Targets) > 0:
		add("targets need a transformation repository")
	case len(m.Repositories) == 0:
		add("no repositories")
	default:
		unique("repositories", m.Repositories)
	}

	switch m.Execution.Type {
	case protocol.ExecutionAgentic:
		if m.Execution.Prompt == "" {
			add("execution.prompt is empty")
		}
	case protocol.ExecutionDeterministic:
		if len(m.Execution.Command) == 0 || m.Execution.Command[0] == "" {
			add("execution.command is empty: the agent runs command + args itself and cannot use an image's entrypoint")
		}
	default:
		add("execution.type %q is neither agentic nor deterministic", m.Execution.Type)
	}
	for k := range m.Execution.Env {
		if !envName.MatchString(k) {
			add("execution.env: invalid variable name %q", k)
		}
	}

	for i, v := range m.Verifiers {
		if err := git.ValidateName(v.Name); err != nil {
			add("verifiers[%d]: %v", i, err)
		}
		if len(v.Command) == 0 || v.Command[0] == "" {
			add("verifiers[%d]: command is empty", i)
		}
	}
	if m.Output != nil {
		switch m.Output.Capture {
		case "", "file", "stdout":
		default:
			add("output.capture %q is neither file nor stdout", m.Output.Capture)
		}
	}
	if len(m.ForEach) > 0 && m.Mode != protocol.ModeReport {
		add("for_each is only for report mode")
	}
	seen := map[string]bool{}
	for i, t := range m.ForEach {
		if err := git.ValidateName(t.Name); err != nil {
			add("for_each[%d]: %v", i, err)
		}
		if seen[t.Name] {
			add("for_each[%d]: name %q is used twice", i, t.Name)
		}
		seen[t.Name] = true
	}
	if m.TimeoutSeconds < 0 {
		add("timeout_seconds is negative")
	}
	if m.Limits.MaxIterations < 0 || negative(m.Limits.MaxVerifierRetries) || negative(m.MaxSteeringIterations) {
		add("limits must not be negative")
	}

	if m.Mode == protocol.ModeTransform {
		if m.Forge == "" {
			m.Forge = "local"
		}
		if m.PullRequest == nil {
			m.PullRequest = &protocol.PullRequest{}
		}
		if m.PullRequest.BranchPrefix == "" {
			m.PullRequest.BranchPrefix = "fleetlift"
		}
		if m.PullRequest.Title == "" {
			m.PullRequest.Title = m.Title
		}
		if m.PullRequest.Title == "" {
			m.PullRequest.Title = "fleetlift: " + m.TaskID
		}
		if m.TaskID != "" {
			if err := git.CheckBranch(protocol.BranchName(m.PullRequest.BranchPrefix, m.TaskID)); err != nil {
				add("pull_request.branch_prefix and task_id: %v", err)
			}
		}
	}
	return errors.Join(errs...)
}

// negative reports whether a limit the manifest sets is below zero.
func negative(n *int) bool { return n != nil && *n < 0 }
