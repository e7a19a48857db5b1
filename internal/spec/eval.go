package spec

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	"cuelang.org/go/encoding/yaml"

	"github.com/fleetlift/fleetlift/internal/redact"
	"github.com/fleetlift/fleetlift/schemas"
)

// Input is one definition file to evaluate.
type Input struct {
	// Name is the file's path relative to the load root; its extension
	// selects the format (.cue, .yaml or .yml).
	Name string `json:"name"`
	Data []byte `json:"data"`
	// Config asks for the file to be read as a repository Config rather
	// than a Task or Campaign.
	Config bool `json:"config,omitempty"`
	// Approval asks for the file to be read as an approval record.
	Approval bool `json:"approval,omitempty"`
}

// Output is the result of evaluating one Input: the normalised definition
// as JSON (schema defaults applied) or the errors that stopped it.
type Output struct {
	Name   string          `json:"name"`
	Kind   Kind            `json:"kind,omitempty"`
	JSON   json.RawMessage `json:"json,omitempty"`
	Errors []*Error        `json:"errors,omitempty"`
	// IDLine and IDColumn locate the definition's id field.
	IDLine   int `json:"id_line,omitempty"`
	IDColumn int `json:"id_column,omitempty"`
	// Positions locate a repository config's forge section and its
	// fields ("forge", "forge.url"): line and column.
	Positions map[string][2]int `json:"positions,omitempty"`
}

// compiler evaluates definition files against the schema. It owns a
// cue.Context and so is not safe for concurrent use.
type compiler struct {
	ctx      *cue.Context
	defs     map[Kind]cue.Value
	patterns []patternMsg
}

// patternMsg explains a schema pattern in words: needle is how the pattern
// appears in CUE's "out of bound" messages.
type patternMsg struct {
	needle string
	msg    string
}

// checkPrefix starts the name of the schema's hidden cross-field checks:
// an error in _check_<field> is reported against <field>.
const checkPrefix = "_check_"

func newCompiler() (*compiler, error) {
	src, err := fs.ReadFile(schemas.FS, schemas.CUEFile)
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	ctx := cuecontext.New()
	s := ctx.CompileBytes(src, cue.Filename("schemas/"+schemas.CUEFile))
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("compile schema: %w", err)
	}
	c := &compiler{ctx: ctx, defs: map[Kind]cue.Value{}}
	for k, def := range map[Kind]string{KindTask: "#Task", KindCampaign: "#Campaign", KindConfig: "#Config", KindApproval: "#Approval"} {
		v := s.LookupPath(cue.ParsePath(def))
		if !v.Exists() {
			return nil, fmt.Errorf("schema has no %s", def)
		}
		c.defs[k] = v
	}
	it, err := s.Fields(cue.Definitions(true))
	if err != nil {
		return nil, fmt.Errorf("read schema definitions: %w", err)
	}
	for it.Next() {
		a := it.Value().Attribute("msg")
		if a.Err() != nil {
			continue
		}
		msg, err := a.String(0)
		if err != nil {
			return nil, fmt.Errorf("schema %s: @msg: %w", it.Selector(), err)
		}
		for _, p := range patterns(it.Value()) {
			c.patterns = append(c.patterns, patternMsg{needle: p, msg: msg})
		}
	}
	return c, nil
}

// patterns returns the regular-expression bounds of v as CUE prints them.
func patterns(v cue.Value) []string {
	op, args := v.Expr()
	switch op {
	case cue.AndOp:
		var out []string
		for _, a := range args {
			out = append(out, patterns(a)...)
		}
		return out
	case cue.RegexMatchOp, cue.NotRegexMatchOp:
		if len(args) != 1 {
			return nil
		}
		re, err := args[0].String()
		if err != nil {
			return nil
		}
		return []string{op.String() + literal.String.Quote(re)}
	}
	return nil
}

