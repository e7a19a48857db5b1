package spec

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/ast/astutil"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
	cueyaml "cuelang.org/go/encoding/yaml"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/fleetlift/fleetlift/schemas"
)

// The JSON Schema files in package schemas are what editors
// (yaml-language-server), CI linters and any other JSON Schema 2020-12
// validator check definitions with. They are generated from the CUE
// schema and must agree with it: everything fleetlift accepts they
// accept, and what they reject fleetlift rejects, for the same reason.
// They state every constraint on one value (types, bounds, patterns,
// enums, required and unknown fields) and the cross-field checks that
// only test fields (the CUE schema's comprehensions whose conditions
// read no hidden field and yield errors: one of two fields, a field only
// with another's value). The checks that compute (names unique in a
// list, a duration's length: hidden fields that are not errors, and the
// comprehensions that read them), the checks across files (ids unique)
// and the loader's limits are fleetlift's alone.
//
// The tests below compare the JSON Schema with the CUE schema stripped
// of the checks that compute ("structural"): on the examples, the
// template, the README's definitions, every invalid input and random
// mutations of them, both must give the same verdict.

// jsonSchemas compiles the generated files with a 2020-12 validator, as
// an editor loads them: by their $id, fetching nothing. The keys are the
// kinds they describe.
func jsonSchemas(t testing.TB) map[Kind]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.UseLoader(noFetch{})
	out := map[Kind]*jsonschema.Schema{}
	for _, f := range schemas.Files() {
		b, err := fs.ReadFile(schemas.FS, f.Name)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		if id, _ := doc.(map[string]any)["$id"].(string); id != schemas.ID(f.Name) {
			t.Fatalf("%s: $id %q, want %q", f.Name, id, schemas.ID(f.Name))
		}
		if err := c.AddResource(schemas.ID(f.Name), doc); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
	}
	for _, f := range schemas.Files() {
		s, err := c.Compile(schemas.ID(f.Name))
		if err != nil {
			t.Fatalf("%s is not a valid JSON Schema 2020-12: %v", f.Name, err)
		}
		out[Kind(f.Kind)] = s
	}
	return out
}

type noFetch struct{}

func (noFetch) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: the schemas must be self-contained", url)
}

// structural is the CUE schema without the checks that compute.
type structural struct {
	ctx  *cue.Context
	defs map[Kind]cue.Value
}

func newStructural(t testing.TB) *structural {
	t.Helper()
	src, err := fs.ReadFile(schemas.FS, schemas.CUEFile)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(schemas.CUEFile, src)
	if err != nil {
		t.Fatal(err)
	}
	astutil.Apply(f, func(c astutil.Cursor) bool {
		switch n := c.Node().(type) {
		case *ast.Comprehension:
			if readsHidden(n) {
				c.Delete()
				return false
			}
		case *ast.Field:
			if _, top := c.Parent().Node().(*ast.File); top {
				return true
			}
			if name, _, _ := ast.LabelName(n.Label); strings.HasPrefix(name, "_") && !isErrorCall(n.Value) {
				c.Delete()
				return false
			}
		case *ast.ImportDecl:
			// list and time are only used by the checks removed.
			n.Specs = slices.DeleteFunc(n.Specs, func(s *ast.ImportSpec) bool { return s.Path.Value == `"list"` || s.Path.Value == `"time"` })
		}
		return true
	}, nil)
	ctx := cuecontext.New()
	v := ctx.BuildFile(f)
	if err := v.Err(); err != nil {
		t.Fatalf("the schema without the checks that compute: %v", err)
	}
	s := &structural{ctx: ctx, defs: map[Kind]cue.Value{}}
	for _, k := range schemas.Files() {
		s.defs[Kind(k.Kind)] = v.LookupPath(cue.ParsePath(k.Definition))
	}
	return s
}

