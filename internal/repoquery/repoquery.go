// Package repoquery resolves the repositories_from of Task and Campaign
// definitions against the campaigns repository's forge: it lists each
// owner's repositories once, keeps those every filter of a query
// selects, and adds them to the definition's repositories, so that the
// plan lists them and the run starts with them. A definition whose
// queries cannot be resolved (the forge is unreachable, the owner does
// not exist, nothing matches) is an error of its file: the plan then
// leaves what is recorded for it as it is, never removing anything.
//
// Pinned keeps a run generation's repositories: a definition whose run
// was applied from the same campaigns revision and the same queries
// takes the repositories that run started with, without asking the
// forge, so that a repository created after the run started does not
// join it until the campaigns repository moves.
//
// repoquery imports spec, forge and desired; it does I/O only through
// the forge.Lister it is given.
package repoquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// Match reports whether repository r passes every filter of q. code,
// when q has a code search, holds the names of the repositories the
// search found.
func Match(q spec.RepositoryQuery, r forge.Repository, code map[string]bool) bool {
	switch {
	case r.Archived && !q.Archived, r.Fork && !q.Forks:
		return false
	case q.Language != "" && !strings.EqualFold(q.Language, r.Language):
		return false
	case q.CodeSearch != "" && !code[r.Name]:
		return false
	}
	for _, t := range q.Topics {
		if !slices.ContainsFunc(r.Topics, func(have string) bool { return strings.EqualFold(have, t) }) {
			return false
		}
	}
	if len(q.Names) > 0 && !slices.ContainsFunc(q.Names, func(p string) bool { return matches(p, r.Name) }) {
		return false
	}
	return !slices.ContainsFunc(q.Exclude, func(p string) bool { return matches(p, r.Name) })
}

// matches is path.Match without case (forges treat names so), a
// malformed pattern matching nothing (the schema allows only names and
// wildcards).
func matches(pattern, name string) bool {
	ok, err := path.Match(strings.ToLower(pattern), strings.ToLower(name))
	return err == nil && ok
}

// Resolver resolves definitions' repositories_from through Forge.
type Resolver struct {
	// Forge lists repositories; nil when the campaigns repository's
	// forge is the local forge, which lists none.
	Forge forge.Lister
	// ForgeName names the forge in messages.
	ForgeName string
	// Unavailable, when set, is why no forge can be asked: each
	// definition with queries is an error saying so.
	Unavailable error

	// listings, when set (Once), holds the owners listed by earlier
	// calls, which later ones reuse.
	listings map[string]*owner
}

// Once returns a Resolver like rs that asks the forge about each owner
// and code search once for all of its calls: for one command that
// resolves several revisions (plan --base), which should compare them
// against the forge as it was once, at half the requests.
func (rs *Resolver) Once() *Resolver {
	o := *rs
	o.listings = map[string]*owner{}
	return &o
}

// owner is one owner's listing, made once per Definitions call (or per
// Resolver, with Once), and its code searches.
type owner struct {
	repos []forge.Repository
	org   bool
	err   error
	code  map[string]search
}

type search struct {
	found []string
	err   error
}

