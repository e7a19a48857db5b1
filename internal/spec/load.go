package spec

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetlift/fleetlift/internal/notify"
)

// Limits bound what loading may cost. Zero fields take the defaults.
type Limits struct {
	// MaxFileBytes is the largest definition file read (default 1 MiB).
	MaxFileBytes int64
	// MaxFiles is the most definition files loaded from one root
	// (default 10,000).
	MaxFiles int
	// EvalTimeout bounds the evaluation of one file (default 10s).
	EvalTimeout time.Duration
	// RevisionBudget bounds the wall time of loading one revision: the
	// LoadConfig, Load, LoadFiles and LoadApprovals calls of a loader
	// from Revision together, or any one call of another loader
	// (default 2m). A file not yet read or evaluated when the budget is
	// spent is an error that names the file and the budget; what loaded
	// before is kept.
	RevisionBudget time.Duration
}

// DefaultLimits are the limits used when a Loader sets none.
var DefaultLimits = Limits{MaxFileBytes: 1 << 20, MaxFiles: 10_000, EvalTimeout: 10 * time.Second, RevisionBudget: 2 * time.Minute}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultLimits.MaxFileBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultLimits.MaxFiles
	}
	if l.EvalTimeout <= 0 {
		l.EvalTimeout = DefaultLimits.EvalTimeout
	}
	if l.RevisionBudget <= 0 {
		l.RevisionBudget = DefaultLimits.RevisionBudget
	}
	return l
}

// Evaluator evaluates definition files against the schema. Outputs are in
// the order of the inputs. An Evaluator enforces the Bounds it is given;
// implementations differ in what else they can bound (see Pool).
type Evaluator interface {
	Evaluate(ctx context.Context, b Bounds, in []Input) ([]Output, error)
}

// Bounds are the time an evaluation may take.
type Bounds struct {
	// Timeout bounds the evaluation of one file.
	Timeout time.Duration
	// Until, unless zero, is when the load budget (Budget long) is
	// spent: no file starts evaluating after it, one still evaluating is
	// stopped, and each has an error that names the budget.
	Until  time.Time
	Budget time.Duration
}

// spent reports whether the budget is spent.
func (b Bounds) spent() bool {
	return !b.Until.IsZero() && !time.Now().Before(b.Until)
}

// budgetError says that file name was not loaded, or (stopped) that its
// evaluation was stopped, because the load budget was spent.
func (b Bounds) budgetError(name string, stopped bool) *Error {
	what := "not loaded"
	if stopped {
		what = "evaluation stopped"
	}
	return &Error{File: name, Line: 1, Column: 1,
		Msg: fmt.Sprintf("%s: loading this revision used up its budget of %s", what, b.Budget)}
}

// run evaluates in with eval within b: for the file's timeout, cut short
// by the budget.
func (b Bounds) run(in Input, eval evalFunc) Output {
	timeout, cut := b.Timeout, false
	if !b.Until.IsZero() {
		left := time.Until(b.Until)
		if left <= 0 {
			return Output{Name: in.Name, Errors: []*Error{b.budgetError(in.Name, false)}}
		}
		if left < timeout {
			timeout, cut = left, true
		}
	}
	out, stopped := eval(in, timeout)
	switch {
	case stopped && cut:
		return Output{Name: in.Name, Errors: []*Error{b.budgetError(in.Name, true)}}
	case stopped:
		return timeoutOutput(in.Name, timeout)
	}
	return out
}

// evalFunc evaluates one file, stopping after timeout; stopped reports
// that it did.
type evalFunc func(in Input, timeout time.Duration) (out Output, stopped bool)

// Definition is a Task or Campaign loaded from one file.
type Definition struct {
	Kind Kind
	ID   string
	// File is the path of the file relative to the load root.
	File string
	// Digest identifies the definition's meaning: the same for the same
	// normalised spec whatever its format, key order or comments.
	Digest   string
	Task     *Task
	Campaign *Campaign

	idLine, idColumn int
	// positions locate repositories_from and its queries (FieldError).
	positions map[string][2]int
	// resolved is set by Resolve.
	resolved bool
}

// Queries are the definition's repositories_from: nil when it has none.
func (d Definition) Queries() []RepositoryQuery {
	switch {
	case d.Task != nil:
		return d.Task.RepositoriesFrom
	case d.Campaign != nil:
		return d.Campaign.RepositoriesFrom
	}
	return nil
}