// readsHidden reports whether the clauses of comprehension n refer to a
// hidden field: a check that computes (a duration's length).
func readsHidden(n *ast.Comprehension) bool {
	found := false
	for _, cl := range n.Clauses {
		ast.Walk(cl, func(x ast.Node) bool {
			if id, ok := x.(*ast.Ident); ok && strings.HasPrefix(id.Name, "_") && id.Name != "_" {
				found = true
			}
			return !found
		}, nil)
	}
	return found
}

// isErrorCall reports whether e is error(...): a check's verdict, which
// the JSON Schema states when its conditions test only fields.
func isErrorCall(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == "error"
}

// document is one YAML document as data: CUE's value and the JSON a
// JSON Schema validator gets, and the kind of schema that applies.
type document struct {
	data cue.Value
	json any
	kind Kind
	// blurred: the document holds a value CUE tells apart and JSON
	// does not: a float with an integral value (1.0, !!float 1) where an
	// integer belongs, or bytes (!!binary) where a string does.
	blurred bool
}

// errNotData is a file that is not data: a YAML syntax error, a
// duplicate key, an alias that expands too far. Editors mark those as
// errors of the YAML, before any schema.
var errNotData = errors.New("not YAML data")

// documents reads src as the documents an editor checks, each against
// the schema of its kind: Config and Approval files against theirs, a
// definition against the Campaign schema when its kind says Campaign and
// against the Task schema otherwise (kind defaults to Task). Empty
// documents are left out: there is nothing to check. A .cue file is
// evaluated on its own, as the data it defines.
func (s *structural) documents(name string, src []byte, as Kind) (docs []document, err error) {
	if blankRe.Match(src) {
		return nil, nil
	}
	defer func() {
		// CUE's YAML decoder panics on some malformed input, as the
		// loader knows (evaluate).
		if r := recover(); r != nil {
			docs, err = nil, fmt.Errorf("%w: %v", errNotData, r)
		}
	}()
	var v cue.Value
	switch path.Ext(name) {
	case ".cue":
		f, err := parser.ParseFile(name, src)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotData, err)
		}
		v = s.ctx.BuildFile(f)
	default:
		f, err := cueyaml.Extract(name, src)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotData, err)
		}
		v = s.ctx.BuildFile(f)
	}
	if err := v.Validate(cue.Concrete(true)); err != nil {
		return nil, fmt.Errorf("%w: %v", errNotData, err)
	}
	values := []cue.Value{v}
	if v.IncompleteKind() == cue.ListKind && path.Ext(name) != ".cue" && docSeparatorRe.Match(src) {
		values = nil
		it, _ := v.List()
		for it.Next() {
			values = append(values, it.Value())
		}
	}
	var out []document
	for _, d := range values {
		if d.IncompleteKind() == cue.NullKind {
			continue
		}
		raw, err := d.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotData, err)
		}
		j, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNotData, err)
		}
		k := as
		if as == KindTask || as == KindCampaign {
			k = KindTask
			if m, ok := j.(map[string]any); ok && m["kind"] == "Campaign" {
				k = KindCampaign
			}
		}
		out = append(out, document{data: d, json: j, kind: k, blurred: blurs(d)})
	}
	return out, nil
}

// accepts is the structural schema's verdict on d (its checks' errors,
// in hidden fields, included).
func (s *structural) accepts(d document) error {
	return s.defs[d.kind].Unify(d.data).Validate(cue.Concrete(true), cue.All())
}

// blurs reports whether v holds a value CUE tells apart and JSON does
// not: bytes, or a float with an integral value. CUE's JSON writes some
// of those floats as integers (10000000e0 as 10000000), so it is told
// from the value, not from the JSON.
func blurs(v cue.Value) bool {
	switch v.IncompleteKind() {
	case cue.BytesKind:
		return true
	case cue.FloatKind:
		d, err := v.Decimal()
		if err != nil {
			return false
		}
		r, ok := new(big.Rat).SetString(d.String())
		return ok && r.IsInt()
	case cue.StructKind:
		it, _ := v.Fields()
		for it != nil && it.Next() {
			if blurs(it.Value()) {
				return true
			}
		}
	case cue.ListKind:
		it, _ := v.List()
		for it.Next() {
			if blurs(it.Value()) {
				return true
			}
		}
	}
	return false
}

