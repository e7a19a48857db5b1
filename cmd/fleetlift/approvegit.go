package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing/fstest"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/desired"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// envForgeToken holds the forge token --pull-request opens the pull
// request with, unless the operator's --forge-token-env or --forge names
// another variable.
const envForgeToken = DefaultForgeTokenEnv

// approvalBranchPrefix is where --pull-request pushes the records.
const approvalBranchPrefix = "fleetlift/approval-record/"

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
		return errors.New("--push and --pull-request exclude each other: push the branch, or propose it")
	case (g.target == "") != (g.digest == ""):
		return errors.New("--target and --digest go together: the result awaiting approval and its digest")
	case g.target != "" && unit != "":
		return errors.New("--repository picks among the results Temporal reports; with --target, name the target in full")
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
			return fmt.Errorf("--%s applies only with --git CLONE", name)
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
	repo, err := openUserClone(ctx, g.clone)
	if err != nil {
		return err
	}
	records, err := d.records(ctx, f, args, repo)
	if err != nil {
		return err
	}
	changed, err := repo.compare(records, g.force)
	if err != nil {
		return err
	}
	cfg := repo.config(ctx)
	var dest destination
	switch {
	case g.push:
		dest, err = repo.upstream(ctx)
	case g.pullRequest:
		dest, err = repo.proposal(ctx, cfg, &g.forges, records)
	}
	if err != nil {
		return err
	}
	if err := d.checkIdentity(ctx, repo, records[0].By); err != nil {
		return err
	}

	for _, r := range records {
		if err := repo.write(r); err != nil {
			return err
		}
		if changed[r.path] {
			fmt.Fprintf(d.out, "wrote %s: %s %s (%s) by %s\n", r.path, r.Action, r.Target, shortDigest(r.ResultDigest), r.By)
		} else {
			fmt.Fprintf(d.out, "%s already holds this record\n", r.path)
		}
	}
	sha, err := repo.commit(ctx, commitMessage(d.action, records), records)
	if err != nil {
		return err
	}
	where, _ := repo.currentBranch(ctx)
	if where == "" {
		where = "a detached HEAD"
	}
	if sha == "" {
		fmt.Fprintf(d.out, "nothing to commit: %s already has these records\n", where)
	} else {
		fmt.Fprintf(d.out, "committed %s on %s: %s\n", shortSHA(sha), where, commitSubject(d.action, records))
	}
	return d.deliver(ctx, repo, cfg, dest, records, where)
}

