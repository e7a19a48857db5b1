package approval_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// The config's approver rules convert to Rules.
var _ = approval.Rule(spec.ApproverRule{})

// teams is a fake forge's team membership: team -> members.
type teams map[string][]string

func (ts teams) isMember(calls *[]string) approval.IsMember {
	return func(_ context.Context, team, user string) (bool, error) {
		if calls != nil {
			*calls = append(*calls, team+" "+user)
		}
		for _, m := range ts[team] {
			if strings.EqualFold(m, user) {
				return true, nil
			}
		}
		return false, nil
	}
}

var forgeTeams = teams{
	"acme/platform-team": {"pat"},
	"acme/security":      {"sam"},
	"acme/payments":      {"pia"},
}

// configRules are the starter's rules, plus a payments rule.
var configRules = []approval.Rule{
	{Path: "campaigns/**", Teams: []string{"acme/platform-team"}},
	{Path: "campaigns/security/**", Users: []string{"alice", "@bob"}, Teams: []string{"acme/security"}},
	{Path: "campaigns/payments/*.yaml", Users: []string{"Carol"}},
	{Path: "campaigns/empty/**"},
}

func TestAllowed(t *testing.T) {
	owners, err := approval.ParseCodeOwners(".github/CODEOWNERS", []byte(`
campaigns/payments/ @payments-lead @acme/payments owner@example.com
/campaigns/reports/ @reporter
/campaigns/reports/unowned.yaml
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		rules  []approval.Rule
		owners *approval.CodeOwners
		file   string
		user   string
		ok     bool
		reason string
	}{
		{"listed user", configRules, nil, "campaigns/security/slog.yaml", "alice", true, "listed in the approvers for campaigns/security/**"},
		{"listed with @", configRules, nil, "campaigns/security/slog.yaml", "bob", true, "listed in the approvers for campaigns/security/**"},
		{"login case", configRules, nil, "campaigns/payments/slog.yaml", "carol", true, "listed in the approvers for campaigns/payments/*.yaml"},
		{"team member", configRules, nil, "campaigns/security/slog.yaml", "sam", true, "a member of acme/security (approvers for campaigns/security/**)"},
		{"team of a broader rule", configRules, nil, "campaigns/security/slog.yaml", "pat", true, "a member of acme/platform-team (approvers for campaigns/**)"},
		{"listed for another path", configRules, nil, "campaigns/payments/slog.yaml", "alice", false,
			"not among its approvers: campaigns/** allows teams acme/platform-team; campaigns/payments/*.yaml allows users Carol"},
		{"not deep enough", configRules, nil, "campaigns/payments/eu/slog.yaml", "carol", false,
			"not among its approvers: campaigns/** allows teams acme/platform-team"},
		{"rule without anyone", configRules, nil, "campaigns/empty/x.yaml", "zed", false,
			"not among its approvers: campaigns/** allows teams acme/platform-team; campaigns/empty/** allows nobody"},
		{"no rule matches", configRules, nil, "other/slog.yaml", "alice", false, "no approver rule matches"},
		{"no rules at all", nil, nil, "campaigns/slog.yaml", "alice", false, "no approver rule matches"},
		{"no approver", configRules, nil, "campaigns/security/slog.yaml", "", false, "no approver named"},
		{"code owner", nil, owners, "campaigns/payments/slog.yaml", "Payments-Lead", true, "a code owner (.github/CODEOWNERS:2)"},
		{"code owner team", nil, owners, "campaigns/payments/slog.yaml", "pia", true, "a member of acme/payments (code owners, .github/CODEOWNERS:2)"},
		{"code owner e-mail never matches a login", nil, owners, "campaigns/payments/slog.yaml", "owner", false,
			"not among its approvers: .github/CODEOWNERS:2 names @payments-lead, @acme/payments, owner@example.com"},
		{"rules and code owners together", configRules, owners, "campaigns/payments/slog.yaml", "pat", true, "a member of acme/platform-team (approvers for campaigns/**)"},
		{"code owners only where no rule matches", configRules, owners, "campaigns/reports/r.yaml", "reporter", true, "a code owner (.github/CODEOWNERS:3)"},
		{"no owner line", nil, owners, "campaigns/slog.yaml", "alice", false, "no approver rule matches, nor any line of .github/CODEOWNERS"},
		{"owner line without owners", nil, owners, "campaigns/reports/unowned.yaml", "reporter", false,
			"no approver rule matches, and .github/CODEOWNERS:4 leaves it without owners"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := approval.NewPolicy(c.rules, c.owners)
			if err != nil {
				t.Fatal(err)
			}
			ok, reason, err := p.Allowed(context.Background(), c.file, c.user, forgeTeams.isMember(nil))
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.ok || reason != c.reason {
				t.Errorf("Allowed = %t, %q\n          want %t, %q", ok, reason, c.ok, c.reason)
			}
		})
	}
}

// TestAllowedAsksTheForgeLittle: listed users need no forge call; each
// team is asked about once; without a forge no team is asked and the
// reason says so.
func TestAllowedAsksTheForgeLittle(t *testing.T) {
	rules := []approval.Rule{
		{Path: "campaigns/**", Users: []string{"alice"}, Teams: []string{"acme/a", "acme/b"}},
		{Path: "campaigns/x/**", Teams: []string{"ACME/A", "acme/c"}},
	}
	p, err := approval.NewPolicy(rules, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var calls []string
	if ok, _, _ := p.Allowed(ctx, "campaigns/x/y.yaml", "alice", forgeTeams.isMember(&calls)); !ok || len(calls) != 0 {
		t.Errorf("listed user: allowed %t after %v", ok, calls)
	}
	if ok, _, _ := p.Allowed(ctx, "campaigns/x/y.yaml", "zed", forgeTeams.isMember(&calls)); ok || strings.Join(calls, ",") != "acme/a zed,acme/b zed,acme/c zed" {
		t.Errorf("teams asked: %v", calls)
	}
	ok, reason, err := p.Allowed(ctx, "campaigns/x/y.yaml", "zed", nil)
	if ok || err != nil || !strings.HasSuffix(reason, "(team membership not checked: no forge to ask)") {
		t.Errorf("no forge: %t, %q, %v", ok, reason, err)
	}
	boom := errors.New("rate limited")
	_, _, err = p.Allowed(ctx, "campaigns/x/y.yaml", "zed", func(context.Context, string, string) (bool, error) { return false, boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "check whether zed is a member of acme/a") {
		t.Errorf("membership error: %v", err)
	}
}

func TestNewPolicyErrors(t *testing.T) {
	cases := []struct {
		rule approval.Rule
		want string
	}{
		{approval.Rule{Path: ""}, `approvers[0]: pattern "": empty pattern`},
		{approval.Rule{Path: "campaigns/{a"}, `unbalanced '{'`},
		{approval.Rule{Path: "campaigns/**", Users: []string{"acme/team"}}, `user "acme/team" looks like a team: list it under teams`},
		{approval.Rule{Path: "campaigns/**", Users: []string{"alice@example.com"}}, `user "alice@example.com" is not a forge login`},
		{approval.Rule{Path: "campaigns/**", Teams: []string{"platform"}}, `team "platform": want org/team`},
		{approval.Rule{Path: "campaigns/**", Teams: []string{"acme/"}}, `team "acme/": want org/team`},
	}
	for _, c := range cases {
		_, err := approval.NewPolicy([]approval.Rule{c.rule}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewPolicy(%+v) = %v, want an error containing %q", c.rule, err, c.want)
		}
	}
}

func TestNilPolicy(t *testing.T) {
	var p *approval.Policy
	if ok, reason, err := p.Allowed(context.Background(), "campaigns/a.yaml", "alice", nil); ok || reason != "no approver rule matches" || err != nil {
		t.Errorf("nil policy: %t, %q, %v", ok, reason, err)
	}
}