func (c *compiler) evaluate(in Input) (out Output) {
	out = Output{Name: in.Name}
	defer func() {
		if r := recover(); r != nil {
			// CUE panics on some malformed input; one file's panic must
			// not stop the others.
			out = Output{Name: in.Name, Errors: []*Error{{File: in.Name, Msg: fmt.Sprintf("internal error evaluating the file: %v", r)}}}
		}
		for _, e := range out.Errors {
			if e.Line == 0 {
				e.Line, e.Column = 1, 1
			}
		}
	}()
	fail := func(field, msg string) Output {
		out.Errors = append(out.Errors, &Error{File: in.Name, Line: 1, Column: 1, Field: field, Msg: msg})
		return out
	}
	if blankRe.Match(in.Data) {
		if in.Approval {
			return fail("", "the file is empty; an approval record needs at least version, kind, target, action and by")
		}
		return fail("", "the file is empty; a definition needs at least version, kind, id and title")
	}
	var f *ast.File
	var err error
	// namedInSyntax: the repositories were named before evaluation.
	namedInSyntax := false
	switch path.Ext(in.Name) {
	case ".yaml", ".yml":
		f, err = yaml.Extract(in.Name, in.Data)
		if err == nil && !in.Config && !in.Approval {
			nameYAMLRepositories(f)
			namedInSyntax = true
		}
	case ".cue":
		f, err = parser.ParseFile(in.Name, in.Data)
		if err == nil {
			err = checkImports(f)
		}
	default:
		return fail("", "not a definition file: the extension must be .cue, .yaml or .yml")
	}
	if err != nil {
		out.Errors = c.convert(in.Name, err, cue.Value{}, cue.Value{})
		return out
	}
	data := c.ctx.BuildFile(f)
	if err := data.Validate(); err != nil {
		out.Errors = c.convert(in.Name, err, data, cue.Value{})
		return out
	}
	switch data.IncompleteKind() {
	case cue.StructKind:
	case cue.ListKind:
		if path.Ext(in.Name) != ".cue" && docSeparatorRe.Match(in.Data) {
			if in.Approval {
				return fail("", "the file holds several YAML documents; put one approval record in each file")
			}
			return fail("", "the file holds several YAML documents; put one definition in each file")
		}
		return fail("", "the top level is a list; a definition is a mapping of fields such as version, kind and id")
	case cue.NullKind, cue.BottomKind:
		return fail("", "the file is empty; a definition needs at least version, kind and id")
	default:
		return fail("", "a definition must be a mapping of fields such as version, kind and id")
	}

	if e := c.checkVersion(in.Name, data); e != nil {
		out.Errors = []*Error{e}
		return out
	}
	kind, e := c.kind(in, data)
	if e != nil {
		out.Errors = []*Error{e}
		return out
	}
	out.Kind = kind
	named := data
	if !namedInSyntax {
		if patch := repositoryNames(kind, data); patch != nil {
			named = data.Unify(c.ctx.Encode(patch))
		}
	}
	u := c.defs[kind].Unify(named)
	if err := u.Validate(cue.Concrete(true), cue.Hidden(true), cue.All()); err != nil {
		out.Errors = c.convert(in.Name, err, data, c.defs[kind])
		return out
	}
	b, err := u.MarshalJSON()
	if err != nil {
		out.Errors = c.convert(in.Name, err, data, c.defs[kind])
		return out
	}
	if kind == KindTask || kind == KindCampaign {
		if errs := checkOutputSchema(in.Name, kind, data, u); len(errs) > 0 {
			out.Errors = errs
			return out
		}
	}
	out.JSON = b
	if p := data.LookupPath(cue.MakePath(cue.Str("id"))).Pos(); p.IsValid() && p.Filename() == in.Name {
		out.IDLine, out.IDColumn = p.Line(), p.Column()
	}
	switch kind {
	case KindConfig:
		out.Positions = configPositions(in.Name, data)
	case KindTask, KindCampaign:
		out.Positions = queryPositions(in.Name, data)
	}
	return out
}

// queryPositions locates a definition's repositories_from and each of
// its queries, which are resolved after loading; nil when it has none.
func queryPositions(name string, data cue.Value) map[string][2]int {
	q := data.LookupPath(cue.MakePath(cue.Str("repositories_from")))
	if !q.Exists() {
		return nil
	}
	pos := map[string][2]int{}
	add := func(field string, p token.Pos) {
		if p.IsValid() && p.Filename() == name {
			pos[field] = [2]int{p.Line(), p.Column()}
		}
	}
	add("repositories_from", q.Pos())
	if it, err := q.List(); err == nil {
		for i := 0; it.Next(); i++ {
			add(fmt.Sprintf("repositories_from[%d]", i), it.Value().Pos())
		}
	}
	return pos
}

