package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/approval/userrepo"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// envForgeToken holds the forge token --pull-request opens the pull
// request with, unless the operator's --forge-token-env or --forge names
// another variable.
const envForgeToken = DefaultForgeTokenEnv

// gitFlags are approve's, reject's and steer's Git mode: write approval
// records into a clone of the campaigns repository and commit them.
type gitFlags struct {
	clone       string
	by          string
	comment     string
	target      string
	digest      string
	force       bool
	push        bool
	pullRequest bool
	// forges are the forges --pull-request may use.
	forges forgeFlags
}

// gitOnlyFlags are the flags that mean something only with --git.
var gitOnlyFlags = []string{"by", "comment", "target", "force", "push", "pull-request", "forge", "forge-type", "forge-url", "forge-token-env"}

func (g *gitFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&g.clone, "git", "", "a local clone of the campaigns repository: commit approval records there instead of signalling the run")
	fl.StringVar(&g.by, "by", "", "your forge login, as the record's by (default: git config fleetlift.login, else user.name)")
	fl.StringVar(&g.comment, "comment", "", "a comment for people, kept in the record")
	fl.StringVar(&g.target, "target", "", "offline: the target awaiting approval (campaign/repository or task id); needs --digest")
	fl.StringVar(&g.digest, "digest", "", "the digest of the result decided on (sha256:...), as fleetlift status ID shows it: a unique prefix of 12 or more hex digits will do, several comma-separated; with --git, only offline, with --target")
	fl.BoolVar(&g.force, "force", false, "replace a different record already at the record's path")
	fl.BoolVar(&g.push, "push", false, "push the current branch to its upstream after committing")
	fl.BoolVar(&g.pullRequest, "pull-request", false, "push the commit to a branch of its own and open a pull request against the watched branch (forge github or gitea)")
	g.forges.register(cmd)
}

// check refuses flag combinations that cannot work, before anything is
// read or written.
func (g *gitFlags) check(args []string, unit string) error {
	switch {
	case g.push && g.pullRequest:
		return usageErrorf("--push and --pull-request exclude each other: push the branch, or propose it")
	case (g.target == "") != (g.digest == ""):
		return usageErrorf("--target and --digest go together: the result awaiting approval and its digest")
	case g.target != "" && unit != "":
		return usageErrorf("--repository picks among the results Temporal reports; with --target, name the target in full")
	case g.target == "" && len(args) == 0:
		return errors.New("name the run: ID, or --target and --digest to decide offline")
	case g.target != "" && len(args) == 1:
		id := runDefinitionID(args[0])
		if g.target != id && !strings.HasPrefix(g.target, id+"/") {
			return fmt.Errorf("--target %s is not part of %s", g.target, args[0])
		}
	}
	return nil
}

// onlyWithGit refuses Git mode's flags without --git.
func onlyWithGit(cmd *cobra.Command) error {
	for _, name := range gitOnlyFlags {
		if cmd.Flags().Changed(name) {
			return usageErrorf("--%s applies only with --git CLONE", name)
		}
	}
	return nil
}

// runDefinitionID is the definition id of a run id given as task/<id>,
// campaign/<id> or <id>.
func runDefinitionID(arg string) string {
	if id, ok := strings.CutPrefix(arg, "campaign/"); ok {
		return id
	}
	return strings.TrimPrefix(arg, "task/")
}

// gitDecision is one run of approve, reject or steer in Git mode.
type gitDecision struct {
	action string // approve, reject or steer
	prompt string
	unit   string
	flags  *gitFlags
	out    io.Writer
}

func (d *gitDecision) notef(format string, args ...any) {
	fmt.Fprintf(d.out, "note: "+format+"\n", args...)
}

// run writes, checks and commits the records, then pushes or proposes
// them. Everything that can be checked is checked before the first file
// is written.
func (d *gitDecision) run(ctx context.Context, f *temporalFlags, args []string) error {
	g := d.flags
	if err := g.check(args, d.unit); err != nil {
		return err
	}
	repo, err := userrepo.Open(ctx, g.clone)
	if err != nil {
		return fmt.Errorf("--git %s: not a Git work tree: %w", g.clone, err)
	}
	records, err := d.records(ctx, f, args, repo)
	if err != nil {
		return err
	}
	changed, err := approval.Place(records, repo.ReadFile, g.force)
	if _, taken := errors.AsType[*approval.TakenError](err); taken {
		return fmt.Errorf("%w: --force replaces it", err)
	}
	if err != nil {
		return err
	}
	cfg, why := cloneConfig(ctx, repo)
	var dest destination
	switch {
	case g.push:
		dest, err = upstream(ctx, repo)
	case g.pullRequest:
		dest, err = proposal(ctx, repo, cfg, why, &g.forges, records)
	}
	if err != nil {
		return err
	}
	if err := d.checkIdentity(ctx, repo, records[0].By); err != nil {
		return err
	}

	files := make([]string, len(records))
	for i, r := range records {
		files[i] = r.File
		if err := repo.WriteFile(r.File, r.Encode()); err != nil {
			return err
		}
		if changed[r.File] {
			fmt.Fprintf(d.out, "wrote %s: %s %s (%s) by %s\n", r.File, r.Action, r.Target, approval.ShortDigest(r.ResultDigest), r.By)
		} else {
			fmt.Fprintf(d.out, "%s already holds this record\n", r.File)
		}
	}
	sha, err := repo.Commit(ctx, approval.CommitMessage(records), files)
	if err != nil {
		return err
	}
	where, _ := repo.CurrentBranch(ctx)
	if where == "" {
		where = "a detached HEAD"
	}
	if sha == "" {
		fmt.Fprintf(d.out, "nothing to commit: %s already has these records\n", where)
	} else {
		fmt.Fprintf(d.out, "committed %s on %s: %s\n", shortSHA(sha), where, approval.CommitSubject(records))
	}
	return d.deliver(ctx, repo, cfg, dest, records, where)
}

