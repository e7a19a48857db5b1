package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
	"cuelang.org/go/encoding/yaml"

	"github.com/fleetlift/fleetlift/schemas"
)

// The direct path reads a YAML Task or Campaign without evaluating CUE.
// Unifying a file with the schema costs milliseconds, almost all of it
// spent proving that a plainly valid file is valid; a repository of a
// thousand campaigns pays that a thousand times on every plan.
//
// The direct path never decides that a file is invalid. It reads the file
// with parsePlainYAML or, for YAML beyond that plain subset, with CUE's own
// YAML decoder, so that every scalar has the type CUE gives it; it accepts
// only plain data (strings, decimal integers, booleans, null, lists and
// mappings, each key once) and the schema's fields, and checks every
// constraint of the schema with the schema's own regular expressions. At
// the first thing it does not know or that breaks a constraint it gives
// up, and the file is evaluated with CUE, which is always right and says
// what is wrong. What it accepts it returns exactly as the CUE path would:
// the same definition, defaults, derived repository names, id position
// and digest. TestDirectMatchesCUE and FuzzDirect compare the two paths
// over every example, every invalid input and variations of them;
// TestPlainYAMLMatchesCUE and FuzzPlainYAML compare the two YAML readers.

// directSchemaSHA256 is the digest (see directSchemaDigest) of the parts
// of the schema that the direct path implements. When they change, the
// direct path turns itself off, and every file is evaluated with CUE,
// until it has been brought in line and this digest updated
// (TestDirectSchemaDigest fails meanwhile).
const directSchemaSHA256 = "e3c9f3e7c1cecf82514cb421e465beb0602502176d02369d3726da8b13829651"