// Unresolved reports whether d has repositories_from that Resolve has
// not resolved: such a definition is planned, never run.
func (d Definition) Unresolved() bool { return len(d.Queries()) > 0 && !d.resolved }

// Resolve returns d with repos, what its repositories_from selected,
// after the repositories it lists, and the digest of the result: the
// digest of what runs, so that a repository that starts or stops
// matching changes it. d itself is left as it was.
func (d Definition) Resolve(repos []Repository) (Definition, error) {
	var err error
	switch {
	case d.Task != nil:
		t := *d.Task
		t.Repositories = append(slices.Clip(t.Repositories), repos...)
		d.Task = &t
		d.Digest, err = Digest(d.Task)
	case d.Campaign != nil:
		c := *d.Campaign
		c.Repositories = append(slices.Clip(c.Repositories), repos...)
		d.Campaign = &c
		d.Digest, err = Digest(d.Campaign)
	}
	d.resolved = true
	return d, err
}

// FieldError is a problem with field of the definition ("id",
// "repositories_from[1]") found after loading, located in its file where
// the loader saw the field, or at its id.
func (d Definition) FieldError(field, msg string) *Error {
	e := &Error{File: d.File, Line: d.idLine, Column: d.idColumn, Field: field, Msg: msg}
	if p, ok := d.positions[field]; ok {
		e.Line, e.Column = p[0], p[1]
	}
	return e
}

// Result is what Load found: every valid definition, sorted by ID, and
// every error in every file. A broken file never hides the valid ones.
type Result struct {
	Definitions []Definition
	Errors      Errors
	// Files counts the definition files read.
	Files int
}

// Err returns the errors as one error, or nil when there are none.
func (r *Result) Err() error {
	if len(r.Errors) == 0 {
		return nil
	}
	return r.Errors
}

// Loader reads definitions from a file system.
type Loader struct {
	Limits Limits
	// Eval evaluates CUE files, which are programs and may not terminate:
	// use a Pool for anything read from a repository. nil evaluates them
	// in this process (see InProcess). YAML files are always evaluated in
	// this process.
	Eval Evaluator
	// Cache, when set, remembers evaluations by file name and content
	// across calls (and across the loaders that share it): a loader kept
	// for revision after revision evaluates only the files that changed.
	Cache *Cache

	// until is when the budget of a loader from Revision is spent; zero
	// gives each call a budget of its own.
	until time.Time
}

// Revision returns a copy of l for loading one revision of a campaigns
// repository: its calls share one Limits.RevisionBudget, which starts
// now.
func (l *Loader) Revision() *Loader {
	c := *l
	c.until = time.Now().Add(l.Limits.withDefaults().RevisionBudget)
	return &c
}

// bounds are the Bounds of a call that starts now.
func (l *Loader) bounds() Bounds {
	lim := l.Limits.withDefaults()
	b := Bounds{Timeout: lim.EvalTimeout, Until: l.until, Budget: lim.RevisionBudget}
	if b.Until.IsZero() {
		b.Until = time.Now().Add(lim.RevisionBudget)
	}
	return b
}

// Load reads every .cue, .yaml and .yml file under dir in fsys (dir "."
// is the root) as a Task or Campaign. Files and directories whose names
// start with "." are skipped. The returned error is for problems that stop
// loading as a whole (dir cannot be read, ctx cancelled); problems with
// files are in Result.Errors.
func (l *Loader) Load(ctx context.Context, fsys fs.FS, dir string) (*Result, error) {
	lim := l.Limits.withDefaults()
	names, errs, err := collect(fsys, dir, lim)
	if err != nil {
		return nil, err
	}
	return l.load(ctx, fsys, names, errs)
}

// LoadFiles reads the named definition files of fsys, with the same
// checks as Load (symlinks, size, duplicate ids among them).
func (l *Loader) LoadFiles(ctx context.Context, fsys fs.FS, names ...string) (*Result, error) {
	var errs []*Error
	var ok []string
	for _, n := range names {
		if e := checkPath(fsys, n); e != nil {
			errs = append(errs, e)
			continue
		}
		if !isDefinitionFile(n) {
			errs = append(errs, &Error{File: n, Line: 1, Column: 1, Msg: "not a definition file: the extension must be .cue, .yaml or .yml"})
			continue
		}
		ok = append(ok, n)
	}
	return l.load(ctx, fsys, ok, errs)
}

