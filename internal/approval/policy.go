package approval

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Rule lists who may approve the results of the definitions whose file
// matches Path. It has the fields of spec.ApproverRule (the config's
// approvers), so approval.Rule(r) converts one.
type Rule struct {
	// Path is a Glob over definition files, relative to the campaigns
	// repository root: "campaigns/payments/**".
	Path string `json:"path"`
	// Users are forge logins; a leading "@" is ignored.
	Users []string `json:"users,omitempty"`
	// Teams are "org/team"; a leading "@" is ignored.
	Teams []string `json:"teams,omitempty"`
}

// IsMember reports whether user belongs to team ("org/team"), as
// forge.Hub's IsMember does.
type IsMember func(ctx context.Context, team, user string) (bool, error)

// Policy decides who may approve the results of a definition: the users
// and teams of every approver rule whose path matches the definition's
// file, and, when the repository config switches CODEOWNERS on, the
// owners of the file. Nobody may approve a file that no rule matches and
// that has no code owner. A nil *Policy has no rules.
type Policy struct {
	rules  []rule
	owners *CodeOwners
}

type rule struct {
	glob  Glob
	users []string
	teams []string
}

// NewPolicy compiles the approver rules, in the order of the config, and
// keeps owners (nil when CODEOWNERS is off or absent). It refuses a rule
// with a bad path glob, a user that is not a login, and a team that is
// not "org/team".
func NewPolicy(rules []Rule, owners *CodeOwners) (*Policy, error) {
	p := &Policy{owners: owners}
	for i, r := range rules {
		g, err := CompileGlob(r.Path)
		if err != nil {
			return nil, fmt.Errorf("approvers[%d]: %w", i, err)
		}
		cr := rule{glob: g}
		for _, u := range r.Users {
			u = strings.TrimPrefix(u, "@")
			if strings.Contains(u, "/") {
				return nil, fmt.Errorf("approvers[%d] (%s): user %q looks like a team: list it under teams", i, r.Path, u)
			}
			if !validLogin(u) {
				return nil, fmt.Errorf("approvers[%d] (%s): user %q is not a forge login", i, r.Path, u)
			}
			cr.users = append(cr.users, u)
		}
		for _, t := range r.Teams {
			t = strings.TrimPrefix(t, "@")
			org, name, ok := strings.Cut(t, "/")
			if !ok || !validLogin(org) || name == "" || strings.ContainsAny(name, "/@") {
				return nil, fmt.Errorf("approvers[%d] (%s): team %q: want org/team", i, r.Path, t)
			}
			cr.teams = append(cr.teams, t)
		}
		p.rules = append(p.rules, cr)
	}
	return p, nil
}

// Allowed reports whether user (a forge login) may approve the results of
// the definition in file (a path relative to the campaigns repository
// root, such as "campaigns/payments/slog.yaml"): whether a rule matching
// file lists the user or one of the user's teams, or CODEOWNERS makes the
// user, or one of the user's teams, an owner of file. Logins and team
// names compare without regard to case, as forges do. An e-mail owner in
// CODEOWNERS never matches a login.
//
// Teams are checked with isMember only when no listed user matches, each
// at most once; a nil isMember (no forge to ask) checks no team, and the
// reason says so. An error from isMember is returned: whether the user may
// approve is then unknown, not refused.
//
// reason explains the answer for people, in words that follow
// "<user> may (not) approve <file>: ".
func (p *Policy) Allowed(ctx context.Context, file, user string, isMember IsMember) (ok bool, reason string, err error) {
	if p == nil {
		p = &Policy{}
	}
	user = strings.TrimPrefix(user, "@")
	if user == "" {
		return false, "no approver named", nil
	}
	var matched []rule
	for _, r := range p.rules {
		if r.glob.Match(file) {
			matched = append(matched, r)
		}
	}
	owners, line := p.owners.Owners(file)
	where := ""
	if p.owners != nil && line > 0 {
		where = fmt.Sprintf("%s:%d", p.owners.File, line)
	}
	if len(matched) == 0 && len(owners) == 0 {
		switch {
		case p.owners == nil:
			return false, "no approver rule matches", nil
		case line > 0:
			return false, fmt.Sprintf("no approver rule matches, and %s leaves it without owners", where), nil
		}
		return false, fmt.Sprintf("no approver rule matches, nor any line of %s", p.owners.File), nil
	}

	// Listed users first: no forge call.
	for _, r := range matched {
		if slices.ContainsFunc(r.users, eq(user)) {
			return true, fmt.Sprintf("listed in the approvers for %s", r.glob), nil
		}
	}
	for _, o := range owners {
		if k, _ := ownerKind(o); k == ownerUser && strings.EqualFold(o[1:], user) {
			return true, fmt.Sprintf("a code owner (%s)", where), nil
		}
	}

	// Then teams, each asked about once.
	type team struct{ name, why string }
	var teams []team
	for _, r := range matched {
		for _, t := range r.teams {
			teams = append(teams, team{t, "approvers for " + r.glob.String()})
		}
	}
	for _, o := range owners {
		if k, _ := ownerKind(o); k == ownerTeam {
			teams = append(teams, team{o[1:], "code owners, " + where})
		}
	}
	asked := map[string]bool{}
	for _, t := range teams {
		key := strings.ToLower(t.name)
		if asked[key] || isMember == nil {
			continue
		}
		asked[key] = true
		in, err := isMember(ctx, t.name, user)
		if err != nil {
			return false, "", fmt.Errorf("check whether %s is a member of %s: %w", user, t.name, err)
		}
		if in {
			return true, fmt.Sprintf("a member of %s (%s)", t.name, t.why), nil
		}
	}

	var who []string
	for _, r := range matched {
		who = append(who, fmt.Sprintf("%s allows %s", r.glob, listing(r.users, r.teams)))
	}
	if len(owners) > 0 {
		who = append(who, fmt.Sprintf("%s names %s", where, strings.Join(owners, ", ")))
	}
	reason = "not among its approvers: " + strings.Join(who, "; ")
	if len(teams) > 0 && isMember == nil {
		reason += " (team membership not checked: no forge to ask)"
	}
	return false, reason, nil
}

func listing(users, teams []string) string {
	var parts []string
	if len(users) > 0 {
		parts = append(parts, "users "+strings.Join(users, ", "))
	}
	if len(teams) > 0 {
		parts = append(parts, "teams "+strings.Join(teams, ", "))
	}
	if len(parts) == 0 {
		return "nobody"
	}
	return strings.Join(parts, " and ")
}

func eq(a string) func(string) bool {
	return func(b string) bool { return strings.EqualFold(a, b) }
}