// records are the records to write: one per result awaiting approval, by
// --by (else the clone's fleetlift.login or user.name), checked as the
// reconciler will read them.
func (d *gitDecision) records(ctx context.Context, f *temporalFlags, args []string, repo *userClone) ([]record, error) {
	g := d.flags
	by, byFrom := g.by, "--by"
	if by == "" {
		by, byFrom = repo.login(ctx)
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
	records := make([]record, len(pending))
	for i, p := range pending {
		records[i] = newRecord(d.action, p, generation, by, d.prompt, g.comment)
	}
	if err := checkRecords(ctx, records); err != nil {
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
func (d *gitDecision) checkIdentity(ctx context.Context, repo *userClone, by string) error {
	ident, err := repo.identity(ctx)
	if err != nil {
		return err
	}
	if ident.author.Is(by) || ident.committer.Is(by) {
		return nil
	}
	msg := fmt.Sprintf("the reconciler counts a record only when the commit that made it is by its approver, and your Git identity %s is not %s", ident.author, by)
	if !d.flags.pullRequest {
		return fmt.Errorf("%s: set git config user.name (or user.email) in %s, or pass --by with your login", msg, repo.dir)
	}
	d.notef("%s; after the merge, the commit that brings the record onto the watched branch must be by %s", msg, by)
	return nil
}

// deliver pushes the commit, proposes it, or says how to push it.
func (d *gitDecision) deliver(ctx context.Context, repo *userClone, cfg *spec.Config, dest destination, records []record, where string) error {
	watched := "the watched branch"
	if cfg != nil {
		watched = cfg.Watch.Branch
	}
	switch {
	case d.flags.push:
		if err := repo.run(ctx, "push", "--quiet", dest.remote, "HEAD:"+dest.ref); err != nil {
			return fmt.Errorf("push %s to %s: %w (the commit is made: bring in what the remote has, e.g. git pull --rebase, and push again)", where, dest.remote, err)
		}
		fmt.Fprintf(d.out, "pushed to %s %s\n", dest.remote, strings.TrimPrefix(dest.ref, "refs/heads/"))
		if cfg != nil && dest.ref != "refs/heads/"+watched {
			d.notef("the reconciler reads records on %s: they apply once they are there", watched)
		}
	case d.flags.pullRequest:
		pr, err := d.propose(ctx, repo, dest, records)
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "pull request %s (%s into %s): the records apply once it is merged\n", pr.URL, dest.branch, dest.base)
	default:
		fmt.Fprintf(d.out, "the records apply once they are on %s of the campaigns repository: push them (git -C %s push), or run again with --push or --pull-request\n", watched, repo.dir)
	}
	return nil
}

// pendingFromTemporal asks Temporal what the run id awaits approval for,
// and the run's generation.
func (d *gitDecision) pendingFromTemporal(ctx context.Context, f *temporalFlags, arg string, repo *userClone) ([]state.PendingApproval, int64, error) {
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
	case rec.File != "" && !repo.has(rec.File):
		d.notef("%s has no %s, the definition of %s: is it a clone of the campaigns repository the reconciler watches?", repo.dir, rec.File, rec.ID)
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

// record is one approval record and the file it goes to.
type record struct {
	path string
	spec.Approval
	body []byte
}

// recordYAML is the file's layout: the fields in the order the approvals
// README shows them.
type recordYAML struct {
	Version      int    `yaml:"version"`
	Kind         string `yaml:"kind"`
	Target       string `yaml:"target"`
	Action       string `yaml:"action"`
	ResultDigest string `yaml:"result_digest,omitempty"`
	Generation   int64  `yaml:"generation,omitempty"`
	By           string `yaml:"by"`
	Prompt       string `yaml:"prompt,omitempty"`
	Comment      string `yaml:"comment,omitempty"`
}

func newRecord(action string, p state.PendingApproval, generation int64, by, prompt, comment string) record {
	r := record{path: approval.RecordPath(p.Target), Approval: spec.Approval{
		Version: 1, Kind: spec.KindApproval, Target: p.Target, Action: action,
		ResultDigest: p.ResultDigest, Generation: generation, By: by, Prompt: prompt, Comment: comment,
	}}
	r.File = r.path
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	// Encoding a struct of strings cannot fail.
	_ = enc.Encode(recordYAML{Version: r.Version, Kind: string(r.Kind), Target: r.Target, Action: r.Action,
		ResultDigest: r.ResultDigest, Generation: r.Generation, By: r.By, Prompt: r.Prompt, Comment: r.Comment})
	_ = enc.Close()
	r.body = b.Bytes()
	return r
}

// checkRecords loads the records as the reconciler will and makes sure
// each says what it was meant to.
func checkRecords(ctx context.Context, records []record) error {
	fsys := fstest.MapFS{}
	for _, r := range records {
		fsys[r.path] = &fstest.MapFile{Data: r.body, Mode: 0o644}
	}
	res, err := (&spec.Loader{}).LoadApprovals(ctx, fsys, desired.ApprovalsDir)
	if err != nil {
		return fmt.Errorf("check the records: %w", err)
	}
	if err := res.Err(); err != nil {
		return fmt.Errorf("the record would be refused: %w", err)
	}
	for _, r := range records {
		i := slices.IndexFunc(res.Approvals, func(a spec.Approval) bool { return a.File == r.path })
		if i < 0 || res.Approvals[i] != r.Approval {
			return fmt.Errorf("%s does not read back as written", r.path)
		}
	}
	return nil
}

func commitSubject(action string, records []record) string {
	verb := strings.ToUpper(action[:1]) + action[1:]
	if len(records) == 1 {
		return fmt.Sprintf("%s %s (%s)", verb, records[0].Target, shortDigest(records[0].ResultDigest))
	}
	return fmt.Sprintf("%s %d results of %s", verb, len(records), campaignOf(records[0].Target))
}

// commitMessage is the subject and, for several records or a steer, a
// body that lists them.
func commitMessage(action string, records []record) string {
	msg := commitSubject(action, records)
	var body []string
	if len(records) > 1 {
		for _, r := range records {
			body = append(body, fmt.Sprintf("- %s (%s)", r.Target, shortDigest(r.ResultDigest)))
		}
	}
	if action == "steer" && records[0].Prompt != "" {
		body = append(body, "", records[0].Prompt)
	}
	if len(body) > 0 {
		msg += "\n\n" + strings.TrimLeft(strings.Join(body, "\n"), "\n")
	}
	return msg
}

func campaignOf(target string) string {
	id, _, _ := strings.Cut(target, "/")
	return id
}

// proposalBranch is the branch --pull-request pushes:
// fleetlift/approval-record/<target>-<digest>, named after the one target
// or, for several, after their campaign and all their digests.
func proposalBranch(records []record) string {
	stem := func(target string) string {
		return strings.TrimSuffix(path.Base(approval.RecordPath(target)), ".yaml")
	}
	if len(records) == 1 {
		return approvalBranchPrefix + stem(records[0].Target) + "-" + digestHex(records[0].ResultDigest)
	}
	h := sha256.New()
	for _, r := range records {
		fmt.Fprintf(h, "%s %s\n", r.Target, r.ResultDigest)
	}
	return approvalBranchPrefix + stem(campaignOf(records[0].Target)) + "-" + hex.EncodeToString(h.Sum(nil))[:12]
}

func digestHex(d string) string {
	h := strings.TrimPrefix(d, "sha256:")
	return h[:min(12, len(h))]
}

// userClone is the user's clone of the campaigns repository. Git runs
// there as the user runs it: their configuration, identity, hooks,
// signing and credentials. It is their repository, not a sandbox.
type userClone struct {
	dir string
}

func openUserClone(ctx context.Context, dir string) (*userClone, error) {
	top, err := (&userClone{dir: dir}).output(ctx, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("--git %s: not a Git work tree: %w", dir, err)
	}
	return &userClone{dir: strings.TrimSpace(top)}, nil
}

func (u *userClone) output(ctx context.Context, args ...string) (string, error) {
	c := exec.CommandContext(ctx, "git", append([]string{"-C", u.dir}, args...)...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func (u *userClone) run(ctx context.Context, args ...string) error {
	_, err := u.output(ctx, args...)
	return err
}

// configValue is a git config value, "" when unset.
func (u *userClone) configValue(ctx context.Context, key string) string {
	v, err := u.output(ctx, "config", "--get", key)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(v)
}

// login is who decides when --by is not given, and where it came from.
func (u *userClone) login(ctx context.Context) (string, string) {
	if v := u.configValue(ctx, "fleetlift.login"); v != "" {
		return v, "git config fleetlift.login"
	}
	return u.configValue(ctx, "user.name"), "git config user.name"
}

// gitIdentity is who a commit made now would be by.
type gitIdentity struct {
	author, committer approval.Identity
}

func (u *userClone) identity(ctx context.Context) (gitIdentity, error) {
	var id gitIdentity
	for _, v := range []struct {
		name string
		into *approval.Identity
	}{{"GIT_AUTHOR_IDENT", &id.author}, {"GIT_COMMITTER_IDENT", &id.committer}} {
		s, err := u.output(ctx, "var", v.name)
		if err != nil {
			return id, fmt.Errorf("your Git identity: %w", err)
		}
		// "Name <email> 1700000000 +0000"
		name, rest, _ := strings.Cut(s, " <")
		email, _, _ := strings.Cut(rest, ">")
		*v.into = approval.Identity{Name: name, Email: email}
	}
	return id, nil
}

func (u *userClone) currentBranch(ctx context.Context) (string, error) {
	b, err := u.output(ctx, "symbolic-ref", "--quiet", "--short", "HEAD")
	return strings.TrimSpace(b), err
}

// config is the repository config in the work tree, or nil when there is
// none or it is invalid.
func (u *userClone) config(ctx context.Context) *spec.Config {
	pool, err := spec.NewSelfPool()
	if err != nil {
		return nil
	}
	defer pool.Close()
	cfg, _, _, err := desired.Config(ctx, &spec.Loader{Eval: pool}, os.DirFS(u.dir))
	if err != nil {
		return nil
	}
	return cfg
}

// configProblems says why the work tree's config is not usable, as a
// suffix for a message.
func (u *userClone) configProblems(ctx context.Context) string {
	pool, err := spec.NewSelfPool()
	if err != nil {
		return " (`fleetlift validate` says why)"
	}
	defer pool.Close()
	_, _, problems, err := desired.Config(ctx, &spec.Loader{Eval: pool}, os.DirFS(u.dir))
	if err != nil || len(problems) == 0 {
		return " (`fleetlift validate` says why)"
	}
	return ": " + spec.Errors(problems).Error()
}

// compare reports which records change their file; a file holding a
// different record is replaced only with force. An approval of the same
// result by another approver is no different record to replace: the new
// one goes beside it (approval.SecondRecordPath), so both count.
func (u *userClone) compare(records []record, force bool) (map[string]bool, error) {
	changed := map[string]bool{}
	for i := range records {
		r := &records[i]
		old, err := os.ReadFile(filepath.Join(u.dir, filepath.FromSlash(r.path)))
		if err == nil && !bytes.Equal(old, r.body) && !force && approvesSameResult(old, r) {
			r.path = approval.SecondRecordPath(r.Target, r.By)
			r.File = r.path
			old, err = os.ReadFile(filepath.Join(u.dir, filepath.FromSlash(r.path)))
		}
		switch {
		case errors.Is(err, os.ErrNotExist):
			changed[r.path] = true
		case err != nil:
			return nil, err
		case bytes.Equal(old, r.body):
		case force:
			changed[r.path] = true
		default:
			return nil, fmt.Errorf("%s already holds a different record (%s): --force replaces it", r.path, describeRecord(old))
		}
	}
	return changed, nil
}

// approvesSameResult reports whether the record file old approves what r
// approves, as another approver.
func approvesSameResult(old []byte, r *record) bool {
	var o recordYAML
	if yaml.Unmarshal(old, &o) != nil {
		return false
	}
	approve := string(approval.Approve)
	return r.Action == approve && o.Action == approve && o.Target == r.Target &&
		o.ResultDigest == r.ResultDigest && o.By != "" && o.By != r.By
}

// describeRecord says what a record file holds, as far as it can be read.
func describeRecord(b []byte) string {
	var r recordYAML
	if yaml.Unmarshal(b, &r) != nil || r.Action == "" {
		return "not a record fleetlift can read"
	}
	s := r.Action
	if r.By != "" {
		s += " by " + r.By
	}
	if r.ResultDigest != "" {
		s += " of " + shortDigest(r.ResultDigest)
	}
	return s
}

// has reports whether the work tree has the file name (slash-separated).
func (u *userClone) has(name string) bool {
	_, err := os.Stat(filepath.Join(u.dir, filepath.FromSlash(name)))
	return err == nil
}

func (u *userClone) write(r record) error {
	p := filepath.Join(u.dir, filepath.FromSlash(r.path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, r.body, 0o644)
}

// commit commits the records' files, and only them (whatever else is
// staged stays staged), and returns the new commit, or "" when the
// branch already has them.
func (u *userClone) commit(ctx context.Context, message string, records []record) (string, error) {
	paths := []string{"--"}
	for _, r := range records {
		paths = append(paths, r.path)
	}
	if err := u.run(ctx, append([]string{"add"}, paths...)...); err != nil {
		return "", err
	}
	// Exit 1 means the records differ from HEAD's.
	if err := u.run(ctx, append([]string{"diff", "--cached", "--quiet", "HEAD"}, paths...)...); err == nil {
		return "", nil
	}
	if err := u.run(ctx, append([]string{"commit", "--quiet", "--message", message}, paths...)...); err != nil {
		return "", err
	}
	sha, err := u.output(ctx, "rev-parse", "HEAD")
	return strings.TrimSpace(sha), err
}

// destination is where the commit goes: the remote and ref to push to,
// and for a pull request its branches and forge.
type destination struct {
	remote string
	ref    string
	// For --pull-request:
	url    string
	branch string
	base   string
	forge  forge.Forge
}

// upstream is where --push goes: the current branch's upstream.
func (u *userClone) upstream(ctx context.Context) (destination, error) {
	branch, err := u.currentBranch(ctx)
	if err != nil {
		return destination{}, errors.New("--push pushes the current branch, and HEAD is detached: switch to a branch")
	}
	remote := u.configValue(ctx, "branch."+branch+".remote")
	merge := u.configValue(ctx, "branch."+branch+".merge")
	if remote == "" || merge == "" || remote == "." {
		return destination{}, fmt.Errorf("--push: branch %s has no upstream on a remote (git branch --set-upstream-to REMOTE/BRANCH)", branch)
	}
	return destination{remote: remote, ref: merge}, nil
}

// proposal is where --pull-request goes: a branch of its own on the
// current branch's remote (else origin), proposed against the watched
// branch on the forge the config selects among the operator's.
func (u *userClone) proposal(ctx context.Context, cfg *spec.Config, forges *forgeFlags, records []record) (destination, error) {
	if cfg == nil {
		return destination{}, fmt.Errorf("--pull-request needs the forge from the campaigns repository's config, and %s has no valid fleetlift.yaml%s", u.dir, u.configProblems(ctx))
	}
	fs, err := forges.setup(cfg)
	if err != nil {
		return destination{}, fmt.Errorf("--pull-request: %w", err)
	}
	if fs.Hub == nil {
		return destination{}, fmt.Errorf("--pull-request needs a forge with pull requests (forge.type github or gitea), and the config says %s: commit to %s with --push", cfg.Forge.Type, cfg.Watch.Branch)
	}
	remote := "origin"
	if b, err := u.currentBranch(ctx); err == nil {
		if r := u.configValue(ctx, "branch."+b+".remote"); r != "" && r != "." {
			remote = r
		}
	}
	url, err := u.output(ctx, "remote", "get-url", remote)
	if err != nil {
		return destination{}, fmt.Errorf("--pull-request: the campaigns repository's remote: %w", err)
	}
	branch := proposalBranch(records)
	return destination{remote: remote, ref: "refs/heads/" + branch, url: strings.TrimSpace(url),
		branch: branch, base: cfg.Watch.Branch, forge: fs.Hub}, nil
}

// propose pushes HEAD to the proposal branch and opens (or finds) its
// pull request.
func (d *gitDecision) propose(ctx context.Context, u *userClone, dest destination, records []record) (*forge.PullRequest, error) {
	if err := u.run(ctx, "push", "--quiet", dest.remote, "HEAD:"+dest.ref); err != nil {
		return nil, fmt.Errorf("push %s to %s: %w", dest.branch, dest.remote, err)
	}
	var body strings.Builder
	fmt.Fprintf(&body, "Approval records for results awaiting approval, written by `fleetlift %s --git`:\n\n", d.action)
	for _, r := range records {
		fmt.Fprintf(&body, "- `%s`: %s `%s` (`%s`) by @%s\n", r.path, r.Action, r.Target, r.ResultDigest, r.By)
	}
	fmt.Fprintf(&body, "\nMerging this into `%s` hands them to the waiting runs. The reconciler credits a record to the commit that brought it onto `%s`, "+
		"and counts it only when that commit is by the record's approver: %s, merge this yourself (or rebase-merge it).\n", dest.base, dest.base, records[0].By)
	pr, err := dest.forge.CreatePullRequest(ctx, forge.PullRequestRequest{
		Repository: dest.url, Base: dest.base, Head: dest.branch,
		Title: commitSubject(d.action, records), Body: body.String(),
	})
	if err != nil {
		return nil, fmt.Errorf("the branch %s is pushed, but: %w", dest.branch, err)
	}
	return pr, nil
}
