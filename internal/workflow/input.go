package workflow

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Start is what to start for a definition: a Task workflow, or a Campaign
// workflow (for a Campaign, or a Task with groups).
type Start struct {
	// WorkflowID is deterministic: "task/<id>" or "campaign/<id>".
	WorkflowID string
	Task       *TaskInput
	Campaign   *CampaignInput
}

// Options carry what the definition does not say.
type Options struct {
	// Forge is the forge the agent opens pull requests with ("local").
	Forge string
	// ApprovalTimeout bounds each wait for approval; zero waits forever.
	ApprovalTimeout time.Duration
	// HostTimeout is TaskInput.HostTimeout: zero means DefaultHostTimeout.
	HostTimeout time.Duration
	Git         protocol.GitConfig
}

// DefaultGit is the identity the agent commits with.
var DefaultGit = protocol.GitConfig{UserEmail: "fleetlift@noreply.localhost", UserName: "fleetlift", CloneDepth: 50}

// ForDefinition translates a loaded definition into what to start.
func ForDefinition(d spec.Definition, opts Options) (Start, error) {
	if d.Unresolved() {
		return Start{}, fmt.Errorf("%s: its repositories_from is not resolved: a definition with repository queries runs with the repositories a forge listed for it (fleetlift reconcile, or run with --forge)", d.ID)
	}
	switch {
	case d.Task != nil:
		t := d.Task
		tmpl, err := taskInput(t.ID, t.Title, t.Work, opts)
		if err != nil {
			return Start{}, err
		}
		if len(t.Groups) > 0 {
			c := CampaignInput{
				ID: t.ID, Template: tmpl, BatchSize: t.MaxParallel, MaxParallel: t.MaxParallel,
				ThresholdPercent: t.Failure.ThresholdPercent, FailureAction: string(t.Failure.Action),
			}
			for _, g := range t.Groups {
				c.Units = append(c.Units, groupUnit(g))
			}
			return Start{WorkflowID: "campaign/" + t.ID, Campaign: &c}, nil
		}
		tmpl.Manifest.Team = t.Team
		tmpl.Manifest.Repositories = repositories(t.Repositories)
		tmpl.Manifest.Targets = repositories(t.Targets)
		return Start{WorkflowID: "task/" + t.ID, Task: &tmpl}, nil
	case d.Campaign != nil:
		c := d.Campaign
		tmpl, err := taskInput(c.ID, c.Title, c.Template, opts)
		if err != nil {
			return Start{}, err
		}
		tmpl.Manifest.Team = c.Team
		if budget := c.MaxCostPerCampaign; budget > 0 && (tmpl.Manifest.Limits.MaxCostUSD == 0 || tmpl.Manifest.Limits.MaxCostUSD > budget) {
			// No task may cost more than the whole campaign; and the
			// gateway then refuses a task whose cost it cannot count.
			tmpl.Manifest.Limits.MaxCostUSD = budget
		}
		in := CampaignInput{
			ID: c.ID, Template: tmpl, BatchSize: c.BatchSize, StrictBatches: c.StrictBatches, MaxParallel: c.MaxParallel,
			ThresholdPercent: c.Failure.ThresholdPercent, FailureAction: string(c.Failure.Action),
			MaxCostUSD: c.MaxCostPerCampaign, Suspend: c.Suspend, MaxPendingChecks: c.MaxPendingChecks,
		}
		if rl := c.RateLimit; rl != nil {
			in.PullRequestsPerHour, in.Burst = rl.PullRequestsPerHour, rl.Burst
		}
		for _, r := range c.Repositories {
			in.Units = append(in.Units, Unit{Key: r.Name, Repositories: repositories([]spec.Repository{r})})
		}
		for _, g := range c.Groups {
			in.Units = append(in.Units, groupUnit(g))
		}
		return Start{WorkflowID: "campaign/" + c.ID, Campaign: &in}, nil
	}
	return Start{}, fmt.Errorf("definition %s in %s has neither a task nor a campaign", d.ID, d.File)
}