// configPositions locates the fields of a config that are checked after
// loading: the forge section and its fields (against the forges the
// operator allows), and the notifications' templates and subscriptions
// (templates parse, names resolve).
func configPositions(name string, data cue.Value) map[string][2]int {
	pos := map[string][2]int{}
	add := func(field string, p token.Pos) {
		if p.IsValid() && p.Filename() == name {
			pos[field] = [2]int{p.Line(), p.Column()}
		}
	}
	fields := func(prefix string, v cue.Value) {
		if it, err := v.Fields(); err == nil {
			for it.Next() {
				add(prefix+"."+it.Selector().Unquoted(), it.Value().Pos())
			}
		}
	}
	f := data.LookupPath(cue.MakePath(cue.Str("forge")))
	add("forge", f.Pos())
	fields("forge", f)
	n := data.LookupPath(cue.MakePath(cue.Str("notifications")))
	fields("notifications.templates", n.LookupPath(cue.MakePath(cue.Str("templates"))))
	if it, err := n.LookupPath(cue.MakePath(cue.Str("subscriptions"))).List(); err == nil {
		for i := 0; it.Next(); i++ {
			fields(fmt.Sprintf("notifications.subscriptions[%d]", i), it.Value())
		}
	}
	return pos
}

// repositoryLists and repositorySingles are where a Task or Campaign
// holds repositories, besides each group's repositories: lists of them,
// and single ones.
var (
	repositoryLists   = [][]string{{"repositories"}, {"targets"}}
	repositorySingles = [][]string{{"transformation"}, {"template", "transformation"}}
)

