package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/ast/astutil"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// converter translates the definitions of one CUE file into JSON Schema.
//
// It reads the file's syntax, so that what a definition says (a bound on
// a defaulted field, an embedded definition, an open struct) reaches the
// schema as written, and uses CUE's evaluator only to compute strings
// and to ask whether a default is one of a disjunction's other values.
// It translates what is a property of one value: types, bounds,
// patterns, enums, defaults, required and unknown fields. Comprehensions
// are the schema's cross-field checks: one whose if clauses test fields
// (present, absent, equal to a literal, strings.Contains) and that
// yields an error becomes a rule of its struct's allOf (rules.go); one
// whose clauses read a hidden field, and hidden fields that are not
// errors, compute (names unique in a list, a duration's length), which
// JSON Schema cannot, and are left to fleetlift. Any other construct is
// an error naming its position, so that a change to the CUE schema
// never silently weakens the JSON Schema.
type converter struct {
	ctx    *cue.Context
	root   cue.Value
	defs   map[string]*ast.Field // top-level definitions, by name (#Task)
	hidden map[string]ast.Expr   // top-level hidden fields (_idPattern)
	done   map[string]*Schema    // definitions the document being built has translated
	used   map[string]bool       // definitions the document being built refers to
}

func newConverter(filename string, src []byte) (*converter, error) {
	f, err := parser.ParseFile(filename, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	ctx := cuecontext.New()
	root := ctx.BuildFile(f)
	if err := root.Err(); err != nil {
		return nil, fmt.Errorf("compile %s: %w", filename, err)
	}
	c := &converter{ctx: ctx, root: root, defs: map[string]*ast.Field{}, hidden: map[string]ast.Expr{}}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.Field)
		if !ok {
			continue
		}
		name, _, err := ast.LabelName(fd.Label)
		if err != nil {
			return nil, c.errorf(fd, "label: %v", err)
		}
		switch {
		case strings.HasPrefix(name, "#"):
			c.defs[name] = fd
		case strings.HasPrefix(name, "_"):
			c.hidden[name] = fd.Value
		}
	}
	return c, nil
}

func (c *converter) errorf(n ast.Node, format string, args ...any) error {
	return fmt.Errorf("%s: %s", n.Pos(), fmt.Sprintf(format, args...))
}

// Document returns the JSON Schema of definition def, with the
// definitions it refers to under $defs.
func (c *converter) Document(def string) (*Schema, error) {
	c.used, c.done = map[string]bool{}, map[string]*Schema{}
	fd, ok := c.defs[def]
	if !ok {
		return nil, fmt.Errorf("no definition %s", def)
	}
	root, err := c.expr(fd.Value)
	if err != nil {
		return nil, err
	}
	root = root.clone()
	root.Description = doc(fd)
	// Every definition the document refers to, and those they refer to.
	for {
		var todo []string
		for name := range c.used {
			if c.done[name] == nil {
				todo = append(todo, name)
			}
		}
		if len(todo) == 0 {
			break
		}
		slices.Sort(todo)
		for _, name := range todo {
			if _, err := c.definition(name); err != nil {
				return nil, err
			}
		}
	}
	var names []string
	for name := range c.used {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		root.Defs = append(root.Defs, Property{Name: strings.TrimPrefix(name, "#"), Schema: c.done[name]})
	}
	return root, nil
}

// definition translates the top-level definition name once.
func (c *converter) definition(name string) (*Schema, error) {
	if s := c.done[name]; s != nil {
		return s, nil
	}
	fd := c.defs[name]
	s, err := c.expr(fd.Value)
	if err != nil {
		return nil, err
	}
	s = s.clone()
	s.Description = doc(fd)
	c.done[name] = s
	return s, nil
}

// ref refers to the top-level definition name.
func (c *converter) ref(n ast.Node, name string) (*Schema, error) {
	if _, ok := c.defs[name]; !ok {
		return nil, c.errorf(n, "unknown definition %s", name)
	}
	c.used[name] = true
	return &Schema{Ref: "#/$defs/" + strings.TrimPrefix(name, "#")}, nil
}

