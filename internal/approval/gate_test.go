package approval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
)

const (
	d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

func TestIdentityIs(t *testing.T) {
	cases := []struct {
		id    approval.Identity
		login string
		want  bool
	}{
		{approval.Identity{Name: "alice", Email: "a.smith@example.com"}, "alice", true},
		{approval.Identity{Name: "Alice", Email: "a.smith@example.com"}, "ALICE", true},
		{approval.Identity{Name: "Alice Smith", Email: "alice@example.com"}, "alice", true},
		{approval.Identity{Name: "Alice Smith", Email: "Alice@Example.com"}, "alice@example.com", true},
		{approval.Identity{Name: "Alice Smith", Email: "12345+alice@users.noreply.github.com"}, "alice", true},
		{approval.Identity{Name: "Alice Smith", Email: "12345+alice@example.com"}, "alice", false},
		{approval.Identity{Name: "Alice Smith", Email: "alice.smith@example.com"}, "alice", false},
		{approval.Identity{Name: "Alice Smith", Email: "a@example.com"}, "@a", true},
		{approval.Identity{Name: "", Email: ""}, "", false},
		{approval.Identity{Name: "bob", Email: "bob@example.com"}, "alice", false},
	}
	for _, c := range cases {
		if got := c.id.Is(c.login); got != c.want {
			t.Errorf("%v.Is(%q) = %t, want %t", c.id, c.login, got, c.want)
		}
	}
}

func TestGateCommits(t *testing.T) {
	alice := approval.Identity{Name: "Alice Smith", Email: "alice@example.com"}
	bob := approval.Identity{Name: "bob", Email: "b@example.com"}
	carol := approval.Identity{Name: "Carol", Email: "carol@example.com"}
	web := approval.Identity{Name: "GitHub", Email: "noreply@github.com"}
	defs := map[string]approval.DefinitionChange{
		"slog-rollout": {File: "campaigns/payments/slog.yaml", Author: bob},
		"audit":        {File: "campaigns/security/audit.yaml", Author: alice},
		"stray":        {File: "other/stray.yaml", Author: bob},
	}
	policy, err := approval.NewPolicy([]approval.Rule{
		{Path: "campaigns/payments/**", Users: []string{"alice", "bob"}, Teams: []string{"acme/payments"}},
		{Path: "campaigns/security/**", Users: []string{"alice", "carol"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(file, target, action, digest, by string) approval.Record {
		return approval.Record{File: "approvals/" + file, Target: target, Action: approval.Action(action), ResultDigest: digest, By: by}
	}
	by := func(author, committer approval.Identity) approval.Commit {
		return approval.Commit{Hash: "0123456789abcdef0123", Author: author, Committer: committer}
	}
	type verdict struct {
		allowed bool
		reason  string
	}
	cases := []struct {
		name    string
		records []approval.CommittedRecord
		want    []verdict
	}{
		{"allowed approver", []approval.CommittedRecord{
			{rec("a.yaml", "slog-rollout/payments", "approve", d1, "alice"), by(alice, alice)},
		}, []verdict{
			{true, "alice may approve campaigns/payments/slog.yaml: listed in the approvers for campaigns/payments/**"},
		}},
		{"allowed by team", []approval.CommittedRecord{
			{rec("a.yaml", "slog-rollout/payments", "reject", d1, "pia"), by(approval.Identity{Name: "pia"}, web)},
		}, []verdict{
			{true, "pia may approve campaigns/payments/slog.yaml: a member of acme/payments (approvers for campaigns/payments/**)"},
		}},
		{"no rule matches", []approval.CommittedRecord{
			{rec("a.yaml", "stray", "continue", "", "alice"), by(alice, alice)},
		}, []verdict{
			{false, "alice may not approve other/stray.yaml: no approver rule matches"},
		}},
		{"not an approver of that path", []approval.CommittedRecord{
			{rec("a.yaml", "slog-rollout/payments", "approve", d1, "carol"), by(carol, carol)},
		}, []verdict{
			{false, "carol may not approve campaigns/payments/slog.yaml: not among its approvers: campaigns/payments/** allows users alice, bob and teams acme/payments"},
		}},
		{"commit by someone else", []approval.CommittedRecord{
			{rec("a.yaml", "slog-rollout/payments", "approve", d1, "alice"), by(bob, web)},
		}, []verdict{
			{false, "approvals/a.yaml was last changed by commit 0123456789ab, authored by bob <b@example.com> and committed by GitHub <noreply@github.com>, not by alice"},
		}},
		{"committed by the approver", []approval.CommittedRecord{
			{rec("a.yaml", "slog-rollout/payments", "approve", d1, "alice"), by(carol, alice)},
		}, []verdict{
			{true, "alice may approve campaigns/payments/slog.yaml: listed in the approvers for campaigns/payments/**"},
		}},
		{"no definition", []approval.CommittedRecord{
			{rec("a.yaml", "gone/payments", "approve", d1, "alice"), by(alice, alice)},
		}, []verdict{
			{false, "alice may not approve gone: it has no definition at this revision, so nobody can tell who may approve it"},
		}},
		{"no approver", []approval.CommittedRecord{
			{rec("a.yaml", "slog-rollout", "abort", "", ""), by(alice, alice)},
		}, []verdict{
			{false, "approvals/a.yaml names no approver (by)"},
		}},
		{"author approves alone", []approval.CommittedRecord{
			{rec("b.yaml", "slog-rollout/payments", "approve", d1, "bob"), by(bob, bob)},
		}, []verdict{
			{false, "bob authored slog-rollout's definition and cannot approve it alone: another approver must approve the same result"},
		}},
		{"author and another approver", []approval.CommittedRecord{
			{rec("b.yaml", "slog-rollout/payments", "approve", d1, "bob"), by(bob, bob)},
			{rec("a.yaml", "slog-rollout/payments", "approve", d1, "alice"), by(alice, alice)},
		}, []verdict{
			{true, "bob may approve campaigns/payments/slog.yaml: listed in the approvers for campaigns/payments/**; bob authored slog-rollout's definition, and alice approves it too"},
			{true, "alice may approve campaigns/payments/slog.yaml: listed in the approvers for campaigns/payments/**"},
		}},
		{"the other approves another result", []approval.CommittedRecord{
			{rec("b.yaml", "slog-rollout/payments", "approve", d1, "bob"), by(bob, bob)},
			{rec("a.yaml", "slog-rollout/payments", "approve", d2, "alice"), by(alice, alice)},
			{rec("c.yaml", "slog-rollout/billing", "approve", d1, "alice"), by(alice, alice)},
		}, []verdict{
			{false, "bob authored slog-rollout's definition and cannot approve it alone: another approver must approve the same result"},
			{true, "alice may approve campaigns/payments/slog.yaml: listed in the approvers for campaigns/payments/**"},
			{true, "alice may approve campaigns/payments/slog.yaml: listed in the approvers for campaigns/payments/**"},
		}},
		{"the other approver does not count", []approval.CommittedRecord{
			{rec("b.yaml", "slog-rollout/payments", "approve", d1, "bob"), by(bob, bob)},
			{rec("c.yaml", "slog-rollout/payments", "approve", d1, "carol"), by(carol, carol)},
			{rec("a.yaml", "slog-rollout/payments", "approve", d1, "alice"), by(bob, bob)},
		}, []verdict{
			{false, "bob authored slog-rollout's definition and cannot approve it alone: another approver must approve the same result"},
			{false, "carol may not approve campaigns/payments/slog.yaml: not among its approvers: campaigns/payments/** allows users alice, bob and teams acme/payments"},
			{false, "approvals/a.yaml was last changed by commit 0123456789ab, authored by bob <b@example.com> and committed by bob <b@example.com>, not by alice"},
		}},
		{"author twice is still alone", []approval.CommittedRecord{
			{rec("b.yaml", "slog-rollout/payments", "approve", d1, "bob"), by(bob, bob)},
			{rec("b2.yaml", "slog-rollout/payments", "approve", d1, "BOB"), by(bob, bob)},
		}, []verdict{
			{false, "bob authored slog-rollout's definition and cannot approve it alone: another approver must approve the same result"},
			{false, "BOB authored slog-rollout's definition and cannot approve it alone: another approver must approve the same result"},
		}},
		{"the author may reject and steer", []approval.CommittedRecord{
			{rec("b.yaml", "slog-rollout/payments", "reject", d1, "bob"), by(bob, bob)},
		}, []verdict{
			{true, "bob may approve campaigns/payments/slog.yaml: listed in the approvers for campaigns/payments/**"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := policy.GateCommits(context.Background(), c.records, defs, forgeTeams.isMember(nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d verdicts, want %d", len(got), len(c.want))
			}
			for i, v := range got {
				if v.Record != c.records[i].Record {
					t.Errorf("verdict %d is for %+v, want input order", i, v.Record)
				}
				if v.Allowed != c.want[i].allowed || v.Reason != c.want[i].reason {
					t.Errorf("verdict %d: %t, %q\n            want %t, %q", i, v.Allowed, v.Reason, c.want[i].allowed, c.want[i].reason)
				}
			}
		})
	}
}

func TestGateCommitsMembershipError(t *testing.T) {
	p, err := approval.NewPolicy([]approval.Rule{{Path: "campaigns/**", Teams: []string{"acme/x"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("forge unavailable")
	id := approval.Identity{Name: "zed"}
	_, err = p.GateCommits(context.Background(),
		[]approval.CommittedRecord{{Record: approval.Record{File: "approvals/z.yaml", Target: "c", Action: approval.Continue, By: "zed"}, Commit: approval.Commit{Author: id, Committer: id}}},
		map[string]approval.DefinitionChange{"c": {File: "campaigns/c.yaml"}},
		func(context.Context, string, string) (bool, error) { return false, boom })
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "gate approvals/z.yaml: ") {
		t.Errorf("err = %v", err)
	}
}