// repositoryNames returns what must be added to data to name every
// repository that has no name: the last element of its URL's path without
// ".git". It returns nil when every repository is named. A YAML document's
// repositories are named before it is evaluated (nameYAMLRepositories).
func repositoryNames(kind Kind, data cue.Value) any {
	if kind == KindConfig || kind == KindApproval {
		return nil
	}
	patch := map[string]any{}
	changed := false
	set := func(p []string, v any) {
		m := patch
		for _, k := range p[:len(p)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[p[len(p)-1]] = v
	}
	for _, p := range repositorySingles {
		if n := nameFor(data.LookupPath(cuePath(p))); n != nil {
			set(p, n)
			changed = true
		}
	}
	namesIn := func(list cue.Value) ([]any, bool) {
		it, err := list.List()
		if err != nil {
			return nil, false
		}
		var items []any
		named := false
		for it.Next() {
			n := nameFor(it.Value())
			if n == nil {
				items = append(items, map[string]any{})
				continue
			}
			items = append(items, n)
			named = true
		}
		return items, named
	}
	for _, p := range repositoryLists {
		if items, ok := namesIn(data.LookupPath(cuePath(p))); ok {
			set(p, items)
			changed = true
		}
	}
	if groups, err := data.LookupPath(cue.MakePath(cue.Str("groups"))).List(); err == nil {
		var gs []any
		anyGroup := false
		for groups.Next() {
			items, ok := namesIn(groups.Value().LookupPath(cue.MakePath(cue.Str("repositories"))))
			if !ok {
				gs = append(gs, map[string]any{})
				continue
			}
			gs = append(gs, map[string]any{"repositories": items})
			anyGroup = true
		}
		if anyGroup {
			patch["groups"] = gs
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return patch
}

// nameFor returns {"name": derived} for a repository struct without a
// name whose url is a string, and nil otherwise.
func nameFor(repo cue.Value) map[string]any {
	if repo.IncompleteKind() != cue.StructKind || repo.LookupPath(cue.MakePath(cue.Str("name"))).Exists() {
		return nil
	}
	url, err := repo.LookupPath(cue.MakePath(cue.Str("url"))).String()
	if err != nil {
		return nil
	}
	return map[string]any{"name": RepositoryName(url)}
}

// RepositoryName derives a repository's directory name from its URL: the
// last element of the path, without ".git".
func RepositoryName(url string) string {
	u := strings.TrimRight(url, "/")
	return strings.TrimSuffix(u[strings.LastIndexAny(u, "/:")+1:], ".git")
}

// checkImports allows only CUE's standard library: a definition is read on
// its own, and nothing it names may be fetched.
func checkImports(f *ast.File) error {
	var errs cueerrors.Error
	for spec := range f.ImportSpecs() {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
			errs = cueerrors.Append(errs, cueerrors.Newf(spec.Pos(),
				"import %q: only CUE standard library packages may be imported", p))
		}
	}
	return errs
}

func (c *compiler) checkVersion(name string, data cue.Value) *Error {
	v := data.LookupPath(cue.MakePath(cue.Str("version")))
	if !v.Exists() {
		e := &Error{File: name, Field: "version", Msg: "version field is required"}
		setPos(e, name, data.Pos())
		return e
	}
	e := &Error{File: name, Field: "version"}
	setPos(e, name, v.Pos())
	n, err := v.Int64()
	switch {
	case err != nil:
		s, _ := v.MarshalJSON()
		e.Msg = fmt.Sprintf("version must be the number %d, not %s", SchemaVersion, s)
	case n != SchemaVersion:
		e.Msg = fmt.Sprintf("unsupported schema version: %d (supported: %d)", n, SchemaVersion)
	default:
		return nil
	}
	return e
}

func (c *compiler) kind(in Input, data cue.Value) (Kind, *Error) {
	if in.Approval {
		return approvalKind(in, data)
	}
	want := KindTask
	if in.Config {
		want = KindConfig
	}
	v := data.LookupPath(cue.MakePath(cue.Str("kind")))
	if !v.Exists() {
		return want, nil
	}
	s, err := v.String()
	k := Kind(s)
	switch {
	case err == nil && in.Config && k == KindConfig:
		return k, nil
	case err == nil && !in.Config && (k == KindTask || k == KindCampaign):
		return k, nil
	}
	e := &Error{File: in.Name, Field: "kind"}
	setPos(e, in.Name, v.Pos())
	got, _ := v.MarshalJSON()
	if err != nil {
		e.Msg = "kind must be a string: Task or Campaign"
		if in.Config {
			e.Msg = "kind must be the string Config"
		}
		return "", e
	}
	if in.Config {
		e.Msg = fmt.Sprintf("unknown kind %s: a repository config has kind Config", got)
	} else if k == KindApproval {
		e.Msg = fmt.Sprintf("kind %s is an approval record, not a definition: records belong under approvals/ at the repository root; a definition has kind Task or Campaign", got)
	} else {
		e.Msg = fmt.Sprintf("unknown kind %s: must be Task or Campaign", got)
	}
	return "", e
}

// convert turns CUE errors into Errors that name the file, the position in
// it and the field, in words a user can act on.
func (c *compiler) convert(name string, err error, data, schema cue.Value) []*Error {
	seen := map[string]bool{}
	var out []*Error
	for _, ce := range cueerrors.Errors(err) {
		sels := ce.Path()
		if len(sels) > 0 && strings.HasPrefix(sels[0], "#") {
			sels = sels[1:]
		}
		format, args := ce.Msg()
		msg := fmt.Sprintf(format, args...)
		var line int
		if strings.Contains(msg, "%!") || strings.TrimSpace(msg) == "" {
			// Errors from the YAML parser carry their position only in
			// their text: "name:LINE: message".
			msg = ce.Error()
			if m := yamlErrRe.FindStringSubmatch(msg); m != nil && m[1] == name {
				line, _ = strconv.Atoi(m[2])
				msg = "invalid YAML: " + m[3]
			}
		}
		check := false
		var dup cue.Value
		if n := len(sels); n > 0 && strings.HasPrefix(sels[n-1], checkPrefix) {
			check = true
			sels = append(sels[:n-1:n-1], strings.TrimPrefix(sels[n-1], checkPrefix))
		} else if n > 1 && strings.HasPrefix(sels[n-2], checkPrefix) {
			// A name used twice in a list: _check_<field>.<name> got
			// two items' indexes.
			if m := conflictRe.FindStringSubmatch(msg); m != nil {
				check = true
				field := strings.TrimPrefix(sels[n-2], checkPrefix)
				dupName := sels[n-1]
				if u, err := strconv.Unquote(dupName); err == nil {
					// A label that is not an identifier, as CUE quotes it.
					dupName = u
				}
				msg = uniqueMessage(dupName, field)
				sels = append(sels[:n-2:n-2], field)
				dup = laterItem(data, sels, m[1], m[2])
			}
		}
		e := &Error{File: name, Line: line, Field: fieldPath(sels), Msg: redact.URLs(c.explain(msg)), check: check}
		if dup.Exists() {
			// The item that repeats the name, rather than where the
			// schema's check stands.
			setPos(e, name, dup.Pos())
		}
		if line > 0 {
			e.Column = 1
		}
		positions := append(ce.InputPositions(), ce.Position())
		for _, p := range positions {
			if setPos(e, name, p) {
				break
			}
		}
		if e.Line == 0 && data.Exists() {
			for i := len(sels); i >= 0 && e.Line == 0; i-- {
				setPos(e, name, data.LookupPath(cuePath(sels[:i])).Pos())
			}
		}
		key := e.Field + "\x00" + e.Msg
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, e)
	}
	if len(out) == 0 {
		out = append(out, &Error{File: name, Msg: err.Error()})
	}
	out = dropConsequences(collapse(out))
	if schema.Exists() {
		out = append(out, unknownFields(name, data, schema, nil, seen)...)
	}
	out = dropInsideUnknown(out)
	sortErrors(out)
	return out
}

// explain rewrites CUE's wording where a plainer one says the same.
func (c *compiler) explain(msg string) string {
	for _, p := range c.patterns {
		if strings.Contains(msg, "(out of bound "+p.needle+")") {
			value, _, _ := strings.Cut(strings.TrimPrefix(msg, "invalid value "), " (out of bound")
			return value + " " + p.msg
		}
	}
	switch {
	case strings.HasSuffix(msg, "(does not satisfy strings.MinRunes(1))"):
		return "must not be empty"
	case strings.HasPrefix(msg, "incompatible list lengths (0 and "):
		// An empty list where the schema asks for at least one item.
		return "must not be empty"
	case strings.HasPrefix(msg, "error in call to time.ParseDuration"):
		// The schema's pattern admits it; only its size does not fit.
		return "must be a duration of at most 24h"
	case msg == "field not allowed":
		return "unknown field"
	case msg == "field is required but not present":
		return "field is required"
	case strings.HasPrefix(msg, "incomplete value"):
		return "field is required (" + msg + ")"
	}
	return msg
}

// isTypeExpr reports whether s, from a CUE message, is a type or schema
// rather than a value a user wrote.
func isTypeExpr(s string) bool {
	switch s {
	case "string", "int", "bool", "number", "float", "bytes", "null", "struct", "list":
		return true
	}
	return strings.Contains(s, "#") || strings.Contains(s, "...") || strings.Contains(s, "strings.") ||
		strings.HasPrefix(s, "(") || strings.HasPrefix(s, "int &") || strings.HasPrefix(s, ">") || strings.HasPrefix(s, "<")
}

// shorten keeps a quoted value readable in a one-line message.
func shorten(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:57]) + "..."
	}
	return s
}