// expr translates the constraint e.
func (c *converter) expr(e ast.Expr) (*Schema, error) {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return c.expr(x.X)
	case *ast.Ident:
		switch x.Name {
		case "_":
			return boolSchema(true), nil
		case "string":
			return &Schema{Type: "string"}, nil
		case "int":
			return &Schema{Type: "integer"}, nil
		case "number", "float":
			return &Schema{Type: "number"}, nil
		case "bool":
			return &Schema{Type: "boolean"}, nil
		case "null":
			return &Schema{Type: "null"}, nil
		}
		if strings.HasPrefix(x.Name, "#") {
			return c.ref(x, x.Name)
		}
		return nil, c.errorf(x, "reference %s: only definitions (#Name) and basic types translate", x.Name)
	case *ast.BasicLit, *ast.Interpolation:
		v, err := c.literal(x)
		if err != nil {
			return nil, err
		}
		return &Schema{Const: &Value{v}}, nil
	case *ast.UnaryExpr:
		return c.unary(x)
	case *ast.BinaryExpr:
		switch x.Op {
		case token.AND:
			return c.conjunction(x, flatten(x, token.AND))
		case token.OR:
			return c.disjunction(x, flatten(x, token.OR))
		}
		return nil, c.errorf(x, "operator %s does not translate", x.Op)
	case *ast.StructLit:
		return c.object([]ast.Expr{x})
	case *ast.ListLit:
		return c.list(x)
	case *ast.CallExpr:
		return c.call(x)
	}
	return nil, c.errorf(e, "%T does not translate", e)
}

// flatten lists the operands of a chain of op.
func flatten(e ast.Expr, op token.Token) []ast.Expr {
	for {
		p, ok := e.(*ast.ParenExpr)
		if !ok {
			break
		}
		e = p.X
	}
	if b, ok := e.(*ast.BinaryExpr); ok && b.Op == op {
		return append(flatten(b.X, op), flatten(b.Y, op)...)
	}
	return []ast.Expr{e}
}

func (c *converter) unary(x *ast.UnaryExpr) (*Schema, error) {
	switch x.Op {
	case token.MAT, token.NMAT:
		v, err := c.literal(x.X)
		if err != nil {
			return nil, err
		}
		re, ok := v.(string)
		if !ok {
			return nil, c.errorf(x, "%s needs a string", x.Op)
		}
		if x.Op == token.MAT {
			return &Schema{Type: "string", Pattern: re}, nil
		}
		return &Schema{Type: "string", Not: &Schema{Pattern: re}}, nil
	case token.GEQ, token.LEQ, token.GTR, token.LSS:
		v, err := c.literal(x.X)
		if err != nil {
			return nil, err
		}
		n, ok := v.(json.Number)
		if !ok {
			return nil, c.errorf(x, "%s needs a number", x.Op)
		}
		s := &Schema{Type: "number"}
		switch x.Op {
		case token.GEQ:
			s.Minimum = &n
		case token.LEQ:
			s.Maximum = &n
		case token.GTR:
			s.ExclMinimum = &n
		case token.LSS:
			s.ExclMaximum = &n
		}
		return s, nil
	case token.MUL:
		return nil, c.errorf(x, "a default (*) outside a disjunction")
	}
	return nil, c.errorf(x, "operator %s does not translate", x.Op)
}

func (c *converter) call(x *ast.CallExpr) (*Schema, error) {
	fn, err := format.Node(x.Fun)
	if err != nil {
		return nil, err
	}
	if len(x.Args) != 1 {
		return nil, c.errorf(x, "%s: one argument expected", fn)
	}
	v, err := c.literal(x.Args[0])
	if err != nil {
		return nil, err
	}
	n, ok := v.(json.Number)
	if !ok {
		return nil, c.errorf(x, "%s needs a number", fn)
	}
	i, err := n.Int64()
	if err != nil {
		return nil, c.errorf(x, "%s: %v", fn, err)
	}
	switch string(fn) {
	case "strings.MinRunes":
		// JSON Schema counts code points, as MinRunes counts runes.
		return &Schema{Type: "string", MinLength: &i}, nil
	case "strings.MaxRunes":
		return &Schema{Type: "string", MaxLength: &i}, nil
	}
	return nil, c.errorf(x, "%s does not translate", fn)
}