// Definitions resolves every definition of defs that has
// repositories_from: pinned (nil for none) is asked first, and a
// definition it does not pin is resolved through the forge. The result
// holds every definition of defs in order, resolved, but for those that
// could not be resolved: each of those is an error of its file instead.
func (rs *Resolver) Definitions(ctx context.Context, defs []spec.Definition, pinned func(spec.Definition) (spec.Definition, bool)) ([]spec.Definition, []*spec.Error) {
	var out []spec.Definition
	var errs []*spec.Error
	owners := rs.listings
	if owners == nil {
		owners = map[string]*owner{}
	}
	for _, d := range defs {
		if !d.Unresolved() {
			out = append(out, d)
			continue
		}
		if pinned != nil {
			if p, ok := pinned(d); ok {
				out = append(out, p)
				continue
			}
		}
		r, err := rs.resolve(ctx, d, owners)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errs
}

// resolve resolves one definition's queries.
func (rs *Resolver) resolve(ctx context.Context, d spec.Definition, owners map[string]*owner) (spec.Definition, *spec.Error) {
	if rs.Unavailable != nil {
		return d, d.FieldError("repositories_from", "repository queries are resolved through the campaigns repository's forge: "+rs.Unavailable.Error())
	}
	if rs.Forge == nil {
		return d, d.FieldError("repositories_from", "repository queries need a forge to list repositories: the campaigns repository's fleetlift.yaml selects the local forge, which has none (set forge.type to github or gitea)")
	}
	explicit := explicitRepositories(d)
	names, urls := map[string]bool{}, map[string]bool{}
	for _, r := range explicit {
		names[strings.ToLower(r.Name)], urls[r.URL] = true, true
	}
	var added []spec.Repository
	for i, q := range d.Queries() {
		field := fmt.Sprintf("repositories_from[%d]", i)
		o := owners[strings.ToLower(q.Owner)]
		if o == nil {
			o = &owner{code: map[string]search{}}
			o.repos, o.org, o.err = rs.Forge.ListRepositories(ctx, q.Owner)
			owners[strings.ToLower(q.Owner)] = o
		}
		if o.err != nil {
			return d, d.FieldError(field, fmt.Sprintf("list the repositories of %s: %v", q.Owner, o.err))
		}
		var code map[string]bool
		if q.CodeSearch != "" {
			sr, ok := o.code[q.CodeSearch]
			if !ok {
				sr.found, sr.err = rs.Forge.SearchCode(ctx, q.Owner, o.org, q.CodeSearch)
				o.code[q.CodeSearch] = sr
			}
			found, err := sr.found, sr.err
			if errors.Is(err, forge.ErrNoCodeSearch) {
				return d, d.FieldError(field+".code_search", fmt.Sprintf("%s has no code search: code_search needs a github forge", rs.name()))
			}
			if err != nil {
				return d, d.FieldError(field+".code_search", err.Error())
			}
			code = map[string]bool{}
			for _, n := range found {
				code[n] = true
			}
		}
		var hits []forge.Repository
		for _, r := range o.repos {
			if Match(q, r, code) {
				hits = append(hits, r)
			}
		}
		slices.SortFunc(hits, func(a, b forge.Repository) int {
			return strings.Compare(strings.ToLower(a.Owner+"/"+a.Name), strings.ToLower(b.Owner+"/"+b.Name))
		})
		for _, r := range hits {
			if urls[r.CloneURL] {
				continue // listed, or selected by an earlier query
			}
			name := r.Name
			if names[strings.ToLower(name)] {
				// Another owner's repository, or one listed by hand,
				// has the name: this one is told apart by its owner.
				name = r.Owner + "-" + r.Name
			}
			if names[strings.ToLower(name)] {
				return d, d.FieldError(field, fmt.Sprintf("selects %s/%s, whose name %s is taken by another repository of the definition", r.Owner, r.Name, name))
			}
			names[strings.ToLower(name)], urls[r.CloneURL] = true, true
			added = append(added, spec.Repository{URL: r.CloneURL, Name: name, Setup: q.Setup, Submodules: q.Submodules})
		}
	}
	if len(explicit) == 0 && len(added) == 0 {
		var owners []string
		for _, q := range d.Queries() {
			owners = append(owners, q.Owner)
		}
		return d, d.FieldError("repositories_from", fmt.Sprintf("selects no repository of %s on %s, and the definition lists none", strings.Join(owners, ", "), rs.name()))
	}
	r, err := d.Resolve(added)
	if err != nil {
		return d, d.FieldError("repositories_from", err.Error())
	}
	return r, nil
}

func (rs *Resolver) name() string {
	if rs.ForgeName == "" {
		return "the forge"
	}
	return rs.ForgeName
}

// explicitRepositories are the repositories d lists by hand.
func explicitRepositories(d spec.Definition) []spec.Repository {
	if d.Task != nil {
		return d.Task.Repositories
	}
	return d.Campaign.Repositories
}

// Revision is rev with its definitions resolved (Definitions): rev
// itself is left as it was; a definition that could not be resolved is
// an error in the copy's Desired.Errors.
func (rs *Resolver) Revision(ctx context.Context, rev *desired.Revision, pinned func(spec.Definition) (spec.Definition, bool)) *desired.Revision {
	if !slices.ContainsFunc(rev.Desired.Definitions, spec.Definition.Unresolved) {
		return rev
	}
	defs, errs := rs.Definitions(ctx, rev.Desired.Definitions, pinned)
	out := *rev
	out.Desired.Definitions = defs
	out.Desired.Errors = append(slices.Clip(rev.Desired.Errors), errs...)
	return &out
}

// Pinned pins a definition to the repositories its recorded run started
// with when that run was applied from revision (the campaigns commit
// being planned) with the same queries: recorded is the recorded state.
// The recorded spec must be, repository for repository, the definition
// with those repositories added (its digest says so), or nothing is
// pinned.
func Pinned(recorded []state.Campaign, revision string) func(spec.Definition) (spec.Definition, bool) {
	byID := map[string]state.Campaign{}
	for _, c := range recorded {
		byID[c.ID] = c
	}
	return func(d spec.Definition) (spec.Definition, bool) {
		c, ok := byID[d.ID]
		if !ok || revision == "" || c.SourceRevision != revision || len(c.Spec) == 0 {
			return d, false
		}
		var was struct {
			Repositories []spec.Repository `json:"repositories"`
		}
		if json.Unmarshal(c.Spec, &was) != nil {
			return d, false
		}
		n := len(explicitRepositories(d))
		if len(was.Repositories) < n {
			return d, false
		}
		p, err := d.Resolve(was.Repositories[n:])
		if err != nil || p.Digest != c.SpecDigest {
			return d, false
		}
		return p, true
	}
}