// schemaInput is a file and the kind of schema its documents are
// checked against (KindTask for definitions of either kind).
type schemaInput struct {
	Input
	as Kind
}

func (in schemaInput) eval() Input {
	i := in.Input
	i.Config, i.Approval = in.as == KindConfig, in.as == KindApproval
	return i
}

// validInputs are the examples, the template, the definitions and
// approval records in the READMEs and the spec tests' complete
// definitions: everything a user copies from.
func validInputs(t *testing.T) []schemaInput {
	t.Helper()
	var in []schemaInput
	for _, dir := range []string{"../../examples", "../../campaigns-template"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".github" || d.Name() == ".gitea" {
					// CI workflows, not definitions.
					return filepath.SkipDir
				}
				return nil
			}
			as := KindTask
			switch {
			case filepath.Base(p) == "fleetlift.yaml":
				as = KindConfig
			case strings.Contains(p, "/approvals/"):
				as = KindApproval
			}
			switch filepath.Ext(p) {
			case ".yaml", ".yml", ".cue":
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				in = append(in, schemaInput{Input{Name: p, Data: b}, as})
			case ".md":
				for _, block := range yamlBlocks(t, p) {
					as := KindTask
					if strings.Contains(p, "/approvals/") {
						as = KindApproval
					}
					in = append(in, schemaInput{block, as})
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	for _, f := range append([]string{"../../README.md"}, docs...) {
		for _, b := range yamlBlocks(t, f) {
			as := KindTask
			if bytes.Contains(b.Data, []byte("\nkind: Config\n")) {
				// A repository config the docs show.
				as = KindConfig
			}
			in = append(in, schemaInput{b, as})
		}
	}
	for i, s := range []string{agenticTaskSeed, kitchenSinkTask, kitchenSinkCampaign, reportTask, groupsTask} {
		in = append(in, schemaInput{Input{Name: fmt.Sprintf("spec-test-%d.yaml", i), Data: []byte(s)}, KindTask})
	}
	return in
}

const agenticTaskSeed = `version: 1
id: t
title: T
repositories:
  - url: https://github.com/acme/svc.git
execution:
  agentic:
    prompt: migrate
`

// yamlBlocks returns the ```yaml blocks of a Markdown file, each named
// after the file and the line it starts on.
func yamlBlocks(t *testing.T, file string) []Input {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Input
	var cur *bytes.Buffer
	start := 0
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```yaml":
			cur, start = &bytes.Buffer{}, n+1
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, Input{Name: fmt.Sprintf("%s:%d.yaml", file, start), Data: cur.Bytes()})
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJSONSchemaAcceptsValidInputs: every example, template file and
// README definition, which fleetlift accepts, the JSON Schema accepts:
// an editor marks none of them.
func TestJSONSchemaAcceptsValidInputs(t *testing.T) {
	js := jsonSchemas(t)
	st := newStructural(t)
	c, err := newCompiler()
	if err != nil {
		t.Fatal(err)
	}
	inputs := validInputs(t)
	if len(inputs) < 20 {
		t.Fatalf("only %d valid inputs found", len(inputs))
	}
	kinds := map[Kind]int{}
	for _, in := range inputs {
		if out := c.evaluate(in.eval()); len(out.Errors) > 0 {
			t.Errorf("%s: fleetlift refuses it: %v", in.Name, Errors(out.Errors))
			continue
		}
		docs, err := st.documents(in.Name, in.Data, in.as)
		if err != nil || len(docs) != 1 {
			t.Errorf("%s: %d documents: %v", in.Name, len(docs), err)
			continue
		}
		kinds[docs[0].kind]++
		if err := js[docs[0].kind].Validate(docs[0].json); err != nil {
			t.Errorf("%s: the JSON Schema refuses what fleetlift accepts:\n%v", in.Name, err)
		}
	}
	for _, k := range []Kind{KindTask, KindCampaign, KindConfig, KindApproval} {
		if kinds[k] == 0 {
			t.Errorf("no valid %s among the inputs", k)
		}
	}
}

// The classes of invalid inputs, by what rejects them.
const (
	// classSchema: the JSON Schema rejects it too, so editors mark it.
	classSchema = "schema"
	// classSyntax: the file is not YAML data (a syntax error, a
	// duplicate key, an alias that expands too far): editors mark the
	// YAML itself.
	classSyntax = "syntax"
	// classFleetlift: only fleetlift can judge it: a cross-field or
	// cross-file check, a CUE program, a limit of the loader.
	classFleetlift = "fleetlift"
)

// schemaClassesFile records, for every invalid input, which class it is
// in and, for those only fleetlift judges, why.
const schemaClassesFile = "../../testdata/jsonschema-classes.txt"

// TestJSONSchemaClassifiesInvalidInputs: every invalid input
// (testdata/invalid, testdata/invalid-approvals) is rejected by the JSON
// Schema too, or is not YAML data, or is one only fleetlift can judge,
// as testdata/jsonschema-classes.txt records with the reason. A change
// of class fails: a JSON Schema that stops rejecting what it rejected,
// or starts rejecting what only fleetlift should, is a change someone
// must mean.
func TestJSONSchemaClassifiesInvalidInputs(t *testing.T) {
	js := jsonSchemas(t)
	st := newStructural(t)
	want := readSchemaClasses(t)
	got := map[string]string{}
	for _, root := range []struct {
		dir string
		as  Kind
	}{{invalidRootDir, KindTask}, {"../../testdata/invalid-approvals", KindApproval}} {
		cases, err := os.ReadDir(root.dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range cases {
			if !cs.IsDir() {
				continue
			}
			name := filepath.Base(root.dir) + "/" + cs.Name()
			got[name] = classify(t, js, st, filepath.Join(root.dir, cs.Name()), root.as)
		}
	}
	for name, class := range got {
		w, ok := want[name]
		switch {
		case !ok:
			t.Errorf("%s is not in %s: add\n%s", name, schemaClassesFile, classLine(name, class, "why only fleetlift can judge it"))
		case w.class != class:
			t.Errorf("%s: the JSON Schema classes it %s, %s says %s", name, class, schemaClassesFile, w.class)
		case class == classFleetlift && w.reason == "":
			t.Errorf("%s: %s must say why only fleetlift can judge it", name, schemaClassesFile)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: %s lists a case that does not exist", name, schemaClassesFile)
		}
	}
}

// invalidRootDir is testdata/invalid, as the package's tests reach it.
const invalidRootDir = "../../testdata/invalid"

// classify says who rejects the invalid case in dir: the JSON Schema
// when it rejects one of the case's YAML documents; syntax when one of
// them is not data; fleetlift otherwise (CUE files are programs, not
// what an editor's YAML schema checks). Whatever the class, the JSON
// Schema and the structural CUE schema agree on every document.
func classify(t *testing.T, js map[Kind]*jsonschema.Schema, st *structural, dir string, as Kind) string {
	t.Helper()
	class := classFleetlift
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		docs, err := st.documents(p, b, as)
		if err != nil {
			if class == classFleetlift {
				class = classSyntax
			}
			return nil
		}
		for _, doc := range docs {
			jerr := js[doc.kind].Validate(doc.json)
			compareVerdicts(t, p, b, doc, jerr, st.accepts(doc))
			if jerr != nil {
				class = classSchema
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return class
}

type schemaClass struct{ class, reason string }

func readSchemaClasses(t *testing.T) map[string]schemaClass {
	t.Helper()
	b, err := os.ReadFile(schemaClassesFile)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schemaClass{}
	for n, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || !slices.Contains([]string{classSchema, classSyntax, classFleetlift}, f[1]) {
			t.Fatalf("%s:%d: want <case> schema|syntax|fleetlift [reason], got %q", schemaClassesFile, n+1, line)
		}
		out[f[0]] = schemaClass{f[1], strings.Join(f[2:], " ")}
	}
	return out
}

func classLine(name, class, reason string) string {
	if class != classFleetlift {
		reason = ""
	}
	return strings.TrimSpace(fmt.Sprintf("%-50s %-9s %s", name, class, reason))
}

// compareVerdicts fails t when the JSON Schema (jerr) and the structural
// CUE schema (cerr) disagree on doc. The known difference is a value
// JSON cannot tell apart (doc.blurred): 1.0 where an integer belongs,
// !!binary where a string does; CUE refuses those, a JSON Schema cannot.
func compareVerdicts(t *testing.T, name string, src []byte, doc document, jerr, cerr error) {
	t.Helper()
	switch {
	case jerr == nil && cerr != nil && doc.blurred:
	case jerr == nil && cerr != nil:
		t.Errorf("%s: the JSON Schema (%s) accepts what the CUE schema refuses:\n%v\ninput:\n%s", name, doc.kind, cerr, src)
	case jerr != nil && cerr == nil:
		t.Errorf("%s: the JSON Schema (%s) refuses what the CUE schema accepts:\n%v\ninput:\n%s", name, doc.kind, jerr, src)
	}
}

// agreementSeeds are the definitions, configs and approval records the
// mutations start from.
func agreementSeeds(t *testing.T) []schemaInput {
	t.Helper()
	var in []schemaInput
	for _, d := range seedInputs(t) {
		in = append(in, schemaInput{d, KindTask})
	}
	for _, v := range validInputs(t) {
		if v.as == KindConfig || v.as == KindApproval {
			in = append(in, v)
		}
	}
	_ = filepath.WalkDir("../../testdata/invalid-approvals", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".yaml" {
			if b, err := os.ReadFile(p); err == nil {
				in = append(in, schemaInput{Input{Name: p, Data: b}, KindApproval})
			}
		}
		return nil
	})
	return in
}

// TestJSONSchemaAgreesWithCUE runs the JSON Schema and the CUE schema
// without the checks that compute over the seeds and random mutations of
// them (mutateYAML): they must reach the same
// verdict on every document, and whatever fleetlift accepts the JSON
// Schema must accept.
func TestJSONSchemaAgreesWithCUE(t *testing.T) {
	js := jsonSchemas(t)
	seeds := agreementSeeds(t)
	inputs := slices.Clone(seeds)
	rng := rand.New(rand.NewPCG(7, 8))
	seen := map[string]bool{}
	for len(inputs) < len(seeds)+*schemaVariants {
		base := seeds[rng.IntN(len(seeds))]
		data, ok := mutateYAML(rng, base.Data)
		if !ok || seen[string(data)] {
			continue
		}
		seen[string(data)] = true
		inputs = append(inputs, schemaInput{Input{Name: base.Name, Data: data}, base.as})
	}
	var st *structural
	var c *compiler
	var accepted, rejected, blurred int
	for i, in := range inputs {
		if i%recycleAfter == 0 {
			st = newStructural(t)
			var err error
			if c, err = newCompiler(); err != nil {
				t.Fatal(err)
			}
		}
		docs, err := st.documents(in.Name, in.Data, in.as)
		if err != nil {
			continue
		}
		for _, doc := range docs {
			jerr, cerr := js[doc.kind].Validate(doc.json), st.accepts(doc)
			compareVerdicts(t, in.Name, in.Data, doc, jerr, cerr)
			switch {
			case jerr == nil && cerr == nil:
				accepted++
			case jerr != nil && cerr != nil:
				rejected++
			default:
				blurred++
			}
			if jerr != nil && len(docs) == 1 {
				if out := c.evaluate(in.eval()); len(out.Errors) == 0 {
					t.Errorf("%s: fleetlift accepts what the JSON Schema refuses:\n%v\ninput:\n%s", in.Name, jerr, in.Data)
				}
			}
		}
	}
	t.Logf("%d inputs: %d documents both accept, %d both refuse, %d only CUE refuses (1.0 for an integer, !!binary for a string)", len(inputs), accepted, rejected, blurred)
	if accepted < 100 || rejected < 100 {
		t.Errorf("too few verdicts to compare: %d accepted, %d refused", accepted, rejected)
	}
}

// FuzzJSONSchema compares the JSON Schema with the CUE schema without
// the checks that compute on arbitrary definition files.
func FuzzJSONSchema(f *testing.F) {
	for _, in := range seedInputs(f) {
		f.Add(in.Data)
	}
	js := jsonSchemas(f)
	st := newStructural(f)
	used := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		if used++; used > recycleAfter {
			st, used = newStructural(t), 0
		}
		docs, err := st.documents("f.yaml", data, KindTask)
		if err != nil {
			return
		}
		for _, doc := range docs {
			compareVerdicts(t, "f.yaml", data, doc, js[doc.kind].Validate(doc.json), st.accepts(doc))
		}
	})
}

// TestJSONSchemaCrossFieldChecks: each cross-field check the JSON Schema
// states refuses what fleetlift refuses, and accepts its valid twin, so
// an editor marks these mistakes as fleetlift does (one case per rule,
// the config's among them, which testdata/invalid does not hold).
func TestJSONSchemaCrossFieldChecks(t *testing.T) {
	const (
		task     = "version: 1\nid: t\ntitle: T\n"
		agentic  = "execution: {agentic: {prompt: p}}\n"
		repos    = "repositories: [{url: https://github.com/acme/a.git}]\n"
		targets  = "targets: [{url: https://github.com/acme/a.git}]\n"
		recipe   = "transformation: {url: https://github.com/acme/recipe.git}\n"
		groups   = "groups: [{name: g, repositories: [{url: https://github.com/acme/b.git}]}]\n"
		campaign = "version: 1\nkind: Campaign\nid: c\ntitle: C\n"
		record   = "version: 1\nkind: Approval\nby: alice\n"
		digest   = "result_digest: sha256:9f2c4e1a7b3d5f60182a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d\n"
	)
	js := jsonSchemas(t)
	st := newStructural(t)
	c, err := newCompiler()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		as    Kind
		doc   string
		valid bool
	}{
		{"execution agentic", KindTask, task + repos + agentic, true},
		{"execution deterministic", KindTask, task + repos + "execution: {deterministic: {image: alpine, command: [make]}}\n", true},
		{"deterministic without command", KindTask, task + repos + "execution: {deterministic: {image: alpine}}\n", false},
		{"deterministic with args only", KindTask, task + repos + "execution: {deterministic: {image: alpine, args: [go, mod, tidy]}}\n", true},
		{"execution both", KindTask, task + repos + "execution: {agentic: {prompt: p}, deterministic: {image: alpine, command: [make]}}\n", false},
		{"execution neither", KindTask, task + repos + "execution: {}\n", false},
		{"campaign template execution neither", KindTask, campaign + repos + "template: {execution: {}}\n", false},
		{"for_each in report", KindTask, task + repos + agentic + "mode: report\nfor_each: [{name: a, context: b}]\n", true},
		{"for_each in transform", KindTask, task + repos + agentic + "mode: transform\nfor_each: [{name: a, context: b}]\n", false},
		{"for_each, mode left out", KindTask, task + repos + agentic + "for_each: [{name: a, context: b}]\n", false},
		{"pull_request in transform", KindTask, task + repos + agentic + "pull_request: {branch_prefix: b, title: t}\n", true},
		{"pull_request in report", KindTask, task + repos + agentic + "mode: report\npull_request: {branch_prefix: b, title: t}\n", false},
		{"no repositories", KindTask, task + agentic, false},
		{"groups", KindTask, task + groups + agentic, true},
		{"transformation with targets", KindTask, task + recipe + targets + agentic, true},
		{"repositories and targets", KindTask, task + repos + recipe + targets + agentic, false},
		{"groups and repositories", KindTask, task + groups + repos + agentic, false},
		{"groups and targets", KindTask, task + groups + recipe + targets + agentic, false},
		{"targets without transformation", KindTask, task + targets + agentic, false},
		{"transformation without targets", KindTask, task + recipe + agentic, false},
		{"campaign repositories", KindTask, campaign + repos + "template: {" + strings.TrimSuffix(agentic, "\n") + "}\n", true},
		{"campaign neither", KindTask, campaign + "template: {" + strings.TrimSuffix(agentic, "\n") + "}\n", false},
		{"campaign repositories and groups", KindTask, campaign + repos + groups + "template: {" + strings.TrimSuffix(agentic, "\n") + "}\n", false},
		{"config reviewed merge with gitea", KindConfig, "version: 1\nwatch: {require_reviewed_merge: true}\nforge: {type: gitea}\n", true},
		{"config reviewed merge off, local", KindConfig, "version: 1\nwatch: {require_reviewed_merge: false}\n", true},
		{"config reviewed merge, local by default", KindConfig, "version: 1\nwatch: {require_reviewed_merge: true}\n", false},
		{"config reviewed merge, local", KindConfig, "version: 1\nwatch: {require_reviewed_merge: true}\nforge: {type: local}\n", false},
		{"config forge name", KindConfig, "version: 1\nforge: {type: github, name: main}\n", true},
		{"config local forge name", KindConfig, "version: 1\nforge: {name: main}\n", false},
		{"config local forge url", KindConfig, "version: 1\nforge: {type: local, url: https://git.example.com}\n", false},
		{"config token_env", KindConfig, "version: 1\nforge: {type: github, token_env: GITHUB_TOKEN}\n", false},
		{"approve", KindApproval, record + "target: c/a\naction: approve\n" + digest, true},
		{"approve without digest", KindApproval, record + "target: c/a\naction: approve\n", false},
		{"steer", KindApproval, record + "target: c/a\naction: steer\nprompt: p\n" + digest, true},
		{"steer without prompt", KindApproval, record + "target: c/a\naction: steer\n" + digest, false},
		{"prompt on reject", KindApproval, record + "target: c/a\naction: reject\nprompt: p\n" + digest, false},
		{"continue", KindApproval, record + "target: c\naction: continue\ngeneration: 2\n", true},
		{"continue without generation", KindApproval, record + "target: c\naction: continue\n", false},
		{"abort one repository", KindApproval, record + "target: c/a\naction: abort\ngeneration: 2\n", false},
		{"retry one repository", KindApproval, record + "target: c/a\naction: retry\ngeneration: 2\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := schemaInput{Input{Name: "f.yaml", Data: []byte(tc.doc)}, tc.as}
			docs, err := st.documents(in.Name, in.Data, in.as)
			if err != nil || len(docs) != 1 {
				t.Fatalf("%d documents: %v", len(docs), err)
			}
			jerr := js[docs[0].kind].Validate(docs[0].json)
			out := c.evaluate(in.eval())
			if got := jerr == nil; got != tc.valid {
				t.Errorf("the JSON Schema accepts it: %v, want %v (%v)", got, tc.valid, jerr)
			}
			if got := len(out.Errors) == 0; got != tc.valid {
				t.Errorf("fleetlift accepts it: %v, want %v (%v)", got, tc.valid, Errors(out.Errors))
			}
		})
	}
}
