package workflow_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestForDefinitionExamples translates every example into what would be
// started and checks what a user would see run.
func TestForDefinitionExamples(t *testing.T) {
	res, err := (&spec.Loader{}).Load(context.Background(), os.DirFS("../../examples"), ".")
	if err != nil || len(res.Errors) > 0 {
		t.Fatalf("load examples: %v %v", err, res.Errors)
	}
	byID := map[string]workflow.Start{}
	for _, d := range res.Definitions {
		s, err := workflow.ForDefinition(d, workflow.Options{})
		if err != nil {
			t.Fatalf("%s: %v", d.ID, err)
		}
		if (s.Task == nil) == (s.Campaign == nil) {
			t.Fatalf("%s: want exactly one of task and campaign: %+v", d.ID, s)
		}
		byID[d.ID] = s
	}

	slog := byID["slog-migration"]
	if slog.WorkflowID != "task/slog-migration" || slog.Task == nil {
		t.Fatalf("slog-migration: %+v", slog)
	}
	m := slog.Task.Manifest
	if m.Execution.Type != protocol.ExecutionAgentic || len(m.Repositories) != 2 || len(m.Verifiers) != 2 || !m.RequireApproval ||
		m.TimeoutSeconds != 1800 || m.PullRequest.BranchPrefix != "auto/slog-migration" || m.Forge != "local" {
		t.Errorf("slog-migration manifest: %+v", m)
	}

	// The definition's limits reach the agent as they are (the schema's
	// defaults included), so that a 0 is none, not the agent's default.
	if l := m.Limits; l.MaxVerifierRetries == nil || *l.MaxVerifierRetries != 3 || m.MaxSteeringIterations == nil || *m.MaxSteeringIterations != 5 {
		t.Errorf("slog-migration limits: retries %v, steers %v; want 3 and 5", l.MaxVerifierRetries, m.MaxSteeringIterations)
	}

	fleet := byID["fleet-migration"]
	if fleet.Campaign == nil || len(fleet.Campaign.Units) != 3 || fleet.Campaign.ThresholdPercent != 20 {
		t.Errorf("a task with groups runs as a campaign of its groups: %+v", fleet)
	} else if u := fleet.Campaign.Units[0]; u.Key != "team-a" || len(u.Repositories) != 2 || u.Parallel != spec.DefaultGroupParallel {
		t.Errorf("fleet-migration first group (its repositories worked on %d at once): %+v", spec.DefaultGroupParallel, u)
	}

	// done_when reaches the follower as a read-only check in the
	// command's image, every 24 hours.
	log4j := byID["log4j-upgrade"].Task
	if d := log4j.Done; d == nil || d.Manifest.Mode != protocol.ModeCheck || d.Image != "maven:3.9-eclipse-temurin-21" || d.Every != spec.DefaultDoneEvery ||
		len(d.Manifest.Execution.Command) != 3 || d.Manifest.TimeoutSeconds != 1200 || d.Manifest.PullRequest != nil || len(d.Manifest.Verifiers) > 0 {
		t.Errorf("log4j-upgrade done_when: %+v", d)
	}

	classify := byID["endpoint-classification"].Task
	if classify == nil || classify.Manifest.Transformation == nil || len(classify.Manifest.Targets) != 2 || len(classify.Manifest.ForEach) != 1 {
		t.Errorf("transformation + targets: %+v", classify)
	}

	audit := byID["auth-audit"].Task
	if audit == nil || audit.Manifest.Output == nil || len(audit.Manifest.Output.Schema) == 0 || audit.Manifest.PullRequest != nil {
		t.Errorf("report: output schema carried, no pull request: %+v", audit)
	}

	// A definition's credentials travel as references (Secret and key
	// names), for every unit of a campaign.
	rollout := byID["slog-rollout"].Campaign
	if rollout == nil || rollout.Template.Credentials == nil {
		t.Errorf("slog-rollout: no credentials in %+v", rollout)
	} else if c := rollout.Template.Credentials; c.GitHub == nil || *c.GitHub != (sandbox.SecretRef{Secret: "github-credentials", Key: "token"}) ||
		c.Anthropic == nil || *c.Anthropic != (sandbox.SecretRef{Secret: "claude-credentials", Key: "api-key"}) {
		t.Errorf("slog-rollout credentials: %+v %+v", c.GitHub, c.Anthropic)
	}
	// So does its sandbox placement, for the provider to apply or note.
	if lic := byID["license-headers"].Campaign; lic == nil || !reflect.DeepEqual(lic.Template.Placement, &activity.Placement{
		Namespace: "fleetlift-sandboxes", RuntimeClass: "gvisor", NodeSelector: map[string]string{"acme.dev/pool": "batch"}}) {
		t.Errorf("license-headers: placement of %+v", lic)
	}
	// Its requests as well as its limits, for a provider that schedules
	// sandboxes to apply.
	if lic := byID["license-headers"].Campaign; lic == nil || lic.Template.Resources != (sandbox.Resources{
		Memory: "1Gi", CPU: "1", RequestMemory: "512Mi", RequestCPU: "500m"}) {
		t.Errorf("license-headers: resources of %+v", lic)
	}
	if p := rollout.Template.Placement; p != nil {
		t.Errorf("slog-rollout names no placement, got %+v", p)
	}
	if c := slog.Task.Credentials; c != nil {
		t.Errorf("slog-migration names no credentials, got %+v", c)
	}

	for id, s := range byID {
		if s.Campaign == nil {
			continue
		}
		for _, u := range s.Campaign.Units {
			if u.Key == "" || len(u.Repositories) == 0 {
				t.Errorf("%s: empty unit %+v", id, u)
			}
		}
	}
}

// TestDoneCheckRunsWhereTheWorkRuns: done_when's sandbox takes the
// definition's sandbox resources and placement, as the work's does.
func TestDoneCheckRunsWhereTheWorkRuns(t *testing.T) {
	data, err := os.ReadFile("../../examples/license-headers.yml")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(data), "  sandbox:\n", "  done_when: {command: [addlicense, -check, .]}\n  sandbox:\n", 1)
	res, err := (&spec.Loader{}).Load(context.Background(), fstest.MapFS{"c.yml": {Data: []byte(body)}}, ".")
	if err != nil || len(res.Errors) > 0 || len(res.Definitions) != 1 {
		t.Fatalf("load: %v %v", err, res.Errors)
	}
	s, err := workflow.ForDefinition(res.Definitions[0], workflow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d := s.Campaign.Template.Done
	if d == nil || d.Image != "ghcr.io/acme/addlicense:1.1.1" || d.Namespace != "fleetlift-sandboxes" || d.RuntimeClass != "gvisor" ||
		d.NodeSelector["acme.dev/pool"] != "batch" || d.Resources != s.Campaign.Template.Resources || d.Resources.RequestMemory != "512Mi" {
		t.Errorf("done_when's check: %+v", d)
	}
}