// typeName says in words what a CUE type or list schema asks for.
func typeName(t string) string {
	switch {
	case t == "string":
		return "a string"
	case t == "int" || strings.HasPrefix(t, "int &") || strings.HasPrefix(t, ">"):
		return "an integer"
	case t == "bool":
		return "true or false"
	case t == "number" || t == "float":
		return "a number"
	case t == "struct" || strings.HasPrefix(t, "{"):
		return "a mapping of fields"
	case t == "list" || strings.HasPrefix(t, "["):
		return "a list"
	}
	return t
}

// uniqueMessage says that name is used more than once in the list field.
func uniqueMessage(name, field string) string {
	hint := ""
	if field == "repositories" || field == "targets" {
		// Their names default to the URL's last element.
		hint = " (set name to tell them apart)"
	}
	return fmt.Sprintf("names must be unique: %s is used more than once%s", strconv.Quote(name), hint)
}

// laterItem is the item of the list at path sels in data whose index is
// the greater of a and b (a uniqueness check's conflicting indexes): the
// one that repeats a name.
func laterItem(data cue.Value, sels []string, a, b string) cue.Value {
	i, errA := strconv.Atoi(a)
	j, errB := strconv.Atoi(b)
	if errA != nil || errB != nil {
		return cue.Value{}
	}
	return data.LookupPath(cuePath(append(slices.Clone(sels), strconv.Itoa(max(i, j)))))
}