// records are the records to write: one per result awaiting approval, by
// --by (else the clone's fleetlift.login or user.name), checked as the
// reconciler will read them.
func (d *gitDecision) records(ctx context.Context, f *temporalFlags, args []string, repo *userrepo.Clone) ([]approval.Draft, error) {
	g := d.flags
	by, byFrom := g.by, "--by"
	if by == "" {
		by, byFrom = repo.Login(ctx)
		if by == "" {
			return nil, errors.New("who decides? pass --by LOGIN (your forge login), or set it once with `git config fleetlift.login LOGIN`")
		}
	}
	pending := []state.PendingApproval{{Target: g.target, ResultDigest: g.digest}}
	// Offline, the record is bound by its digest alone; from Temporal it
	// names the run's generation too.
	var generation int64
	if g.target == "" {
		var err error
		if pending, generation, err = d.pendingFromTemporal(ctx, f, args[0], repo); err != nil {
			return nil, err
		}
	}
	records := make([]approval.Draft, len(pending))
	for i, p := range pending {
		records[i] = approval.NewDraft(approval.Record{Target: p.Target, ResultDigest: p.ResultDigest, Generation: generation,
			By: by, Action: approval.Action(d.action), Prompt: d.prompt}, g.comment)
	}
	if err := desired.CheckDrafts(ctx, &spec.Loader{}, records); err != nil {
		if byFrom != "--by" {
			err = fmt.Errorf("%w\n(by %q came from %s: pass --by with your forge login)", err, by, byFrom)
		}
		return nil, err
	}
	return records, nil
}

// checkIdentity refuses to commit a record the reconciler would not
// count because the commit is not by its approver. A pull request's
// merge makes the commit that counts, so there it only warns.
func (d *gitDecision) checkIdentity(ctx context.Context, repo *userrepo.Clone, by string) error {
	ident, err := repo.Identity(ctx)
	if err != nil {
		return err
	}
	if ident.Author.Is(by) || ident.Committer.Is(by) {
		return nil
	}
	msg := fmt.Sprintf("the reconciler counts a record only when the commit that made it is by its approver, and your Git identity %s is not %s", ident.Author, by)
	if !d.flags.pullRequest {
		return fmt.Errorf("%s: set git config user.name (or user.email) in %s, or pass --by with your login", msg, repo.Dir())
	}
	d.notef("%s; after the merge, the commit that brings the record onto the watched branch must be by %s", msg, by)
	return nil
}

// pendingFromTemporal asks Temporal what the run id awaits approval for,
// and the run's generation.
func (d *gitDecision) pendingFromTemporal(ctx context.Context, f *temporalFlags, arg string, repo *userrepo.Clone) ([]state.PendingApproval, int64, error) {
	c, err := f.dial(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("%w; or decide offline with --target and --digest", err)
	}
	defer c.Close()
	rec, err := (&statetemporal.Reader{Client: c, Namespace: f.namespace}).Get(ctx, runDefinitionID(arg))
	if errors.Is(err, state.ErrNotFound) {
		return nil, 0, fmt.Errorf("no run %s in Temporal at %s (namespace %s)", arg, f.address, f.namespace)
	}
	if err != nil {
		return nil, 0, err
	}
	pending, err := selectPending(rec, d.unit)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case rec.SourceRevision == "":
		d.notef("%s was not started from a campaigns repository: records reach it only through a reconciler (without --git, %s signals it directly)", rec.WorkflowID, d.action)
	case rec.File != "" && !repo.Has(rec.File):
		d.notef("%s has no %s, the definition of %s: is it a clone of the campaigns repository the reconciler watches?", repo.Dir(), rec.File, rec.ID)
	}
	return pending, rec.Generation, nil
}

// selectPending is what rec awaits approval for: everything, or unit's
// result alone.
func selectPending(rec state.Campaign, unit string) ([]state.PendingApproval, error) {
	var out, others []state.PendingApproval
	for _, p := range rec.PendingApprovals {
		if unit == "" || p.Target == rec.ID+"/"+unit {
			out = append(out, p)
		} else {
			others = append(others, p)
		}
	}
	switch {
	case len(out) > 0:
		return out, nil
	case len(others) > 0:
		var names []string
		for _, p := range others {
			names = append(names, p.Target)
		}
		return nil, fmt.Errorf("%s/%s does not await approval; %s do", rec.ID, unit, strings.Join(names, ", "))
	case rec.Phase == state.PhaseRunning:
		return nil, fmt.Errorf("%s has nothing awaiting approval yet: it is running (is a worker running to answer? `fleetlift status %s` shows it)", rec.ID, rec.ID)
	}
	return nil, fmt.Errorf("%s has nothing awaiting approval: it is %s", rec.ID, rec.Phase)
}
