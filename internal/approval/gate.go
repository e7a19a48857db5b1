package approval

import (
	"context"
	"fmt"
	"strings"
)

// Identity is a Git author or committer.
type Identity struct {
	Name  string
	Email string
}

func (id Identity) String() string {
	switch {
	case id.Name == "" && id.Email == "":
		return "nobody"
	case id.Email == "":
		return id.Name
	}
	return fmt.Sprintf("%s <%s>", id.Name, id.Email)
}

// Is reports whether the identity can be the forge user login: the login
// equals, without regard to case, the Git name, the e-mail address, the
// e-mail's local part, or the login in a GitHub no-reply address
// ("12345+alice@users.noreply.github.com").
//
// Git identities are whatever the committer typed: this tells honest
// mistakes apart (a record naming someone else than who committed it),
// it does not authenticate anyone. The guard against a forged identity is
// the forge: branch protection on the watched branch (reviews required,
// only approvers may push to approvals/, signed commits).
func (id Identity) Is(login string) bool {
	login = strings.TrimPrefix(strings.TrimSpace(login), "@")
	if login == "" {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(id.Name), login) || strings.EqualFold(id.Email, login) {
		return true
	}
	local, domain, ok := strings.Cut(id.Email, "@")
	if !ok {
		return false
	}
	if strings.EqualFold(local, login) {
		return true
	}
	if strings.EqualFold(domain, "users.noreply.github.com") {
		if _, l, ok := strings.Cut(local, "+"); ok && strings.EqualFold(l, login) {
			return true
		}
	}
	return false
}

// Commit is who made a Git commit.
type Commit struct {
	Hash      string
	Author    Identity
	Committer Identity
}

// CommittedRecord is an approval record read from the campaigns
// repository, with the commit that last changed its file.
type CommittedRecord struct {
	Record Record
	Commit Commit
}

// DefinitionChange is a campaign's (or task's) definition file at the
// revision, relative to the repository root, and the author of the latest
// commit that changed it: the author of the change being approved.
type DefinitionChange struct {
	File   string
	Author Identity
}

// Verdict says whether one committed record counts.
type Verdict struct {
	Record  Record
	Allowed bool
	// Reason explains the verdict for people, naming the record's
	// approver and what decided.
	Reason string
}

// GateCommits decides which committed approval records count, before
// the plan binds them to the recorded state. A record counts when:
//
//   - its definition is known: defs holds the definition of its
//     campaign, by id (Record.Campaign);
//   - the commit that last changed its file was authored or committed by
//     its approver (Identity.Is; see there why that is no authentication);
//   - the policy allows its approver to approve the definition's file
//     (Policy.Allowed);
//   - it is not an approve by the author of the definition's latest
//     change standing alone: "the author of a change cannot approve it
//     alone". Such an approve counts only when another allowed approver,
//     who is not that author, approves the same target and digest in a
//     record that counts.
//
// Verdicts are in the order of records. An error from isMember stops the
// gate: who may approve is then unknown.
func (p *Policy) GateCommits(ctx context.Context, records []CommittedRecord, defs map[string]DefinitionChange, isMember IsMember) ([]Verdict, error) {
	out := make([]Verdict, len(records))
	for i, cr := range records {
		v, err := p.gate(ctx, cr, defs, isMember)
		if err != nil {
			return nil, fmt.Errorf("gate %s: %w", cr.Record.File, err)
		}
		out[i] = v
	}
	for i, cr := range records {
		r := cr.Record
		def := defs[r.Campaign()]
		if !out[i].Allowed || r.Action != Approve || !def.Author.Is(r.By) {
			continue
		}
		second := ""
		for j, o := range records {
			or := o.Record
			if j != i && out[j].Allowed && or.Action == Approve && or.Target == r.Target && or.ResultDigest == r.ResultDigest &&
				!strings.EqualFold(or.By, r.By) && !def.Author.Is(or.By) {
				second = or.By
				break
			}
		}
		if second == "" {
			out[i].Allowed = false
			out[i].Reason = fmt.Sprintf("%s authored %s's definition and cannot approve it alone: another approver must approve the same result", r.By, r.Campaign())
			continue
		}
		out[i].Reason += fmt.Sprintf("; %s authored %s's definition, and %s approves it too", r.By, r.Campaign(), second)
	}
	return out, nil
}

func (p *Policy) gate(ctx context.Context, cr CommittedRecord, defs map[string]DefinitionChange, isMember IsMember) (Verdict, error) {
	r := cr.Record
	v := Verdict{Record: r}
	if r.By == "" {
		v.Reason = fmt.Sprintf("%s names no approver (by)", r.File)
		return v, nil
	}
	def, ok := defs[r.Campaign()]
	if !ok {
		v.Reason = fmt.Sprintf("%s may not approve %s: it has no definition at this revision, so nobody can tell who may approve it", r.By, r.Campaign())
		return v, nil
	}
	c := cr.Commit
	if !c.Author.Is(r.By) && !c.Committer.Is(r.By) {
		v.Reason = fmt.Sprintf("%s was last changed by commit %s, authored by %s and committed by %s, not by %s", r.File, shortSHA(c.Hash), c.Author, c.Committer, r.By)
		return v, nil
	}
	allowed, why, err := p.Allowed(ctx, def.File, r.By, isMember)
	if err != nil {
		return v, err
	}
	v.Allowed = allowed
	verb := "may"
	if !allowed {
		verb = "may not"
	}
	v.Reason = fmt.Sprintf("%s %s approve %s: %s", r.By, verb, def.File, why)
	return v, nil
}
