// Package desired reads the desired state from one revision of a campaigns
// repository: its config (fleetlift.yaml or fleetlift.cue), the Task and
// Campaign definitions under the config's watch path, and the approval
// records under approvals/. The plan command and the reconciler both read
// revisions through it, so that what a pull request's plan shows is what
// the reconciler applies after the merge. SelectForge says which of the
// forges the operator allows a config selects; CheckDrafts says whether
// approval records about to be written read back as written.
//
// desired imports spec, plan and approval; it does no I/O beyond the fs.FS
// it is given.
package desired

import (
	"context"
	"fmt"
	"io/fs"
	"path"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// ConfigNames are the names a campaigns repository's config may have, in
// the order they are looked for.
var ConfigNames = []string{"fleetlift.yaml", "fleetlift.yml", "fleetlift.cue"}

// ApprovalsDir is where approval records live.
const ApprovalsDir = approval.Dir

// Revision is the desired state at one revision.
type Revision struct {
	// SHA is the commit read.
	SHA string
	// Config is the repository config; nil when there is none or it is
	// invalid (its problems are then in Desired.Errors).
	Config *spec.Config
	// ConfigFile is the config's file name, "" when there is none.
	ConfigFile string
	// Dir is the directory the definitions were read from.
	Dir string
	// Desired is what the plan takes. Its Approvals are every record read
	// (valid ones): a caller with the repository's history gates them
	// (see package reconcile's GateApprovals) before planning.
	Desired plan.Desired
	// Approvers says who may approve what: the config's approver rules
	// and, when the config says so, CODEOWNERS. Nil when there is no
	// valid config: then nobody may approve.
	Approvers *approval.Policy
}

// Policy is the plan policy the config sets.
func (r *Revision) Policy() plan.Policy {
	if r.Config == nil {
		return plan.Policy{}
	}
	return plan.Policy{Prune: r.Config.Prune}
}

// Config reads a repository's config when root has one: the config (nil
// when missing or invalid), its file name, and its problems. err is for
// failures to read, not for invalid content.
func Config(ctx context.Context, loader *spec.Loader, root fs.FS) (cfg *spec.Config, name string, problems []*spec.Error, err error) {
	for _, name := range ConfigNames {
		if _, err := fs.Stat(root, name); err != nil {
			continue
		}
		cfg, err := loader.LoadConfig(ctx, root, name)
		if es, ok := err.(spec.Errors); ok {
			return nil, name, es, nil
		}
		return cfg, name, nil, err
	}
	return nil, "", nil, nil
}

// DefinitionsDir is where a repository's definitions are: the config's
// watch.path, campaigns/ when the config is invalid, else the root.
func DefinitionsDir(cfg *spec.Config, problems []*spec.Error) string {
	switch {
	case cfg != nil:
		return path.Clean(cfg.Watch.Path)
	case len(problems) > 0:
		return "campaigns"
	}
	return "."
}

// Read reads the revision sha whose tree is root. sub, when not empty,
// overrides the definitions directory. Config, definitions and approval
// records share one load budget (spec.Limits.RevisionBudget): a file not
// loaded within it is an error in Desired.Errors, so that what it defines
// is unknown to the plan, never removed.
func Read(ctx context.Context, loader *spec.Loader, root fs.FS, sha, sub string) (*Revision, error) {
	loader = loader.Revision()
	rev := &Revision{SHA: sha}
	cfg, name, problems, err := Config(ctx, loader, root)
	if err != nil {
		return nil, err
	}
	rev.Config, rev.ConfigFile = cfg, name
	rev.Desired.Errors = append(rev.Desired.Errors, problems...)
	rev.Dir = DefinitionsDir(cfg, problems)
	if sub != "" {
		rev.Dir = path.Clean(sub)
	}
	if _, err := fs.Stat(root, rev.Dir); err != nil {
		return nil, fmt.Errorf("the campaigns repository has no directory %s at %s", rev.Dir, short(sha))
	}
	res, err := loader.Load(ctx, root, rev.Dir)
	if err != nil {
		return nil, err
	}
	rev.Desired.Definitions = res.Definitions
	rev.Desired.Errors = append(rev.Desired.Errors, res.Errors...)

	recs, err := loader.LoadApprovals(ctx, root, ApprovalsDir)
	if err != nil {
		return nil, err
	}
	rev.Desired.Errors = append(rev.Desired.Errors, recs.Errors...)
	for _, a := range recs.Approvals {
		rev.Desired.Approvals = append(rev.Desired.Approvals, record(a))
	}
	if cfg != nil {
		p, perr := approvers(root, cfg, name)
		if perr != nil {
			rev.Desired.Errors = append(rev.Desired.Errors, perr)
		} else {
			rev.Approvers = p
		}
	}
	return rev, nil
}

// ApproversAt is the approval policy of the campaigns repository whose
// tree is root: its config's approver rules and, when the config says so,
// CODEOWNERS. With no valid config it returns a nil policy and why nobody
// may approve; err is for failures to read.
func ApproversAt(ctx context.Context, loader *spec.Loader, root fs.FS) (p *approval.Policy, why string, err error) {
	cfg, name, problems, err := Config(ctx, loader, root)
	if err != nil {
		return nil, "", err
	}
	if cfg == nil {
		if len(problems) > 0 {
			return nil, fmt.Sprintf("its %s was not valid: %s", name, problems[0].Error()), nil
		}
		return nil, "it had no fleetlift.yaml with approvers", nil
	}
	p, perr := approvers(root, cfg, name)
	if perr != nil {
		return nil, perr.Error(), nil
	}
	return p, "", nil
}

// approvers builds the approval policy the config describes.
func approvers(root fs.FS, cfg *spec.Config, cfgName string) (*approval.Policy, *spec.Error) {
	rules := make([]approval.Rule, len(cfg.Approvers))
	for i, r := range cfg.Approvers {
		rules[i] = approval.Rule(r)
	}
	var owners *approval.CodeOwners
	if cfg.CodeOwners {
		o, err := approval.ReadCodeOwners(root)
		if err != nil {
			return nil, &spec.Error{File: "CODEOWNERS", Msg: err.Error()}
		}
		owners = o
	}
	p, err := approval.NewPolicy(rules, owners)
	if err != nil {
		return nil, &spec.Error{File: cfgName, Field: "approvers", Msg: err.Error()}
	}
	return p, nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