func (l *Loader) load(ctx context.Context, fsys fs.FS, names []string, errs []*Error) (*Result, error) {
	lim := l.Limits.withDefaults()
	b := l.bounds()
	res := &Result{}
	res.Errors = append(res.Errors, errs...)
	inputs := make([]Input, 0, len(names))
	for _, name := range names {
		if b.spent() {
			res.Errors = append(res.Errors, b.budgetError(name, false))
			continue
		}
		data, e := readLimited(fsys, name, lim.MaxFileBytes)
		if e != nil {
			res.Errors = append(res.Errors, e)
			continue
		}
		inputs = append(inputs, Input{Name: name, Data: data})
	}
	res.Files = len(inputs)
	outs, keys, err := l.evaluate(ctx, b, inputs)
	if err != nil {
		return nil, err
	}
	decoded, decodeErrs := l.decodeAll(keys, outs)
	byID := map[string][]Definition{}
	for i, o := range outs {
		if len(o.Errors) > 0 {
			res.Errors = append(res.Errors, o.Errors...)
			continue
		}
		if e := decodeErrs[i]; e != nil {
			res.Errors = append(res.Errors, e)
			continue
		}
		byID[decoded[i].ID] = append(byID[decoded[i].ID], decoded[i])
	}
	for id, defs := range byID {
		if len(defs) == 1 {
			res.Definitions = append(res.Definitions, defs[0])
			continue
		}
		// A duplicate id is an error in every file that uses it: none of
		// them can be trusted to be the one meant.
		for _, d := range defs {
			var others []string
			for _, o := range defs {
				if o.File != d.File {
					others = append(others, o.File)
				}
			}
			res.Errors = append(res.Errors, &Error{File: d.File, Line: d.idLine, Column: d.idColumn, Field: "id",
				Msg: fmt.Sprintf("duplicate id %q: also defined in %s", id, strings.Join(others, ", "))})
		}
	}
	slices.SortFunc(res.Definitions, func(a, b Definition) int { return strings.Compare(a.ID, b.ID) })
	sortErrors(res.Errors)
	return res, nil
}

// LoadConfig reads a repository Config from the named file in fsys.
func (l *Loader) LoadConfig(ctx context.Context, fsys fs.FS, name string) (*Config, error) {
	lim := l.Limits.withDefaults()
	if e := checkPath(fsys, name); e != nil {
		return nil, Errors{e}
	}
	data, e := readLimited(fsys, name, lim.MaxFileBytes)
	if e != nil {
		return nil, Errors{e}
	}
	outs, _, err := l.evaluate(ctx, l.bounds(), []Input{{Name: name, Data: data, Config: true}})
	if err != nil {
		return nil, err
	}
	if len(outs[0].Errors) > 0 {
		return nil, Errors(outs[0].Errors)
	}
	var c Config
	if err := strictDecode(outs[0].JSON, &c); err != nil {
		return nil, Errors{{File: name, Msg: "decode: " + err.Error()}}
	}
	// watch.require_reviewed_merge, unset, is on with a forge that has
	// reviewed pull requests.
	var set struct {
		Watch struct {
			RequireReviewedMerge *bool `json:"require_reviewed_merge"`
		} `json:"watch"`
	}
	if err := json.Unmarshal(outs[0].JSON, &set); err == nil && set.Watch.RequireReviewedMerge == nil {
		c.Watch.RequireReviewedMerge = c.Forge.Type != ForgeLocal
	}
	c.File, c.positions = name, outs[0].Positions
	if errs := c.checkNotifications(); len(errs) > 0 {
		return nil, errs
	}
	return &c, nil
}

// checkNotifications finds what the schema cannot: templates that do not
// parse as package notify executes them, subscriptions that name a
// template the config does not have, and campaign globs path.Match
// refuses.
func (c *Config) checkNotifications() Errors {
	n := c.Notifications
	if n == nil {
		return nil
	}
	var errs Errors
	for _, name := range slices.Sorted(maps.Keys(n.Templates)) {
		if _, err := notify.ParseTemplate(name, n.Templates[name]); err != nil {
			errs = append(errs, c.FieldError("notifications.templates."+name, err.Error()))
		}
	}
	for i, s := range n.Subscriptions {
		at := fmt.Sprintf("notifications.subscriptions[%d]", i)
		if _, ok := n.Templates[s.Template]; s.Template != "" && !ok {
			errs = append(errs, c.FieldError(at+".template", fmt.Sprintf("no template %q in notifications.templates", s.Template)))
		}
		for _, g := range s.Campaigns {
			if _, err := path.Match(g, ""); err != nil {
				errs = append(errs, c.FieldError(at+".campaigns", fmt.Sprintf("%q is not a glob (path.Match: *, ?, [a-z])", g)))
			}
		}
	}
	return errs
}