// directSchemaDigest returns the SHA-256 of the schema's declarations,
// but for those that only the repository config and approval records
// use: the direct path depends on all of the others.
func directSchemaDigest() (string, error) {
	src, err := fs.ReadFile(schemas.FS, schemas.CUEFile)
	if err != nil {
		return "", err
	}
	f, err := parser.ParseFile(schemas.CUEFile, src)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, decl := range f.Decls {
		if fd, ok := decl.(*ast.Field); ok {
			switch name, _, _ := ast.LabelName(fd.Label); name {
			case "#Config", "#RelPath", "#ApproverRule", "#Forge", "#Approval", "#Target", "#Digest", "#Login":
				continue
			}
		}
		h.Write(src[decl.Pos().Offset():decl.End().Offset()])
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// directEnabled reports whether the schema is the one the direct path
// implements. The schema is compiled in, so the answer never changes.
var directEnabled = sync.OnceValue(func() bool {
	sum, err := directSchemaDigest()
	return err == nil && sum == directSchemaSHA256
})

// The schema's regular expressions, as Go's regexp (which CUE's =~ and !~
// use) compiles them. TestDirectPatterns checks them against the schema.
var (
	idRe         = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
	nameRe       = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$`)
	nameNotRe    = regexp.MustCompile(`\.\.`)
	gitURLRe     = regexp.MustCompile(`^(https://[A-Za-z0-9.-]+(:[0-9]+)?/[^\s@]*|http://(127\.0\.0\.1|localhost|\[::1\])(:[0-9]+)?/[^\s@]*|ssh://([A-Za-z0-9._-]+@)?[A-Za-z0-9.-]+(:[0-9]+)?/[^\s]*|[A-Za-z0-9_][A-Za-z0-9._-]*@[A-Za-z0-9.-]+:[^\s:]+|file:///[^\s]*)$`)
	gitURLNotRe  = regexp.MustCompile(`\.\./`)
	refNameRe    = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._/-]{0,199}$`)
	refNameNotRe = regexp.MustCompile(`(\.\.|//|/\.|\.lock$|\.lock/|/$|\.$|@\{)`)
	durationRe   = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)
	quantityRe   = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$`)
	envNameRe    = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretKeyRe  = regexp.MustCompile(`^[-._A-Za-z0-9]+$`)
)

// The schema's string constraints.
var (
	idCheck        = &constraint{re: idRe, quick: quickID}
	nameCheck      = &constraint{re: nameRe, not: nameNotRe, quick: quickName}
	gitURLCheck    = &constraint{re: gitURLRe, not: gitURLNotRe, quick: quickHTTPSURL}
	refNameCheck   = &constraint{re: refNameRe, not: refNameNotRe, quick: quickRefName}
	durationCheck  = &constraint{re: durationRe}
	quantityCheck  = &constraint{re: quantityRe}
	secretKeyCheck = &constraint{re: secretKeyRe}
)

var (
	// plainIntRe is a decimal integer that is exact as a float64.
	plainIntRe = regexp.MustCompile(`^(0|[1-9][0-9]{0,14})$`)
	// asciiLabelRe is a key the direct path reads: printable ASCII.
	asciiLabelRe = regexp.MustCompile(`^[\x21-\x7e]+$`)
)

// decodeDirect reads in as a Task or Campaign without CUE. ok is false
// when the direct path does not know the file to be valid; the caller then
// evaluates it with CUE.
func decodeDirect(in Input) (out Output, ok bool) {
	if in.Config || in.Approval {
		return Output{}, false
	}
	switch path.Ext(in.Name) {
	case ".yaml", ".yml":
	default:
		return Output{}, false
	}
	defer func() {
		if r := recover(); r != nil {
			out, ok = Output{}, false
		}
	}()
	// Most files are in the plain subset of YAML that parsePlainYAML
	// reads; the others are read by CUE's YAML decoder.
	top, ok := parsePlainYAML(in.Data)
	if !ok {
		f, err := yaml.Extract(in.Name, in.Data)
		if err != nil {
			return Output{}, false
		}
		if top, ok = fromCUE(in.Name, f); !ok {
			return Output{}, false
		}
	}
	return readDefinition(in.Name, top)
}

// readDefinition checks a parsed file against the schema and returns what
// evaluating it with CUE would.
func readDefinition(name string, top *node) (Output, bool) {
	d := &direct{}
	m := d.obj(top)
	if d.bad {
		return Output{}, false
	}
	idField := m["id"]
	if idField == nil {
		return Output{}, false
	}
	var spec any
	def := Definition{File: name}
	if k := m["kind"]; k != nil && k.value.kind == nString && k.value.str == string(KindCampaign) {
		c := d.campaign(m)
		c.Template.normalize()
		spec, def.Kind, def.Campaign, def.ID = &c, KindCampaign, &c, c.ID
	} else {
		t := d.task(m)
		t.Work.normalize()
		spec, def.Kind, def.Task, def.ID = &t, KindTask, &t, t.ID
	}
	if d.bad {
		return Output{}, false
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return Output{}, false
	}
	def.Digest = digestOf(b)
	def.idLine, def.idColumn = idField.line, idField.col
	return Output{Name: name, Kind: def.Kind, JSON: b, IDLine: idField.line, IDColumn: idField.col, def: &def}, true
}

// node is a parsed YAML value, as CUE reads it: a string, a decimal
// integer, a boolean, null, a list or a mapping.
type node struct {
	kind   nodeKind
	str    string
	num    int
	list   []*node
	fields []field
}

type nodeKind uint8

const (
	nString nodeKind = iota + 1
	nInt
	nBool
	nNull
	nList
	nMap
)

// field is a mapping entry; line and column locate its key (1-based).
type field struct {
	name      string
	line, col int
	value     *node
}

// fromCUE converts the syntax CUE's YAML decoder gives for a file. ok is
// false for anything but plain data.
func fromCUE(name string, f *ast.File) (*node, bool) {
	return fromCUEFields(name, f.Decls)
}

func fromCUEFields(name string, decls []ast.Decl) (*node, bool) {
	n := &node{kind: nMap, fields: make([]field, 0, len(decls))}
	for _, decl := range decls {
		f, ok := decl.(*ast.Field)
		if !ok || f.Alias != nil || f.Constraint != token.ILLEGAL || len(f.Attrs) > 0 || f.Value == nil {
			return nil, false
		}
		label, ok := labelName(f.Label)
		if !ok {
			return nil, false
		}
		v, ok := fromCUEExpr(name, f.Value)
		if !ok {
			return nil, false
		}
		fl := field{name: label, value: v}
		if p := f.Label.Pos(); p.IsValid() && p.Filename() == name {
			fl.line, fl.col = p.Line(), p.Column()
		}
		n.fields = append(n.fields, fl)
	}
	return n, true
}

func fromCUEExpr(name string, e ast.Expr) (*node, bool) {
	switch x := e.(type) {
	case *ast.StructLit:
		return fromCUEFields(name, x.Elts)
	case *ast.ListLit:
		n := &node{kind: nList, list: make([]*node, 0, len(x.Elts))}
		for _, it := range x.Elts {
			v, ok := fromCUEExpr(name, it)
			if !ok {
				return nil, false
			}
			n.list = append(n.list, v)
		}
		return n, true
	case *ast.BasicLit:
		switch x.Kind {
		case token.STRING:
			s, ok := quoted(x)
			return &node{kind: nString, str: s}, ok
		case token.INT:
			if !plainIntRe.MatchString(x.Value) {
				return nil, false
			}
			v, err := strconv.Atoi(x.Value)
			return &node{kind: nInt, num: v}, err == nil
		case token.TRUE:
			return &node{kind: nBool, num: 1}, true
		case token.FALSE:
			return &node{kind: nBool}, true
		case token.NULL:
			return &node{kind: nNull}, x.Value == "null"
		}
	}
	return nil, false
}

// direct checks a parsed file against the schema. Once anything is not as
// the schema wants, bad is set and the rest of the reading is moot.
type direct struct{ bad bool }

// object is a mapping's fields by name; reading a field removes it, so
// that what is left at the end is a field the schema does not know.
type object map[string]*field

func (d *direct) fail() { d.bad = true }

func (d *direct) check(ok bool) {
	if !ok {
		d.bad = true
	}
}

// labelName returns the name of a field label that CUE reads as a regular
// field of that name: printable ASCII, so that Unicode normalisation of
// labels cannot make two names one.
func labelName(l ast.Label) (string, bool) {
	var name string
	switch l := l.(type) {
	case *ast.Ident:
		name = l.Name
		if name == "" || name[0] == '_' || name[0] == '#' {
			return "", false
		}
	case *ast.BasicLit:
		s, ok := quoted(l)
		if !ok {
			return "", false
		}
		name = s
	default:
		return "", false
	}
	if !asciiLabelRe.MatchString(name) {
		return "", false
	}
	return name, true
}

// quoted unquotes a double-quoted string literal as CUE's compiler does.
func quoted(l *ast.BasicLit) (string, bool) {
	if l.Kind != token.STRING || l.Value == "" {
		return "", false
	}
	info, n, _, err := literal.ParseQuotes(l.Value, l.Value)
	if err != nil || !info.IsDouble() {
		return "", false
	}
	s, err := info.Unquote(l.Value[n:])
	if err != nil || !utf8.ValidString(s) {
		return "", false
	}
	return s, true
}

// take removes and returns the value of field name, or nil when m has no
// such field.
func (d *direct) take(m object, name string) *node {
	f := m[name]
	if f == nil {
		return nil
	}
	delete(m, name)
	return f.value
}

// required is take for a field the schema requires.
func (d *direct) required(m object, name string) *node {
	n := d.take(m, name)
	if n == nil {
		d.fail()
	}
	return n
}

// closed fails when m has a field nothing has read: the schema's
// definitions are closed.
func (d *direct) closed(m object) {
	if len(m) > 0 {
		d.fail()
	}
}

// obj reads a mapping whose keys are each there once.
func (d *direct) obj(n *node) object {
	if n == nil || n.kind != nMap {
		d.fail()
		return nil
	}
	m := make(object, len(n.fields))
	for i := range n.fields {
		f := &n.fields[i]
		if _, dup := m[f.name]; dup {
			d.fail()
			return nil
		}
		m[f.name] = f
	}
	return m
}

func (d *direct) list(n *node) []*node {
	if n == nil || n.kind != nList {
		d.fail()
		return nil
	}
	return n.list
}

func (d *direct) str(n *node) string {
	if n == nil || n.kind != nString {
		d.fail()
		return ""
	}
	return n.str
}

// nonEmpty is string & strings.MinRunes(1).
func (d *direct) nonEmpty(e *node) string {
	s := d.str(e)
	d.check(s != "")
	return s
}

func (d *direct) match(e *node, c *constraint) string {
	s := d.str(e)
	d.check(c.holds(s))
	return s
}

func (d *direct) name(e *node) string { return d.match(e, nameCheck) }
func (d *direct) id(e *node) string   { return d.match(e, idCheck) }

// constraint is a string constraint of the schema: a regular expression a
// value must match and, if not is set, one it must not. quick recognises
// common values without running the expressions: quick(s) implies that
// the constraint holds (TestQuickChecks), and false says nothing.
type constraint struct {
	re, not *regexp.Regexp
	quick   func(string) bool
}

func (c *constraint) holds(s string) bool {
	if c.quick != nil && c.quick(s) {
		return true
	}
	return c.re.MatchString(s) && (c.not == nil || !c.not.MatchString(s))
}

// quickID: 1-63 of [a-z0-9-], not starting or ending with '-'.
func quickID(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// quickName: one of [A-Za-z0-9_], then at most 99 of [A-Za-z0-9._-],
// without "..".
func quickName(s string) bool {
	if len(s) == 0 || len(s) > 100 || !isWordByte(s[0]) || strings.Contains(s, "..") {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isWordByte(c) && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// quickRefName: one of [A-Za-z0-9_], then at most 199 of [A-Za-z0-9._/-],
// without "..", "//", "/.", ".lock/", and not ending in ".lock", "/" or
// ".".
func quickRefName(s string) bool {
	if len(s) == 0 || len(s) > 200 || !isWordByte(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isWordByte(c) && c != '.' && c != '-' && c != '/' {
			return false
		}
	}
	for _, bad := range []string{"..", "//", "/.", ".lock/"} {
		if strings.Contains(s, bad) {
			return false
		}
	}
	return !strings.HasSuffix(s, ".lock") && !strings.HasSuffix(s, "/") && !strings.HasSuffix(s, ".")
}

// quickHTTPSURL: "https://", a host of [A-Za-z0-9.-], then "/" and a path
// without white space or "@", and no "../" anywhere.
func quickHTTPSURL(s string) bool {
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		return false
	}
	slash := strings.IndexByte(rest, '/')
	if slash < 1 || strings.Contains(s, "../") {
		return false
	}
	for i := 0; i < slash; i++ {
		if c := rest[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return !strings.ContainsAny(rest[slash:], " \t\n\f\r@")
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// integer reads an integer in [lo, hi].
func (d *direct) integer(n *node, lo, hi int) int {
	if n == nil || n.kind != nInt {
		d.fail()
		return 0
	}
	d.check(n.num >= lo && n.num <= hi)
	return n.num
}

func (d *direct) boolean(n *node) bool {
	if n == nil || n.kind != nBool {
		d.fail()
		return false
	}
	return n.num == 1
}

// oneOf reads a string that must be one of values; absent, it is the
// first.
func (d *direct) oneOf(m object, field string, values ...string) string {
	e := d.take(m, field)
	if e == nil {
		return values[0]
	}
	s := d.str(e)
	for _, v := range values {
		if s == v {
			return s
		}
	}
	d.fail()
	return ""
}

// optInt reads an optional integer field in [lo, hi] with a default.
func (d *direct) optInt(m object, field string, def, lo, hi int) int {
	if e := d.take(m, field); e != nil {
		return d.integer(e, lo, hi)
	}
	return def
}

func (d *direct) optBool(m object, field string) bool {
	if e := d.take(m, field); e != nil {
		return d.boolean(e)
	}
	return false
}

// strings reads a list of strings, each non-empty if nonEmpty.
func (d *direct) strings(e *node, nonEmpty bool) []string {
	items := d.list(e)
	out := make([]string, 0, len(items))
	for _, it := range items {
		s := d.str(it)
		d.check(!nonEmpty || s != "")
		out = append(out, s)
	}
	return out
}

// command is #Command: a non-empty list of strings, the first non-empty.
func (d *direct) command(e *node) []string {
	c := d.strings(e, false)
	d.check(len(c) > 0 && c[0] != "")
	return c
}

// stringMap reads a mapping of strings whose keys match keyRe (any key
// when nil).
func (d *direct) stringMap(n *node, keyRe *regexp.Regexp) map[string]string {
	m := d.obj(n)
	out := make(map[string]string, len(m))
	for k, f := range m {
		d.check(keyRe == nil || keyRe.MatchString(k))
		out[k] = d.str(f.value)
	}
	return out
}

// value reads the open-ended data under an output schema as JSON decodes
// it into an any: mappings, lists, strings, integers (as float64),
// booleans and null.
func (d *direct) value(n *node) any {
	switch n.kind {
	case nMap:
		m := d.obj(n)
		out := make(map[string]any, len(m))
		for k, f := range m {
			out[k] = d.value(f.value)
		}
		return out
	case nList:
		out := make([]any, 0, len(n.list))
		for _, it := range n.list {
			out = append(out, d.value(it))
		}
		return out
	case nString:
		return n.str
	case nInt:
		return float64(n.num)
	case nBool:
		return n.num == 1
	case nNull:
		return nil
	}
	d.fail()
	return nil
}

// repository is #Repository, its name derived from its URL when it has
// none, as the loader does before unifying.
func (d *direct) repository(e *node) Repository {
	m := d.obj(e)
	var r Repository
	r.URL = d.match(d.required(m, "url"), gitURLCheck)
	if b := d.take(m, "branch"); b != nil {
		r.Branch = d.match(b, refNameCheck)
	}
	if n := d.take(m, "name"); n != nil {
		r.Name = d.name(n)
	} else {
		r.Name = RepositoryName(r.URL)
		d.check(nameCheck.holds(r.Name))
	}
	if s := d.take(m, "setup"); s != nil {
		r.Setup = d.strings(s, true)
	}
	r.Submodules = d.optBool(m, "submodules")
	d.closed(m)
	return r
}

// repositories is [#Repository, ...#Repository] with unique names.
func (d *direct) repositories(e *node) []Repository {
	items := d.list(e)
	d.check(len(items) > 0)
	out := make([]Repository, 0, len(items))
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		r := d.repository(it)
		d.check(!seen[r.Name])
		seen[r.Name] = true
		out = append(out, r)
	}
	return out
}

// groups is [#Group, ...#Group] with unique names.
func (d *direct) groups(e *node) []Group {
	items := d.list(e)
	d.check(len(items) > 0)
	out := make([]Group, 0, len(items))
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		m := d.obj(it)
		g := Group{Name: d.name(d.required(m, "name"))}
		if r := d.required(m, "repositories"); r != nil {
			g.Repositories = d.repositories(r)
		}
		if e := d.take(m, "max_parallel"); e != nil {
			g.MaxParallel = d.integer(e, 1, 100)
		}
		d.closed(m)
		d.check(!seen[g.Name])
		seen[g.Name] = true
		out = append(out, g)
	}
	return out
}

func (d *direct) verifiers(e *node) []Verifier {
	items := d.list(e)
	out := make([]Verifier, 0, len(items))
	for _, it := range items {
		m := d.obj(it)
		v := Verifier{Name: d.name(d.required(m, "name"))}
		if c := d.required(m, "command"); c != nil {
			v.Command = d.command(c)
		}
		d.closed(m)
		out = append(out, v)
	}
	return out
}

func (d *direct) agentic(e *node) *Agentic {
	m := d.obj(e)
	a := &Agentic{Prompt: d.nonEmpty(d.required(m, "prompt"))}
	if v := d.take(m, "verifiers"); v != nil {
		a.Verifiers = d.verifiers(v)
	}
	lim := object{}
	if l := d.take(m, "limits"); l != nil {
		lim = d.obj(l)
	}
	a.Limits = AgentLimits{
		MaxIterations:         d.optInt(lim, "max_iterations", 10, 1, 1000),
		MaxTokens:             d.optInt(lim, "max_tokens", 100000, 1000, 1e15),
		MaxVerifierRetries:    d.optInt(lim, "max_verifier_retries", 3, 0, 100),
		MaxSteeringIterations: d.optInt(lim, "max_steering_iterations", 5, 0, 100),
	}
	d.closed(lim)
	if o := d.take(m, "output"); o != nil {
		om := d.obj(o)
		a.Output = &ReportOutput{}
		if s := d.take(om, "schema"); s != nil {
			v, ok := d.value(s).(map[string]any)
			d.check(ok && usableSchema(v))
			a.Output.Schema = v
		}
		a.Output.Capture = Capture(d.oneOf(om, "capture", "file", "stdout"))
		d.closed(om)
	}
	a.Agent = "claude-code"
	if ag := d.take(m, "agent"); ag != nil {
		a.Agent = d.name(ag)
	}
	d.closed(m)
	return a
}

func (d *direct) deterministic(e *node) *Deterministic {
	m := d.obj(e)
	x := &Deterministic{Image: d.nonEmpty(d.required(m, "image"))}
	if c := d.take(m, "command"); c != nil {
		x.Command = d.command(c)
	}
	if a := d.take(m, "args"); a != nil {
		x.Args = d.strings(a, false)
	}
	if env := d.take(m, "env"); env != nil {
		x.Env = d.stringMap(env, envNameRe)
	}
	if v := d.take(m, "verifiers"); v != nil {
		x.Verifiers = d.verifiers(v)
	}
	d.closed(m)
	return x
}

func (d *direct) pullRequest(e *node) *PullRequest {
	m := d.obj(e)
	pr := &PullRequest{
		BranchPrefix: d.match(d.required(m, "branch_prefix"), refNameCheck),
		Title:        d.nonEmpty(d.required(m, "title")),
	}
	if b := d.take(m, "body"); b != nil {
		pr.Body = d.str(b)
	}
	if l := d.take(m, "labels"); l != nil {
		pr.Labels = d.strings(l, true)
	}
	if r := d.take(m, "reviewers"); r != nil {
		pr.Reviewers = d.strings(r, true)
	}
	pr.Draft = d.optBool(m, "draft")
	d.closed(m)
	return pr
}

func (d *direct) resourceList(e *node) *ResourceList {
	m := d.obj(e)
	rl := &ResourceList{}
	if v := d.take(m, "memory"); v != nil {
		rl.Memory = d.match(v, quantityCheck)
	}
	if v := d.take(m, "cpu"); v != nil {
		rl.CPU = d.match(v, quantityCheck)
	}
	d.closed(m)
	return rl
}

func (d *direct) sandbox(e *node) *Sandbox {
	m := d.obj(e)
	s := &Sandbox{}
	if v := d.take(m, "namespace"); v != nil {
		s.Namespace = d.id(v)
	}
	if v := d.take(m, "runtime_class"); v != nil {
		s.RuntimeClass = d.id(v)
	}
	if v := d.take(m, "node_selector"); v != nil {
		s.NodeSelector = d.stringMap(v, nil)
	}
	if v := d.take(m, "resources"); v != nil {
		rm := d.obj(v)
		s.Resources = &Resources{}
		if l := d.take(rm, "limits"); l != nil {
			s.Resources.Limits = d.resourceList(l)
		}
		if r := d.take(rm, "requests"); r != nil {
			s.Resources.Requests = d.resourceList(r)
		}
		d.closed(rm)
	}
	d.closed(m)
	return s
}

func (d *direct) credential(e *node) *Credential {
	m := d.obj(e)
	ref := d.obj(d.required(m, "secret_ref"))
	c := &Credential{SecretRef: SecretRef{
		Name: d.id(d.required(ref, "name")),
		Key:  d.match(d.required(ref, "key"), secretKeyCheck),
	}}
	d.closed(ref)
	d.closed(m)
	return c
}

func (d *direct) credentials(e *node) *Credentials {
	m := d.obj(e)
	c := &Credentials{}
	if v := d.take(m, "github"); v != nil {
		c.GitHub = d.credential(v)
	}
	if v := d.take(m, "anthropic"); v != nil {
		c.Anthropic = d.credential(v)
	}
	d.closed(m)
	return c
}

// work reads #Work's fields from m, leaving the others.
func (d *direct) work(m object) Work {
	w := Work{Mode: Mode(d.oneOf(m, "mode", string(ModeTransform), string(ModeReport)))}
	if t := d.take(m, "transformation"); t != nil {
		r := d.repository(t)
		w.Transformation = &r
	}
	if fe := d.take(m, "for_each"); fe != nil {
		// Only reports iterate, each name once.
		d.check(w.Mode == ModeReport)
		items := d.list(fe)
		w.ForEach = make([]ForEachTarget, 0, len(items))
		seen := make(map[string]bool, len(items))
		for _, it := range items {
			fm := d.obj(it)
			t := ForEachTarget{Name: d.name(d.required(fm, "name")), Context: d.str(d.required(fm, "context"))}
			d.closed(fm)
			d.check(!seen[t.Name])
			seen[t.Name] = true
			w.ForEach = append(w.ForEach, t)
		}
	}
	ex := d.obj(d.required(m, "execution"))
	if a := d.take(ex, "agentic"); a != nil {
		w.Execution.Agentic = d.agentic(a)
	}
	if x := d.take(ex, "deterministic"); x != nil {
		w.Execution.Deterministic = d.deterministic(x)
	}
	d.closed(ex)
	d.check((w.Execution.Agentic == nil) != (w.Execution.Deterministic == nil))
	timeout := "30m"
	if t := d.take(m, "timeout"); t != nil {
		timeout = d.match(t, durationCheck)
	}
	dur, err := time.ParseDuration(timeout)
	d.check(err == nil)
	w.Timeout = Duration(dur)
	w.RequireApproval = w.Execution.Agentic != nil && w.Mode == ModeTransform
	if ra := d.take(m, "require_approval"); ra != nil {
		w.RequireApproval = d.boolean(ra)
	}
	if pr := d.take(m, "pull_request"); pr != nil {
		d.check(w.Mode == ModeTransform)
		w.PullRequest = d.pullRequest(pr)
	}
	if s := d.take(m, "sandbox"); s != nil {
		w.Sandbox = d.sandbox(s)
	}
	if c := d.take(m, "credentials"); c != nil {
		w.Credentials = d.credentials(c)
	}
	return w
}

func (d *direct) failure(m object, threshold int) Failure {
	f := object{}
	if e := d.take(m, "failure"); e != nil {
		f = d.obj(e)
	}
	out := Failure{
		ThresholdPercent: d.optInt(f, "threshold_percent", threshold, 0, 100),
		Action:           FailureAction(d.oneOf(f, "action", string(FailurePause), string(FailureAbort))),
	}
	d.closed(f)
	return out
}

// header reads version, id, title and description.
func (d *direct) header(m object) (id, title, description string) {
	d.check(d.integer(d.required(m, "version"), SchemaVersion, SchemaVersion) == SchemaVersion)
	id = d.id(d.required(m, "id"))
	title = d.nonEmpty(d.required(m, "title"))
	if e := d.take(m, "description"); e != nil {
		description = d.str(e)
	}
	return id, title, description
}

func (d *direct) campaign(m object) Campaign {
	d.check(d.str(d.required(m, "kind")) == string(KindCampaign))
	c := Campaign{Version: SchemaVersion, Kind: KindCampaign}
	c.ID, c.Title, c.Description = d.header(m)
	tm := d.obj(d.required(m, "template"))
	c.Template = d.work(tm)
	d.closed(tm)
	repos, groups := d.take(m, "repositories"), d.take(m, "groups")
	d.check((repos == nil) != (groups == nil))
	if repos != nil {
		c.Repositories = d.repositories(repos)
	}
	if groups != nil {
		c.Groups = d.groups(groups)
	}
	c.BatchSize = d.optInt(m, "batch_size", 10, 1, 10000)
	c.StrictBatches = d.optBool(m, "strict_batches")
	c.MaxParallel = d.optInt(m, "max_parallel", 5, 1, 1000)
	c.Failure = d.failure(m, 20)
	if e := d.take(m, "rate_limit"); e != nil {
		rl := d.obj(e)
		c.RateLimit = &RateLimit{
			PullRequestsPerHour: d.optInt(rl, "pull_requests_per_hour", 60, 1, 10000),
			Burst:               d.optInt(rl, "burst", 10, 1, 10000),
		}
		d.closed(rl)
	}
	c.Suspend = d.optBool(m, "suspend")
	sp := object{}
	if e := d.take(m, "sync_policy"); e != nil {
		sp = d.obj(e)
	}
	c.SyncPolicy = SyncPolicy{
		Prune:  d.optBool(sp, "prune"),
		Update: UpdateStrategy(d.oneOf(sp, "update", string(UpdateInPlace), string(UpdateRestart))),
	}
	d.closed(sp)
	d.closed(m)
	return c
}

func (d *direct) task(m object) Task {
	if k := d.take(m, "kind"); k != nil {
		d.check(d.str(k) == string(KindTask))
	}
	t := Task{Version: SchemaVersion, Kind: KindTask}
	t.ID, t.Title, t.Description = d.header(m)
	t.Work = d.work(m)
	repos, targets, groups := d.take(m, "repositories"), d.take(m, "targets"), d.take(m, "groups")
	// Exactly one of repositories, groups, or transformation with targets.
	switch {
	case repos != nil:
		d.check(targets == nil && groups == nil && t.Transformation == nil)
		t.Repositories = d.repositories(repos)
	case groups != nil:
		d.check(targets == nil && t.Transformation == nil)
		t.Groups = d.groups(groups)
	default:
		d.check(targets != nil && t.Transformation != nil)
		if targets != nil {
			t.Targets = d.repositories(targets)
		}
	}
	t.MaxParallel = d.optInt(m, "max_parallel", 5, 1, 1000)
	t.Failure = d.failure(m, 100)
	d.closed(m)
	return t
}