var (
	disjunctionRe  = regexp.MustCompile(`^\d+ errors in empty disjunction:?$`)
	conflictRe     = regexp.MustCompile(`^conflicting values (.+?) and (.+?)(?: \(mismatched types (\w+) and (\w+)\))?$`)
	mismatchRe     = regexp.MustCompile(`^conflicting values (.+) and (.+) \(mismatched types (\w+) and (\w+)\)$`)
	docSeparatorRe = regexp.MustCompile(`(?m)^---\s*$`)
	blankRe        = regexp.MustCompile(`^(\s*((#|//)[^\n]*)?\n?)*$`)
	yamlErrRe      = regexp.MustCompile(`^(.+?):(\d+): (.+)$`)
	boundRe        = regexp.MustCompile(`^invalid value (.+) \(out of bound (.+)\)$`)
)

// collapse turns the several errors CUE gives for one field that failed
// every branch of a disjunction (an enum, a default) into one message.
func collapse(es []*Error) []*Error {
	byField := map[string][]*Error{}
	var order []string
	for _, e := range es {
		if disjunctionRe.MatchString(e.Msg) {
			continue
		}
		if _, ok := byField[e.Field]; !ok {
			order = append(order, e.Field)
		}
		byField[e.Field] = append(byField[e.Field], e)
	}
	var out []*Error
	for _, f := range order {
		group := byField[f]
		var conflicts, others []*Error
		for _, e := range group {
			if conflictRe.MatchString(e.Msg) {
				conflicts = append(conflicts, e)
			} else {
				others = append(others, e)
			}
		}
		if len(others) > 0 || len(conflicts) < 2 {
			// A conflict with a default value alongside a real complaint
			// says nothing more; a conflict of types always does.
			if slices.ContainsFunc(others, func(e *Error) bool { return !e.check }) {
				conflicts = slices.DeleteFunc(conflicts, func(e *Error) bool { return !mismatchRe.MatchString(e.Msg) })
			}
			for _, e := range append(others, conflicts...) {
				if m := boundRe.FindStringSubmatch(e.Msg); m != nil {
					e.Msg = m[1] + " must be " + m[2]
				}
				if m := mismatchRe.FindStringSubmatch(e.Msg); m != nil {
					value, want := m[2], m[1]
					if isTypeExpr(value) {
						value, want = want, value
					}
					e.Msg = shorten(value) + " must be " + typeName(want)
					if typeName(want) == "an integer" && slices.Contains(m[3:5], "float") {
						e.Msg += floatForInteger
					}
				}
				out = append(out, e)
			}
			continue
		}
		out = append(out, mergeConflicts(conflicts))
	}
	return out
}