// evaluate evaluates in within b, taking what l.Cache remembers from it
// and remembering what it evaluated.
func (l *Loader) evaluate(ctx context.Context, b Bounds, in []Input) ([]Output, []cacheKey, error) {
	if l.Cache == nil {
		outs, err := l.evaluateAll(ctx, b, in)
		return outs, nil, err
	}
	outs := make([]Output, len(in))
	keys := make([]cacheKey, len(in))
	var miss []int
	for i, f := range in {
		keys[i] = keyOf(f)
		o, ok := l.Cache.get(keys[i])
		if !ok {
			miss = append(miss, i)
			continue
		}
		outs[i] = o
	}
	if len(miss) == 0 {
		return outs, keys, nil
	}
	todo := make([]Input, len(miss))
	for j, i := range miss {
		todo[j] = in[i]
	}
	evaluated, err := l.evaluateAll(ctx, b, todo)
	if err != nil {
		return nil, nil, err
	}
	for j, i := range miss {
		outs[i] = evaluated[j]
		l.Cache.put(keys[i], evaluated[j])
	}
	return outs, keys, nil
}

// decodeAll decodes the outputs that have no errors, on one goroutine
// per CPU: decoding 1,000 campaigns of 50 repositories takes 110 ms of
// CPU, all of it after the last file is evaluated.
func (l *Loader) decodeAll(keys []cacheKey, outs []Output) ([]Definition, []*Error) {
	defs := make([]Definition, len(outs))
	errs := make([]*Error, len(outs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(outs)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(outs); i = int(next.Add(1)) - 1 {
				if len(outs[i].Errors) == 0 {
					defs[i], errs[i] = l.decode(keys, i, outs[i])
				}
			}
		})
	}
	wg.Wait()
	return defs, errs
}

// decode is the definition of outs[i], the evaluation of the file whose
// cache key is keys[i] (none without a cache): decoded once while the
// cache remembers the evaluation.
func (l *Loader) decode(keys []cacheKey, i int, o Output) (Definition, *Error) {
	if keys == nil {
		return decodeDefinition(o)
	}
	if d, ok := l.Cache.definition(keys[i]); ok {
		return d, nil
	}
	d, e := decodeDefinition(o)
	if e == nil {
		l.Cache.keepDefinition(keys[i], d)
	}
	return d, e
}

// evaluateAll sends CUE files, which are programs, to l.Eval, and
// evaluates YAML files, which are data bounded by the size limit and by
// the YAML decoder's cap on alias expansion, in this process: isolation
// costs twice the time and buys nothing for data.
func (l *Loader) evaluateAll(ctx context.Context, b Bounds, in []Input) ([]Output, error) {
	var code, data []int
	for i, f := range in {
		if path.Ext(f.Name) == ".cue" {
			code = append(code, i)
		} else {
			data = append(data, i)
		}
	}
	pick := func(idx []int) []Input {
		out := make([]Input, len(idx))
		for j, i := range idx {
			out[j] = in[i]
		}
		return out
	}
	codeEval := l.Eval
	if codeEval == nil {
		codeEval = InProcess(0)
	}
	var codeOuts []Output
	var codeErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		if len(code) > 0 {
			codeOuts, codeErr = codeEval.Evaluate(ctx, b, pick(code))
		}
	}()
	dataOuts, err := InProcess(0).Evaluate(ctx, b, pick(data))
	<-done
	if err != nil {
		return nil, err
	}
	if codeErr != nil {
		return nil, codeErr
	}
	outs := make([]Output, len(in))
	for j, i := range code {
		outs[i] = codeOuts[j]
	}
	for j, i := range data {
		outs[i] = dataOuts[j]
	}
	return outs, nil
}

func isDefinitionFile(name string) bool {
	switch path.Ext(name) {
	case ".cue", ".yaml", ".yml":
		return true
	}
	return false
}