// literal evaluates a literal or an interpolation (of the file's hidden
// strings) to its JSON value: string, json.Number, bool or nil.
func (c *converter) literal(e ast.Expr) (any, error) {
	switch x := e.(type) {
	case *ast.BasicLit:
		switch x.Kind {
		case token.STRING:
			s, err := literal.Unquote(x.Value)
			if err != nil {
				return nil, c.errorf(x, "%v", err)
			}
			return s, nil
		case token.INT, token.FLOAT:
			v := c.ctx.BuildExpr(x)
			if v.Err() != nil {
				return nil, c.errorf(x, "%v", v.Err())
			}
			b, err := v.MarshalJSON()
			if err != nil {
				return nil, c.errorf(x, "%v", err)
			}
			return json.Number(b), nil
		case token.TRUE:
			return true, nil
		case token.FALSE:
			return false, nil
		case token.NULL:
			return nil, nil
		}
	case *ast.Interpolation:
		v, err := c.eval(x)
		if err != nil {
			return nil, err
		}
		s, err := v.String()
		if err != nil {
			return nil, c.errorf(x, "%v", err)
		}
		return s, nil
	}
	return nil, c.errorf(e, "a literal is expected, not %T", e)
}

// eval evaluates e in the scope of the file: references to definitions
// resolve there, those to the file's hidden fields are replaced by their
// values.
func (c *converter) eval(e ast.Expr) (cue.Value, error) {
	b, err := format.Node(e)
	if err != nil {
		return cue.Value{}, err
	}
	x, err := parser.ParseExpr("expr", b)
	if err != nil {
		return cue.Value{}, c.errorf(e, "%v", err)
	}
	var missing string
	x = astutil.Apply(x, func(cur astutil.Cursor) bool {
		if id, ok := cur.Node().(*ast.Ident); ok && strings.HasPrefix(id.Name, "_") && id.Name != "_" {
			v, ok := c.hidden[id.Name]
			if !ok {
				missing = id.Name
				return false
			}
			cur.Replace(&ast.ParenExpr{X: v})
		}
		return true
	}, nil).(ast.Expr)
	if missing != "" {
		return cue.Value{}, c.errorf(e, "unknown hidden field %s", missing)
	}
	v := c.ctx.BuildExpr(x, cue.Scope(c.root), cue.InferBuiltins(true))
	if v.Err() != nil {
		return cue.Value{}, c.errorf(e, "%v", v.Err())
	}
	return v, nil
}

// disjunction translates a | b | ...: an enum when every branch is a
// constant; otherwise the branches that are not constants another
// branch accepts (so "*10 | int & >=1" is the integer, with default 10).
func (c *converter) disjunction(at ast.Node, branches []ast.Expr) (*Schema, error) {
	var def *Value
	hasDefault := false
	type branch struct {
		expr   ast.Expr
		schema *Schema
	}
	var bs []branch
	for _, b := range branches {
		if u, ok := b.(*ast.UnaryExpr); ok && u.Op == token.MUL {
			hasDefault = true
			v, err := c.literal(u.X)
			if err != nil {
				// A computed default, such as require_approval's: the
				// field has one, the schema cannot say which. Its value
				// must be one of the other branches'.
				continue
			}
			def = &Value{v}
			b = u.X
		}
		s, err := c.expr(b)
		if err != nil {
			return nil, err
		}
		bs = append(bs, branch{b, s})
	}
	if len(bs) == 0 {
		return nil, c.errorf(at, "a disjunction of computed defaults only")
	}
	var out *Schema
	allConst := true
	for _, b := range bs {
		allConst = allConst && b.schema.Const != nil
	}
	switch {
	case allConst:
		var enum []Value
		for _, b := range bs {
			if !slices.ContainsFunc(enum, func(v Value) bool { return reflect.DeepEqual(v, *b.schema.Const) }) {
				enum = append(enum, *b.schema.Const)
			}
		}
		out = &Schema{Enum: enum}
		if len(enum) == 1 {
			out = &Schema{Const: &enum[0]}
		}
	default:
		// Drop the constants another branch accepts.
		exprs := make([]ast.Expr, len(bs))
		for i, b := range bs {
			exprs[i] = b.expr
		}
		var keep []*Schema
		for i, b := range bs {
			if b.schema.Const != nil && c.acceptedByOther(i, b.schema.Const.V, exprs) {
				continue
			}
			keep = append(keep, b.schema)
		}
		if len(keep) == 1 {
			out = keep[0].clone()
		} else {
			out = &Schema{AnyOf: keep}
		}
	}
	if def != nil {
		out = out.clone()
		out.Default = def
	}
	out.hasDefault = out.hasDefault || hasDefault
	return out, nil
}