func taskInput(id, title string, w spec.Work, opts Options) (TaskInput, error) {
	git := opts.Git
	if git.UserEmail == "" {
		git = DefaultGit
	}
	forge := opts.Forge
	if forge == "" {
		forge = "local"
	}
	m := protocol.Manifest{
		TaskID:          id,
		Mode:            protocol.Mode(w.Mode),
		Title:           title,
		TimeoutSeconds:  int(time.Duration(w.Timeout) / time.Second),
		RequireApproval: w.RequireApproval,
		GitConfig:       git,
		Forge:           forge,
	}
	if w.Transformation != nil {
		r := repositories([]spec.Repository{*w.Transformation})[0]
		m.Transformation = &r
	}
	for _, f := range w.ForEach {
		m.ForEach = append(m.ForEach, protocol.ForEachTarget{Name: f.Name, Context: f.Context})
	}
	in := TaskInput{ID: id, Timeout: time.Duration(w.Timeout), ApprovalTimeout: opts.ApprovalTimeout, HostTimeout: opts.HostTimeout}
	switch {
	case w.Execution.Agentic != nil:
		ag := w.Execution.Agentic
		m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: ag.Prompt, Agent: ag.Agent}
		m.Verifiers = verifiers(ag.Verifiers)
		// The definition's limits, 0 included: "no retries" and "no
		// steers" are limits too, not the agent's defaults.
		m.Limits = protocol.Limits{MaxIterations: ag.Limits.MaxIterations, MaxTokens: ag.Limits.MaxTokens, MaxCostUSD: ag.Limits.MaxCostPerTask,
			MaxVerifierRetries: new(ag.Limits.MaxVerifierRetries)}
		m.MaxSteeringIterations = new(ag.Limits.MaxSteeringIterations)
		if ag.Output != nil {
			out := &protocol.Output{Capture: string(ag.Output.Capture)}
			if ag.Output.Schema != nil {
				b, err := json.Marshal(ag.Output.Schema)
				if err != nil {
					return TaskInput{}, fmt.Errorf("output schema of %s: %w", id, err)
				}
				out.Schema = b
			}
			m.Output = out
		}
	case w.Execution.Deterministic != nil:
		de := w.Execution.Deterministic
		m.Execution = protocol.Execution{Type: protocol.ExecutionDeterministic, Image: de.Image, Command: de.Command, Args: de.Args, Env: de.Env}
		m.Verifiers = verifiers(de.Verifiers)
		in.Image = de.Image
	}
	if pr := w.PullRequest; pr != nil {
		m.PullRequest = &protocol.PullRequest{BranchPrefix: pr.BranchPrefix, Title: pr.Title, Body: pr.Body, Labels: pr.Labels, Reviewers: pr.Reviewers, Draft: pr.Draft}
		if mg := pr.Merge; mg != nil {
			in.Merge = &status.MergePolicy{Method: mg.Method, Unapproved: !mg.RequireReview, After: time.Duration(mg.After), DeleteBranch: mg.DeleteBranch}
		}
		if pr.KeepCurrent != spec.KeepCurrentNever {
			in.KeepCurrent = pr.KeepCurrent
		}
	} else if m.Mode == protocol.ModeTransform {
		m.PullRequest = &protocol.PullRequest{BranchPrefix: "fleetlift", Title: title}
	}
	if s := w.Sandbox; s != nil && s.Resources != nil {
		if l := s.Resources.Limits; l != nil {
			in.Resources.Memory, in.Resources.CPU = l.Memory, l.CPU
		}
		if r := s.Resources.Requests; r != nil {
			in.Resources.RequestMemory, in.Resources.RequestCPU = r.Memory, r.CPU
		}
	}
	if s := w.Sandbox; s != nil && (s.Namespace != "" || s.RuntimeClass != "" || len(s.NodeSelector) > 0) {
		in.Placement = &activity.Placement{Namespace: s.Namespace, RuntimeClass: s.RuntimeClass, NodeSelector: s.NodeSelector}
	}
	in.Credentials = credentials(w.Credentials)
	in.Manifest = m
	if dw := w.DoneWhen; dw != nil && m.Mode == protocol.ModeTransform {
		in.Done = doneCheck(id, title, *dw, in)
	}
	return in, nil
}

// doneCheck is the follower's check of dw for task id, whose input is
// in: a read-only command in the deterministic execution's image
// (unless dw names one), within the task's timeout, in a sandbox with
// the task's resources and placement.
func doneCheck(id, title string, dw spec.DoneWhen, in TaskInput) *status.DoneCheck {
	m := in.Manifest
	image := dw.Image
	if image == "" {
		image = m.Execution.Image
	}
	d := &status.DoneCheck{
		Manifest: protocol.Manifest{
			TaskID: id, Mode: protocol.ModeCheck, Title: "done_when of " + title, TimeoutSeconds: m.TimeoutSeconds,
			Execution: protocol.Execution{Type: protocol.ExecutionDeterministic, Image: image, Command: dw.Command},
			GitConfig: m.GitConfig,
		},
		Image:     image,
		Every:     cmp.Or(time.Duration(dw.Every), spec.DefaultDoneEvery),
		Resources: in.Resources,
	}
	if p := in.Placement; p != nil {
		d.Namespace, d.RuntimeClass, d.NodeSelector = p.Namespace, p.RuntimeClass, p.NodeSelector
	}
	return d
}

// credentials are the references of c, the definition's credentials
// (names of Secrets and keys, never values); nil when it has none.
func credentials(c *spec.Credentials) *activity.Credentials {
	if c == nil || c.GitHub == nil && c.Anthropic == nil {
		return nil
	}
	ref := func(c *spec.Credential) *sandbox.SecretRef {
		if c == nil {
			return nil
		}
		return &sandbox.SecretRef{Secret: c.SecretRef.Name, Key: c.SecretRef.Key}
	}
	return &activity.Credentials{GitHub: ref(c.GitHub), Anthropic: ref(c.Anthropic)}
}

// groupUnit is the unit of group g: its repositories, worked on
// g.MaxParallel at once (spec.DefaultGroupParallel when it says none).
func groupUnit(g spec.Group) Unit {
	return Unit{Key: g.Name, Repositories: repositories(g.Repositories), Parallel: cmp.Or(g.MaxParallel, spec.DefaultGroupParallel)}
}

func repositories(rs []spec.Repository) []protocol.Repository {
	var out []protocol.Repository
	for _, r := range rs {
		out = append(out, protocol.Repository{URL: r.URL, Branch: r.Branch, Name: r.Name, Setup: r.Setup, Submodules: r.Submodules})
	}
	return out
}

func verifiers(vs []spec.Verifier) []protocol.Verifier {
	var out []protocol.Verifier
	for _, v := range vs {
		out = append(out, protocol.Verifier{Name: v.Name, Command: v.Command})
	}
	return out
}