// collect lists the definition files under dir, refusing symlinks that
// leave the root and stopping at lim.MaxFiles.
func collect(fsys fs.FS, dir string, lim Limits) ([]string, []*Error, error) {
	var names []string
	var errs []*Error
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			errs = append(errs, &Error{File: p, Line: 1, Column: 1, Msg: "cannot read: " + err.Error()})
			return nil
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isDefinitionFile(p) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			if e := checkPath(fsys, p); e != nil {
				errs = append(errs, e)
				return nil
			}
		} else if !d.Type().IsRegular() {
			errs = append(errs, &Error{File: p, Line: 1, Column: 1, Msg: "not a regular file"})
			return nil
		}
		if len(names) == lim.MaxFiles {
			errs = append(errs, &Error{File: p, Line: 1, Column: 1, Msg: fmt.Sprintf("too many definition files: the limit is %d; this and later files were not read", lim.MaxFiles)})
			return fs.SkipAll
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read definitions in %s: %w", dir, err)
	}
	return names, errs, nil
}

// checkPath refuses a file reached through a symlink whose target leaves
// the root of fsys, or that is not a regular file.
func checkPath(fsys fs.FS, name string) *Error {
	rl, ok := fsys.(fs.ReadLinkFS)
	if !ok {
		return nil
	}
	cur := name
	for range 40 {
		fi, err := rl.Lstat(cur)
		if err != nil {
			return &Error{File: name, Line: 1, Column: 1, Msg: "cannot read: " + err.Error()}
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if !fi.Mode().IsRegular() {
				return &Error{File: name, Line: 1, Column: 1, Msg: "not a regular file"}
			}
			return nil
		}
		target, err := rl.ReadLink(cur)
		if err != nil {
			return &Error{File: name, Line: 1, Column: 1, Msg: "cannot read symlink: " + err.Error()}
		}
		if path.IsAbs(target) {
			return &Error{File: name, Line: 1, Column: 1, Msg: fmt.Sprintf("symlink to %s leaves the definitions root; refused", target)}
		}
		next := path.Join(path.Dir(cur), target)
		if next == ".." || strings.HasPrefix(next, "../") {
			return &Error{File: name, Line: 1, Column: 1, Msg: fmt.Sprintf("symlink to %s leaves the definitions root; refused", target)}
		}
		cur = next
	}
	return &Error{File: name, Line: 1, Column: 1, Msg: "too many levels of symlinks"}
}

func readLimited(fsys fs.FS, name string, limit int64) ([]byte, *Error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, &Error{File: name, Line: 1, Column: 1, Msg: "cannot read: " + err.Error()}
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > limit {
		return nil, &Error{File: name, Line: 1, Column: 1, Msg: fmt.Sprintf("file is %s; the limit is %s", size(fi.Size()), size(limit))}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &Error{File: name, Line: 1, Column: 1, Msg: "cannot read: " + err.Error()}
	}
	if int64(len(data)) > limit {
		return nil, &Error{File: name, Line: 1, Column: 1, Msg: fmt.Sprintf("file is larger than the limit of %d bytes", limit)}
	}
	return data, nil
}

// size writes a byte count for people: "52.0 MiB", "100 bytes".
func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func decodeDefinition(o Output) (Definition, *Error) {
	d := Definition{Kind: o.Kind, File: o.Name, idLine: o.IDLine, idColumn: o.IDColumn, positions: o.Positions}
	var v any
	switch o.Kind {
	case KindTask:
		d.Task = &Task{}
		v = d.Task
	case KindCampaign:
		d.Campaign = &Campaign{}
		v = d.Campaign
	default:
		return d, &Error{File: o.Name, Line: 1, Column: 1, Msg: fmt.Sprintf("unexpected kind %q", o.Kind)}
	}
	if err := strictDecode(o.JSON, v); err != nil {
		return d, &Error{File: o.Name, Line: 1, Column: 1, Msg: "decode: " + err.Error()}
	}
	var err error
	if d.Task != nil {
		d.Task.Work.normalize()
	} else {
		d.Campaign.Template.normalize()
	}
	if d.Task != nil {
		d.ID = d.Task.ID
		d.Digest, err = Digest(d.Task)
	} else {
		d.ID = d.Campaign.ID
		d.Digest, err = Digest(d.Campaign)
	}
	if err != nil {
		return d, &Error{File: o.Name, Line: 1, Column: 1, Msg: err.Error()}
	}
	return d, nil
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}