// dropConsequences removes a cross-field check's complaint about a field
// when that field has errors of its own: CUE sees an erroneous field as
// absent, so "set one of repositories …" follows any error inside them.
func dropConsequences(es []*Error) []*Error {
	out := make([]*Error, 0, len(es))
	for _, e := range es {
		if e.check && consequence(es, e) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// dropInsideUnknown removes errors about what is inside an unknown field:
// the unknown field is the news.
func dropInsideUnknown(es []*Error) []*Error {
	out := make([]*Error, 0, len(es))
	for _, e := range es {
		inside := false
		for _, u := range es {
			if u != e && u.Msg == "unknown field" && (strings.HasPrefix(e.Field, u.Field+".") || strings.HasPrefix(e.Field, u.Field+"[")) {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, e)
		}
	}
	return out
}

// consequence reports whether check error e follows from another error in
// its field or in a sibling field its message names ("set one of
// repositories, groups, …").
func consequence(es []*Error, e *Error) bool {
	if hasErrorInside(es, e.Field) {
		return true
	}
	parent := ""
	if i := strings.LastIndexAny(e.Field, ".["); i >= 0 {
		parent = e.Field[:i] + "."
	}
	for _, w := range strings.FieldsFunc(e.Msg, func(r rune) bool { return r != '_' && (r < 'a' || r > 'z') }) {
		if hasErrorInside(es, parent+w) {
			return true
		}
	}
	return false
}

func hasErrorInside(es []*Error, field string) bool {
	for _, o := range es {
		if !o.check && (o.Field == field || strings.HasPrefix(o.Field, field+".") || strings.HasPrefix(o.Field, field+"[")) {
			return true
		}
	}
	return false
}

// floatForInteger ends the message for a float where an integer is
// wanted: 1e6 and 1.0 are floats to CUE, however integral, and YAML
// editors' JSON Schemas call them integers.
const floatForInteger = ", written without a decimal point or exponent"

// mergeConflicts reads "conflicting values A and B" for each branch of a
// disjunction: the value given is the one common to all of them.
func mergeConflicts(es []*Error) *Error {
	count := map[string]int{}
	var pairs [][]string
	var typed, float bool
	for _, e := range es {
		m := conflictRe.FindStringSubmatch(e.Msg)
		pairs = append(pairs, m[1:3])
		count[m[1]]++
		if m[2] != m[1] {
			count[m[2]]++
		}
		typed = typed || m[3] != ""
		float = float || slices.Contains(m[3:5], "float")
	}
	got := ""
	for v, n := range count {
		if n == len(es) && (got == "" || v < got) {
			got = v
		}
	}
	if got == "" {
		return es[0]
	}
	var alts []string
	for _, p := range pairs {
		for _, v := range p {
			if v != got && !slices.Contains(alts, v) {
				alts = append(alts, v)
			}
		}
	}
	slices.Sort(alts)
	e := *es[0]
	if typed {
		// The literal alternatives are defaults; the types say what is
		// wanted.
		var types []string
		for _, a := range alts {
			if isTypeExpr(a) && !slices.Contains(types, typeName(a)) {
				types = append(types, typeName(a))
			}
		}
		if len(types) == 0 {
			types = alts
		}
		e.Msg = fmt.Sprintf("%s must be %s", shorten(got), strings.Join(types, " or "))
		if float && slices.Equal(types, []string{"an integer"}) {
			e.Msg += floatForInteger
		}
	} else {
		e.Msg = fmt.Sprintf("%s must be one of %s", got, strings.Join(alts, ", "))
	}
	return &e
}

// unknownFields reports fields of data that the schema does not allow. CUE
// reports them only when nothing else in their struct is wrong; this walk
// finds them all at once.
func unknownFields(name string, data, schema cue.Value, sels []string, seen map[string]bool) []*Error {
	// Only a struct is checked against a struct schema; a struct where a
	// list belongs is CUE's to report.
	if !schema.Exists() || data.IncompleteKind()&schema.IncompleteKind() == 0 {
		return nil
	}
	if data.IncompleteKind() != cue.StructKind {
		if data.IncompleteKind() != cue.ListKind {
			return nil
		}
		var out []*Error
		it, err := data.List()
		for i := 0; err == nil && it.Next(); i++ {
			s := append(slices.Clip(sels), strconv.Itoa(i))
			out = append(out, unknownFields(name, it.Value(), schema.LookupPath(cue.MakePath(cue.AnyIndex)), s, seen)...)
		}
		return out
	}
	it, err := data.Fields()
	if err != nil {
		return nil
	}
	var out []*Error
	for it.Next() {
		sel := it.Selector()
		s := append(slices.Clip(sels), sel.String())
		if schema.IncompleteKind()&cue.StructKind != 0 && !schema.Allows(sel) {
			e := &Error{File: name, Field: fieldPath(s), Msg: "unknown field"}
			setPos(e, name, it.Value().Pos())
			if key := e.Field + "\x00" + e.Msg; !seen[key] {
				seen[key] = true
				out = append(out, e)
			}
			continue
		}
		out = append(out, unknownFields(name, it.Value(), schemaField(schema, sel), s, seen)...)
	}
	return out
}

// schemaField finds the schema of a field, whether it is declared regular,
// optional or required.
func schemaField(schema cue.Value, sel cue.Selector) cue.Value {
	for _, s := range []cue.Selector{sel, sel.Optional(), sel.Required()} {
		if v := schema.LookupPath(cue.MakePath(s)); v.Exists() {
			return v
		}
	}
	return cue.Value{}
}

func setPos(e *Error, name string, p token.Pos) bool {
	if !p.IsValid() || p.Filename() != name {
		return false
	}
	e.Line, e.Column = p.Line(), p.Column()
	return true
}

func fieldPath(sels []string) string {
	var b strings.Builder
	for _, s := range sels {
		if _, err := strconv.Atoi(s); err == nil {
			b.WriteString("[" + s + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

func cuePath(sels []string) cue.Path {
	ps := make([]cue.Selector, 0, len(sels))
	for _, s := range sels {
		if i, err := strconv.Atoi(s); err == nil {
			ps = append(ps, cue.Index(i))
			continue
		}
		if strings.HasPrefix(s, "_") || strings.HasPrefix(s, "#") {
			break
		}
		ps = append(ps, cue.Str(s))
	}
	return cue.MakePath(ps...)
}