// acceptedByOther reports whether a branch other than branches[self]
// accepts v.
func (c *converter) acceptedByOther(self int, v any, branches []ast.Expr) bool {
	for j, e := range branches {
		if j == self {
			continue
		}
		bv, err := c.eval(e)
		if err != nil {
			continue
		}
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				v = i
			} else if f, err := n.Float64(); err == nil {
				v = f
			}
		}
		if bv.Unify(c.ctx.Encode(v)).Validate(cue.Concrete(true)) == nil {
			return true
		}
	}
	return false
}

// isStruct reports whether e is a struct literal or a reference to a
// definition that is one.
func (c *converter) isStruct(e ast.Expr) bool {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return c.isStruct(x.X)
	case *ast.StructLit:
		return true
	case *ast.Ident:
		if fd, ok := c.defs[x.Name]; ok {
			return c.isStruct(fd.Value)
		}
	}
	return false
}

// conjunction translates a & b & ...: structs merge into one object
// (their fields unify); other constraints combine into one schema.
func (c *converter) conjunction(at ast.Node, parts []ast.Expr) (*Schema, error) {
	var structs, others []ast.Expr
	seen := map[string]bool{}
	for _, p := range parts {
		// x & x is x: a field declared alike in a struct and in one it
		// embeds.
		if b, err := format.Node(p); err == nil {
			if seen[string(b)] {
				continue
			}
			seen[string(b)] = true
		}
		if c.isStruct(p) {
			structs = append(structs, p)
		} else {
			others = append(others, p)
		}
	}
	var out *Schema
	if len(structs) > 0 {
		var err error
		if len(structs) == 1 {
			out, err = c.expr(structs[0])
		} else {
			out, err = c.object(structs)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, p := range others {
		s, err := c.expr(p)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = s
			continue
		}
		if out, err = c.and(at, out, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// and is the schema of values both a and b accept.
func (c *converter) and(at ast.Node, a, b *Schema) (*Schema, error) {
	if a.isTrue() {
		return annotate(b, a), nil
	}
	if b.isTrue() {
		return annotate(a, b), nil
	}
	if a.Ref != "" && b.Ref == "" {
		a, b = b, a
	}
	if b.Ref != "" {
		// A reference beside a type its definition has already: the
		// reference, with a's annotations.
		if a.Ref == "" && a.Type != "" && a.Type == c.refType(b.Ref) {
			rest := a.clone()
			rest.Type = ""
			if !rest.validation() {
				return annotate(b, a), nil
			}
		}
		if a.Ref == "" && !a.validation() {
			return annotate(b, a), nil
		}
		// Other constraints go beside the reference through allOf, which
		// every draft reads alike.
		out := a.clone()
		out.AllOf = append(out.AllOf, &Schema{Ref: b.Ref})
		if a.Ref != "" {
			out.Ref = ""
			out.AllOf = append(out.AllOf, &Schema{Ref: a.Ref})
		}
		return annotate(out, b), nil
	}
	out := a.clone()
	switch {
	case out.Type == "" || out.Type == b.Type:
		out.Type = b.Type
	case b.Type == "":
	case out.Type == "number" && b.Type == "integer", out.Type == "integer" && b.Type == "number":
		out.Type = "integer"
	default:
		return nil, c.errorf(at, "conflicting types %s and %s", out.Type, b.Type)
	}
	rest := b.clone()
	rest.Type = ""
	if b.Pattern != "" {
		if out.Pattern == "" {
			out.Pattern = b.Pattern
		} else {
			out.AllOf = append(out.AllOf, &Schema{Pattern: b.Pattern})
		}
		rest.Pattern = ""
	}
	if b.Not != nil {
		if out.Not == nil {
			out.Not = b.Not
		} else {
			out.AllOf = append(out.AllOf, &Schema{Not: b.Not})
		}
		rest.Not = nil
	}
	if b.MinLength != nil {
		if out.MinLength == nil || *b.MinLength > *out.MinLength {
			out.MinLength = b.MinLength
		}
		rest.MinLength = nil
	}
	if b.MaxLength != nil {
		if out.MaxLength == nil || *b.MaxLength < *out.MaxLength {
			out.MaxLength = b.MaxLength
		}
		rest.MaxLength = nil
	}
	out.Minimum, rest.Minimum = tighter(out.Minimum, b.Minimum, 1), nil
	out.Maximum, rest.Maximum = tighter(out.Maximum, b.Maximum, -1), nil
	out.ExclMinimum, rest.ExclMinimum = tighter(out.ExclMinimum, b.ExclMinimum, 1), nil
	out.ExclMaximum, rest.ExclMaximum = tighter(out.ExclMaximum, b.ExclMaximum, -1), nil
	if b.Default != nil {
		out.Default = b.Default
		rest.Default = nil
	}
	if b.Description != "" && out.Description == "" {
		out.Description = b.Description
	}
	rest.Description = ""
	out.hasDefault = out.hasDefault || b.hasDefault
	rest.hasDefault = false
	if rest.validation() {
		out.AllOf = append(out.AllOf, rest)
	}
	return out, nil
}

// tighter returns the tighter of two bounds: the larger for a lower
// bound (dir 1), the smaller for an upper one (dir -1).
func tighter(a, b *json.Number, dir int) *json.Number {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	x, _ := strconv.ParseFloat(string(*a), 64)
	y, _ := strconv.ParseFloat(string(*b), 64)
	if (y-x)*float64(dir) > 0 {
		return b
	}
	return a
}

// annotate returns s with the description and default of from where s
// has none.
func annotate(s, from *Schema) *Schema {
	out := s.clone()
	if out.Description == "" {
		out.Description = from.Description
	}
	if out.Default == nil {
		out.Default = from.Default
	}
	out.hasDefault = out.hasDefault || from.hasDefault
	return out
}

// refType is the type of the definition ref refers to, "" when it has
// none.
func (c *converter) refType(ref string) string {
	name := "#" + strings.TrimPrefix(ref, "#/$defs/")
	fd, ok := c.defs[name]
	if !ok {
		return ""
	}
	used := c.used
	c.used = map[string]bool{}
	defer func() { c.used = used }()
	s, err := c.expr(fd.Value)
	if err != nil {
		return ""
	}
	return s.Type
}

// list translates [a, b, ...c].
func (c *converter) list(x *ast.ListLit) (*Schema, error) {
	s := &Schema{Type: "array"}
	var rest *Schema
	open := false
	for i, e := range x.Elts {
		if el, ok := e.(*ast.Ellipsis); ok {
			if i != len(x.Elts)-1 {
				return nil, c.errorf(el, "... must end the list")
			}
			open = true
			rest = boolSchema(true)
			if el.Type != nil {
				var err error
				if rest, err = c.expr(el.Type); err != nil {
					return nil, err
				}
			}
			continue
		}
		item, err := c.expr(e)
		if err != nil {
			return nil, err
		}
		s.PrefixItems = append(s.PrefixItems, item)
	}
	n := int64(len(s.PrefixItems))
	if n > 0 {
		s.MinItems = &n
	}
	if !open {
		s.MaxItems = &n
		s.Items = boolSchema(false)
		return s, nil
	}
	s.Items = rest
	// [#Repository, ...#Repository]: one schema for every item, and at
	// least one of them.
	same := true
	rb, _ := json.Marshal(rest)
	for _, p := range s.PrefixItems {
		pb, _ := json.Marshal(p)
		same = same && string(pb) == string(rb)
	}
	if same {
		s.PrefixItems = nil
	}
	return s, nil
}

// field is one field of an object, from all the structs that declare it.
type field struct {
	name     string
	values   []ast.Expr
	required bool // marked ! somewhere
	regular  bool // declared as a regular field somewhere
	doc      string
}

// object translates the unification of struct literals (and references
// to struct definitions): every field any of them declares, each the
// unification of its declarations; closed, as every struct within a
// definition is, unless one of them is open (...).
func (c *converter) object(parts []ast.Expr) (*Schema, error) {
	var fields []*field
	byName := map[string]*field{}
	s := &Schema{Type: "object"}
	open := false
	var checks []check
	var add func(e ast.Expr) error
	add = func(e ast.Expr) error {
		switch x := e.(type) {
		case *ast.ParenExpr:
			return add(x.X)
		case *ast.Ident:
			fd, ok := c.defs[x.Name]
			if !ok {
				return c.errorf(x, "%s is not a struct definition", x.Name)
			}
			return add(fd.Value)
		case *ast.StructLit:
			for _, d := range x.Elts {
				switch d := d.(type) {
				case *ast.Field:
					if err := c.addField(d, s, &fields, byName); err != nil {
						return err
					}
				case *ast.EmbedDecl:
					if !c.isStruct(d.Expr) {
						return c.errorf(d, "only struct definitions embed")
					}
					if err := add(d.Expr); err != nil {
						return err
					}
				case *ast.Comprehension:
					cs, err := c.checks(d, nil)
					if err != nil {
						return err
					}
					checks = append(checks, cs...)
				case *ast.Ellipsis:
					open = true
				case *ast.CommentGroup, *ast.Attribute:
				default:
					return c.errorf(d, "%T does not translate", d)
				}
			}
			return nil
		}
		return c.errorf(e, "%T is not a struct", e)
	}
	for _, p := range parts {
		if err := add(p); err != nil {
			return nil, err
		}
	}
	info := map[string]fieldInfo{}
	for _, f := range fields {
		fs, err := c.conjunction(f.values[0], f.values)
		if err != nil {
			return nil, err
		}
		if f.doc != "" {
			fs = fs.clone()
			fs.Description = f.doc
		}
		required := f.required && !f.regular
		if f.regular && !f.required && !fs.hasDefault && fs.Type != "object" && !c.allStructs(f.values) {
			return nil, c.errorf(f.values[0], "field %s is regular without a default: say whether it is required (!) or optional (?)", f.name)
		}
		s.Properties = append(s.Properties, Property{Name: f.name, Schema: fs})
		if required {
			s.Required = append(s.Required, f.name)
		}
		info[f.name] = fieldInfo{schema: fs, required: required}
	}
	rules, err := c.rules(checks, info)
	if err != nil {
		return nil, err
	}
	s.AllOf = append(s.AllOf, rules...)
	if !open && s.AdditionalProperties == nil {
		s.AdditionalProperties = boolSchema(false)
	}
	return s, nil
}

func (c *converter) allStructs(es []ast.Expr) bool {
	for _, e := range es {
		if !c.isStruct(e) {
			return false
		}
	}
	return true
}

// addField adds declaration d to the fields of object s.
func (c *converter) addField(d *ast.Field, s *Schema, fields *[]*field, byName map[string]*field) error {
	if l, ok := d.Label.(*ast.ListLit); ok {
		// A pattern constraint: [=~"re"]: T, or [string]: T.
		if len(l.Elts) != 1 {
			return c.errorf(d, "a pattern constraint has one element")
		}
		v, err := c.expr(d.Value)
		if err != nil {
			return err
		}
		switch p := l.Elts[0].(type) {
		case *ast.UnaryExpr:
			if p.Op != token.MAT {
				return c.errorf(p, "only =~ patterns translate")
			}
			re, err := c.literal(p.X)
			if err != nil {
				return err
			}
			s.PatternProperties = append(s.PatternProperties, Property{Name: re.(string), Schema: v})
		case *ast.Ident:
			if p.Name != "string" {
				return c.errorf(p, "only [string] and [=~re] patterns translate")
			}
			s.AdditionalProperties = v
		default:
			return c.errorf(p, "%T does not translate as a pattern", p)
		}
		return nil
	}
	name, _, err := ast.LabelName(d.Label)
	if err != nil {
		return c.errorf(d, "label: %v", err)
	}
	if strings.HasPrefix(name, "_") {
		// Hidden: a cross-field check or a helper.
		return nil
	}
	if strings.HasPrefix(name, "#") {
		return c.errorf(d, "nested definition %s does not translate", name)
	}
	f := byName[name]
	if f == nil {
		f = &field{name: name}
		byName[name] = f
		*fields = append(*fields, f)
	}
	f.values = append(f.values, d.Value)
	switch d.Constraint {
	case token.NOT:
		f.required = true
	case token.OPTION:
	default:
		f.regular = true
	}
	if f.doc == "" {
		f.doc = doc(d)
	}
	return nil
}

// doc is the doc comment of a declaration, each paragraph on one line:
// editors wrap descriptions themselves, and yaml-language-server shows
// every line break as a new paragraph.
func doc(n ast.Node) string {
	var paras []string
	for _, cg := range ast.Comments(n) {
		if !cg.Doc {
			continue
		}
		for p := range strings.SplitSeq(strings.TrimSpace(cg.Text()), "\n\n") {
			paras = append(paras, strings.Join(strings.Fields(p), " "))
		}
	}
	return strings.Join(paras, "\n\n")
}