// PreviousDigests are the digests this definition had under earlier
// releases of fleetlift whose schema gave it defaults this one does not:
// a campaign without rate_limit had 60 pull requests an hour, burst 10;
// an agent's report without require_approval waited for approval; a
// repository without branch was cloned at main, where it is now cloned
// at its default branch. A run recorded with one of them carries out
// this definition as that release read it, so the plan does not count it
// changed (and so never runs a finished campaign again for an upgrade).
// The price: a report whose require_approval: true was recorded and is
// now set to false reads as unchanged too, and so does a repository
// whose branch: main was recorded and is now left out; a repository
// whose default branch is not main, which that release could not clone,
// runs again on a retry, not on its own.
func (d Definition) PreviousDigests() []string {
	var out []string
	add := func(spec any) {
		if digest, err := Digest(spec); err == nil && digest != d.Digest && !slices.Contains(out, digest) {
			out = append(out, digest)
		}
	}
	if t := d.Task; t != nil {
		var was []func(*Task)
		if reportApprovalDefaulted(&t.Work) {
			was = append(was, func(o *Task) { o.RequireApproval = true })
		}
		if branchesDefaulted(t.Repositories, t.Targets) || branchDefaulted(t.Transformation) {
			was = append(was, func(o *Task) {
				o.Repositories, o.Targets = mainBranches(o.Repositories), mainBranches(o.Targets)
				o.Transformation = mainBranch(o.Transformation)
			})
		}
		for _, old := range earlier(*t, was) {
			add(&old)
		}
		return out
	}
	c := d.Campaign
	if c == nil {
		return nil
	}
	var was []func(*Campaign)
	if c.RateLimit == nil && !c.StrictBatches && !slices.ContainsFunc(c.Groups, func(g Group) bool { return g.MaxParallel != 0 }) {
		was = append(was, func(o *Campaign) { o.RateLimit = &RateLimit{PullRequestsPerHour: 60, Burst: 10} })
	}
	if reportApprovalDefaulted(&c.Template) {
		was = append(was, func(o *Campaign) { o.Template.RequireApproval = true })
	}
	grouped := slices.ContainsFunc(c.Groups, func(g Group) bool { return branchesDefaulted(g.Repositories) })
	if grouped || branchesDefaulted(c.Repositories) || branchDefaulted(c.Template.Transformation) {
		was = append(was, func(o *Campaign) {
			o.Repositories = mainBranches(o.Repositories)
			o.Template.Transformation = mainBranch(o.Template.Transformation)
			o.Groups = slices.Clone(o.Groups)
			for i := range o.Groups {
				o.Groups[i].Repositories = mainBranches(o.Groups[i].Repositories)
			}
		})
	}
	for _, old := range earlier(*c, was) {
		add(&old)
	}
	return out
}

// earlier is spec as earlier releases read it: a copy for each
// combination, one or more, of their defaults (was).
func earlier[T any](spec T, was []func(*T)) []T {
	var out []T
	for set := 1; set < 1<<len(was); set++ {
		old := spec
		for i, f := range was {
			if set&(1<<i) != 0 {
				f(&old)
			}
		}
		out = append(out, old)
	}
	return out
}

// branchesDefaulted reports whether a repository of the lists names no
// branch.
func branchesDefaulted(lists ...[]Repository) bool {
	for _, rs := range lists {
		if slices.ContainsFunc(rs, func(r Repository) bool { return r.Branch == "" }) {
			return true
		}
	}
	return false
}

// branchDefaulted reports whether r is a repository that names no branch.
func branchDefaulted(r *Repository) bool { return r != nil && r.Branch == "" }

// mainBranches is a copy of rs in which a repository that names no
// branch names main, as releases before the default branch read it.
func mainBranches(rs []Repository) []Repository {
	out := slices.Clone(rs)
	for i := range out {
		if out[i].Branch == "" {
			out[i].Branch = "main"
		}
	}
	return out
}

// mainBranch is mainBranches of one repository.
func mainBranch(r *Repository) *Repository {
	if !branchDefaulted(r) {
		return r
	}
	old := *r
	old.Branch = "main"
	return &old
}

// reportApprovalDefaulted reports whether w is an agent's report that
// does not wait for approval: what an earlier release, which made such
// reports wait by default, may have read with require_approval true.
func reportApprovalDefaulted(w *Work) bool {
	return w.Mode == ModeReport && w.Execution.Agentic != nil && !w.RequireApproval
}

// Digest returns "sha256:<hex>" of the canonical JSON of a normalised
// spec: struct fields in declaration order, map keys sorted, durations in
// canonical form. Equal meaning gives an equal digest.
func Digest(spec any) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("digest: %w", err)
	}
	return digestOf(b), nil
}

// digestOf returns the digest of a spec's canonical JSON.
func digestOf(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return "sha256:" + hex.EncodeToString(sum[:])
}
