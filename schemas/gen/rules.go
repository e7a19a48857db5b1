package main

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
)

// check is one of the CUE schema's cross-field checks: the if clauses of
// a comprehension (and of those it is nested in) that yields an error.
// The document is refused when every condition holds.
type check struct {
	at    ast.Node
	conds []ast.Expr
	msg   string
}

// checks lists the checks comprehension d yields, within the conditions
// outer. A comprehension whose conditions read a hidden field computes
// (a duration's length) and is fleetlift's alone, as are hidden fields
// that are not errors (names unique in a list): both are left out.
// Anything else a comprehension yields does not translate.
func (c *converter) checks(d *ast.Comprehension, outer []ast.Expr) ([]check, error) {
	if d.Fallback != nil {
		return nil, c.errorf(d, "a comprehension with an else clause does not translate")
	}
	conds := slices.Clone(outer)
	for _, cl := range d.Clauses {
		ic, ok := cl.(*ast.IfClause)
		if !ok {
			return nil, c.errorf(cl, "%T: only if clauses translate", cl)
		}
		conds = append(conds, ic.Condition)
	}
	if readsHidden(conds) {
		return nil, nil
	}
	st, ok := d.Value.(*ast.StructLit)
	if !ok {
		return nil, c.errorf(d, "a comprehension must yield a struct")
	}
	return c.checksIn(st, conds)
}

// checksIn lists the checks the body st of a comprehension yields.
func (c *converter) checksIn(st *ast.StructLit, conds []ast.Expr) ([]check, error) {
	var out []check
	for _, e := range st.Elts {
		switch e := e.(type) {
		case *ast.Field:
			name, _, err := ast.LabelName(e.Label)
			if err != nil {
				return nil, c.errorf(e, "label: %v", err)
			}
			if !strings.HasPrefix(name, "_") {
				// A check reported against a nested field
				// (watch: _check_x: error(...)).
				sub, ok := e.Value.(*ast.StructLit)
				if !ok {
					return nil, c.errorf(e, "a comprehension adds field %s: only hidden fields (cross-field checks) translate", name)
				}
				more, err := c.checksIn(sub, conds)
				if err != nil {
					return nil, err
				}
				out = append(out, more...)
				continue
			}
			msg, ok := errorCall(e.Value)
			if !ok {
				// A check that computes: fleetlift's alone.
				continue
			}
			out = append(out, check{at: e, conds: conds, msg: msg})
		case *ast.Comprehension:
			more, err := c.checks(e, conds)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		default:
			return nil, c.errorf(e, "%T in a comprehension does not translate", e)
		}
	}
	return out, nil
}

// readsHidden reports whether any of es refers to a hidden field.
func readsHidden(es []ast.Expr) bool {
	found := false
	for _, e := range es {
		ast.Walk(e, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok && strings.HasPrefix(id.Name, "_") && id.Name != "_" {
				found = true
			}
			return !found
		}, nil)
	}
	return found
}

// interpolationRe finds the interpolations of a string literal's source.
var interpolationRe = regexp.MustCompile(`\\\(([^()]*)\)`)

// errorCall returns the message of error("..."), its interpolations
// written <field>.
func errorCall(e ast.Expr) (string, bool) {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 1 {
		return "", false
	}
	if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "error" {
		return "", false
	}
	b, err := format.Node(call.Args[0])
	if err != nil {
		return "", false
	}
	src := interpolationRe.ReplaceAllString(string(b), "<$1>")
	msg, err := literal.Unquote(src)
	if err != nil {
		return "", false
	}
	return msg, true
}

// cond is a condition of a check, about the fields of the object the
// check is declared in: a test, or an allOf or anyOf of conditions.
type cond interface{}

// test holds when the value at path, a field of the object or a field of
// one of its fields, matches leaf (nil matches anything). A strict test
// needs every field on path present; a lax one also holds when one is
// absent. The strict test with leaf nil says the field is present; the
// lax one with leaf false that it is absent.
type test struct {
	path   []string
	leaf   *Schema
	strict bool
}

type allOf []cond
type anyOf []cond

// negate is the condition that holds when x does not.
func negate(x cond) cond {
	switch x := x.(type) {
	case test:
		return test{path: x.path, leaf: negateSchema(x.leaf), strict: !x.strict}
	case allOf:
		out := make(anyOf, len(x))
		for i, y := range x {
			out[i] = negate(y)
		}
		return out
	case anyOf:
		out := make(allOf, len(x))
		for i, y := range x {
			out[i] = negate(y)
		}
		return out
	}
	panic(fmt.Sprintf("negate %T", x))
}

// negateSchema is the schema of the values s refuses; nil is true.
func negateSchema(s *Schema) *Schema {
	switch {
	case s == nil:
		return boolSchema(false)
	case s.Bool != nil:
		if *s.Bool {
			return boolSchema(false)
		}
		return nil
	case s.Not != nil:
		rest := s.clone()
		rest.Not = nil
		if !rest.validation() {
			return s.Not
		}
	}
	return &Schema{Not: s}
}

// fieldInfo is what the conditions of an object's checks need to know of
// one of its fields.
type fieldInfo struct {
	schema   *Schema
	required bool
}

// cond translates e, a condition about the fields of the object fields.
func (c *converter) cond(e ast.Expr, fields map[string]fieldInfo) (cond, error) {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return c.cond(x.X, fields)
	case *ast.UnaryExpr:
		if x.Op != token.NOT {
			break
		}
		y, err := c.cond(x.X, fields)
		if err != nil {
			return nil, err
		}
		return negate(y), nil
	case *ast.BinaryExpr:
		switch x.Op {
		case token.LAND, token.LOR:
			var parts []cond
			for _, p := range flatten(x, x.Op) {
				y, err := c.cond(p, fields)
				if err != nil {
					return nil, err
				}
				parts = append(parts, y)
			}
			if x.Op == token.LAND {
				return allOf(parts), nil
			}
			return enums(parts), nil
		case token.EQL, token.NEQ:
			path, other := selector(x.X), x.Y
			if path == nil {
				path, other = selector(x.Y), x.X
			}
			if path == nil {
				break
			}
			var y cond
			if _, ok := other.(*ast.BottomLit); ok {
				// x == _|_: the field is absent.
				if _, err := c.field(x, path, fields); err != nil {
					return nil, err
				}
				y = test{path: path, leaf: boolSchema(false)}
			} else {
				v, err := c.literal(other)
				if err != nil {
					return nil, err
				}
				if y, err = c.equals(x, path, v, fields); err != nil {
					return nil, err
				}
			}
			if x.Op == token.NEQ {
				y = negate(y)
			}
			return y, nil
		}
	case *ast.Ident, *ast.SelectorExpr:
		// A boolean field: it is true.
		return c.equals(x, selector(x), true, fields)
	case *ast.CallExpr:
		fn, err := format.Node(x.Fun)
		if err != nil {
			return nil, err
		}
		if string(fn) != "strings.Contains" || len(x.Args) != 2 {
			break
		}
		path := selector(x.Args[0])
		v, err := c.literal(x.Args[1])
		if err != nil {
			return nil, err
		}
		sub, ok := v.(string)
		if path == nil || !ok {
			break
		}
		def, err := c.fieldDefault(x, path, fields)
		if err != nil {
			return nil, err
		}
		if def != nil {
			return nil, c.errorf(x, "strings.Contains of a field with a default does not translate")
		}
		return test{path: path, leaf: &Schema{Pattern: regexp.QuoteMeta(sub)}, strict: true}, nil
	}
	return nil, c.errorf(e, "condition %s does not translate", nodeString(e))
}

// equals is the condition that the field at path is v, taking its
// default when it is absent. A struct on path that may be absent and has
// no default must be tested present by another clause, as CUE needs it
// to be (forge.type needs none: forge is a regular field).
func (c *converter) equals(at ast.Node, path []string, v any, fields map[string]fieldInfo) (cond, error) {
	if path == nil {
		return nil, c.errorf(at, "%s is not a field", nodeString(at))
	}
	def, err := c.fieldDefault(at, path, fields)
	if err != nil {
		return nil, err
	}
	return test{path: path, leaf: &Schema{Const: &Value{v}}, strict: def == nil || !reflect.DeepEqual(def.V, v)}, nil
}

// enums merges the equality tests of a disjunction that test one field
// alike into one test of an enum: action == "a" || action == "b".
func enums(parts []cond) cond {
	var out anyOf
	for _, p := range parts {
		t, ok := p.(test)
		if ok && t.leaf != nil && t.leaf.Const != nil && len(out) > 0 {
			prev, ok := out[len(out)-1].(test)
			if ok && prev.strict == t.strict && slices.Equal(prev.path, t.path) && prev.leaf != nil {
				var vs []Value
				switch {
				case prev.leaf.Const != nil:
					vs = []Value{*prev.leaf.Const}
				case len(prev.leaf.Enum) > 0:
					vs = prev.leaf.Enum
				}
				if vs != nil {
					out[len(out)-1] = test{path: t.path, leaf: &Schema{Enum: append(slices.Clone(vs), *t.leaf.Const)}, strict: t.strict}
					continue
				}
			}
		}
		out = append(out, p)
	}
	if len(out) == 1 {
		return out[0]
	}
	return out
}

// selector is the field path e names (execution.agentic), nil when it
// names none.
func selector(e ast.Expr) []string {
	switch x := e.(type) {
	case *ast.Ident:
		if strings.HasPrefix(x.Name, "_") || strings.HasPrefix(x.Name, "#") {
			return nil
		}
		return []string{x.Name}
	case *ast.SelectorExpr:
		p := selector(x.X)
		if p == nil {
			return nil
		}
		name, _, err := ast.LabelName(x.Sel)
		if err != nil {
			return nil
		}
		return append(p, name)
	}
	return nil
}

// fieldDefault returns the default of the field at path, nil when it has
// none; an error when path names no field or its default is computed.
func (c *converter) fieldDefault(at ast.Node, path []string, fields map[string]fieldInfo) (*Value, error) {
	s, err := c.field(at, path, fields)
	if err != nil {
		return nil, err
	}
	if s.Default == nil && s.hasDefault {
		return nil, c.errorf(at, "%s has a computed default: a check cannot compare it", strings.Join(path, "."))
	}
	return s.Default, nil
}

// field returns the schema of the field at path; an error when path
// names no field.
func (c *converter) field(at ast.Node, path []string, fields map[string]fieldInfo) (*Schema, error) {
	f, ok := fields[path[0]]
	if !ok {
		return nil, c.errorf(at, "%s is not a field of the struct the check is in", path[0])
	}
	s := f.schema
	for i, name := range path[1:] {
		obj, err := c.deref(s)
		if err != nil {
			return nil, err
		}
		j := slices.IndexFunc(obj.Properties, func(p Property) bool { return p.Name == name })
		if j < 0 {
			return nil, c.errorf(at, "%s has no field %s", strings.Join(path[:i+1], "."), name)
		}
		s = obj.Properties[j].Schema
	}
	return s, nil
}

// deref is the object schema s is, or refers to.
func (c *converter) deref(s *Schema) (*Schema, error) {
	if s.Ref == "" {
		return s, nil
	}
	return c.definition("#" + strings.TrimPrefix(s.Ref, "#/$defs/"))
}

func nodeString(n ast.Node) string {
	b, err := format.Node(n)
	if err != nil {
		return fmt.Sprintf("%T", n)
	}
	return string(b)
}

// rule is a check as the JSON Schema states it: conds, about the fields
// of the object at prefix (within the object the check is declared in),
// must not all hold.
type rule struct {
	prefix []string
	conds  []cond
	msgs   []string
	// oneOf, when set, replaces conds: exactly one of these fields.
	oneOf []string
}

// rules translates the checks of an object into the schemas its allOf
// holds, one a check (two checks that together ask for exactly one of
// two fields become one oneOf).
func (c *converter) rules(checks []check, fields map[string]fieldInfo) ([]*Schema, error) {
	var rs []rule
	for _, ch := range checks {
		var conds []cond
		for _, e := range ch.conds {
			x, err := c.cond(e, fields)
			if err != nil {
				return nil, err
			}
			conds = append(conds, x)
		}
		r := simplify(rule{conds: conds, msgs: []string{ch.msg}}, fields)
		if len(r.conds) == 0 {
			return nil, c.errorf(ch.at, "the check refuses every document")
		}
		rs = append(rs, r)
	}
	rs = mergeOneOf(rs)
	required := map[string]bool{}
	for name, f := range fields {
		required[name] = f.required
	}
	var out []*Schema
	for _, r := range rs {
		s := r.schema()
		if len(r.prefix) == 0 {
			dropRequired(s, required)
		}
		for i := len(r.prefix) - 1; i >= 0; i-- {
			s = &Schema{Properties: []Property{{Name: r.prefix[i], Schema: s}}}
		}
		s.Comment = strings.Join(r.msgs, "; ")
		out = append(out, s)
	}
	return out, nil
}

// simplify drops the conditions every document the object accepts
// meets (its required fields present), and those another implies, and
// moves a rule whose conditions all concern one field's fields into it.
func simplify(r rule, fields map[string]fieldInfo) rule {
	var flat []cond
	var add func(x cond)
	add = func(x cond) {
		if a, ok := x.(allOf); ok {
			for _, y := range a {
				add(y)
			}
			return
		}
		flat = append(flat, x)
	}
	for _, x := range r.conds {
		add(x)
	}
	var conds []cond
	for _, x := range flat {
		if t, ok := x.(test); ok && isPresence(t) {
			if len(r.prefix) == 0 && len(t.path) == 1 && fields[t.path[0]].required {
				continue
			}
			implied := slices.ContainsFunc(flat, func(y cond) bool {
				u, ok := y.(test)
				return ok && u.strict && u.leaf != nil && len(u.path) >= len(t.path) && slices.Equal(u.path[:len(t.path)], t.path)
			})
			if implied {
				continue
			}
		}
		conds = append(conds, x)
	}
	r.conds = conds
	// Push down: every condition is about fields of one field p, which
	// is present whenever they all hold.
	p, ok := commonField(conds)
	if !ok {
		return r
	}
	present := len(r.prefix) == 0 && fields[p].required
	var rest []cond
	for _, x := range conds {
		if t, ok := x.(test); ok && len(t.path) == 1 {
			// Presence of p itself (commonField allows no other test of p).
			present = true
			continue
		}
		if t, ok := x.(test); ok && t.strict {
			present = true
		}
		rest = append(rest, trim(x))
	}
	if !present || len(rest) == 0 {
		return r
	}
	return simplify(rule{prefix: append(slices.Clone(r.prefix), p), conds: rest, msgs: r.msgs}, nil)
}

// isPresence reports whether t only says its field is present.
func isPresence(t test) bool { return t.strict && t.leaf == nil }

// isAbsence reports whether t only says its field is absent.
func isAbsence(t test) bool {
	return !t.strict && t.leaf != nil && t.leaf.Bool != nil && !*t.leaf.Bool
}

// commonField returns the field all of conds are about, when there is
// one and conds test only its fields (or its presence).
func commonField(conds []cond) (string, bool) {
	var p string
	ok := true
	var visit func(x cond, top bool)
	visit = func(x cond, top bool) {
		switch x := x.(type) {
		case test:
			if p == "" {
				p = x.path[0]
			}
			if x.path[0] != p || len(x.path) == 1 && !(top && isPresence(x)) {
				ok = false
			}
		case allOf:
			for _, y := range x {
				visit(y, false)
			}
		case anyOf:
			for _, y := range x {
				visit(y, false)
			}
		}
	}
	for _, x := range conds {
		visit(x, true)
	}
	return p, ok && p != ""
}

// trim removes the first element of the paths of x.
func trim(x cond) cond {
	switch x := x.(type) {
	case test:
		return test{path: x.path[1:], leaf: x.leaf, strict: x.strict}
	case allOf:
		out := make(allOf, len(x))
		for i, y := range x {
			out[i] = trim(y)
		}
		return out
	case anyOf:
		out := make(anyOf, len(x))
		for i, y := range x {
			out[i] = trim(y)
		}
		return out
	}
	panic(fmt.Sprintf("trim %T", x))
}

// fieldsOf returns the fields of conds when each is a test of one field
// of the object (not of its fields) matching is.
func fieldsOf(conds []cond, is func(test) bool) ([]string, bool) {
	var out []string
	for _, x := range conds {
		t, ok := x.(test)
		if !ok || len(t.path) != 1 || !is(t) {
			return nil, false
		}
		out = append(out, t.path[0])
	}
	return out, len(out) > 0
}

// mergeOneOf turns "one of a and b" and "not both a and b" at the same
// place into "exactly one of a and b".
func mergeOneOf(rs []rule) []rule {
	for i := range rs {
		some, ok := fieldsOf(rs[i].conds, isAbsence)
		if !ok || len(some) != 2 {
			continue
		}
		for j := range rs {
			both, ok := fieldsOf(rs[j].conds, isPresence)
			if !ok || !slices.Equal(rs[i].prefix, rs[j].prefix) || len(both) != 2 || !sameSet(some, both) {
				continue
			}
			rs[i] = rule{prefix: rs[i].prefix, msgs: append(slices.Clone(rs[i].msgs), rs[j].msgs...), oneOf: some}
			return mergeOneOf(slices.Delete(rs, j, j+1))
		}
	}
	return rs
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// schema states r: the documents it refuses are those where all its
// conditions hold.
func (r rule) schema() *Schema {
	if r.oneOf != nil {
		s := &Schema{}
		for _, f := range r.oneOf {
			s.OneOf = append(s.OneOf, &Schema{Required: []string{f}})
		}
		return s
	}
	conds := r.conds
	if _, ok := fieldsOf(conds, isAbsence); ok {
		// One of these fields.
		return render(negate(allOf(conds)))
	}
	if fs, ok := fieldsOf(conds, isPresence); ok {
		// Not all of these fields.
		return &Schema{Not: &Schema{Required: fs}}
	}
	if len(conds) == 2 {
		p, ok1 := fieldsOf(conds[:1], isPresence)
		a, ok2 := fieldsOf(conds[1:], isAbsence)
		if !ok1 || !ok2 {
			p, ok1 = fieldsOf(conds[1:], isPresence)
			a, ok2 = fieldsOf(conds[:1], isAbsence)
		}
		if ok1 && ok2 {
			return &Schema{DependentRequired: []Dependent{{Name: p[0], Fields: a}}}
		}
	}
	// If some conditions hold, the others must not: the absence of
	// fields (then they are required), else what is asked of fields
	// present, else the last condition.
	var when, then []cond
	isSimple := func(is func(test) bool) func(cond) bool {
		return func(x cond) bool {
			_, ok := fieldsOf([]cond{x}, is)
			return ok
		}
	}
	switch {
	case slices.ContainsFunc(conds, isSimple(isAbsence)):
		when, then = split(conds, isSimple(isAbsence))
	case slices.ContainsFunc(conds, isSimple(isPresence)):
		then, when = split(conds, isSimple(isPresence))
	default:
		when, then = conds[:len(conds)-1], conds[len(conds)-1:]
	}
	if len(when) == 0 {
		return render(negate(allOf(then)))
	}
	return &Schema{If: render(allOf(when)), Then: render(negate(allOf(then)))}
}

// split returns the conditions for which is is false, then those for
// which it is true.
func split(conds []cond, is func(cond) bool) (no, yes []cond) {
	for _, x := range conds {
		if is(x) {
			yes = append(yes, x)
		} else {
			no = append(no, x)
		}
	}
	return no, yes
}

// render is the schema of the objects meeting x.
func render(x cond) *Schema {
	switch x := x.(type) {
	case test:
		return renderTest(x)
	case allOf:
		if len(x) == 1 {
			return render(x[0])
		}
		if fs, ok := fieldsOf(x, isAbsence); ok {
			// None of these fields.
			s := &Schema{}
			for _, f := range fs {
				s.AnyOf = append(s.AnyOf, &Schema{Required: []string{f}})
			}
			return &Schema{Not: s}
		}
		var parts []*Schema
		for _, y := range x {
			parts = append(parts, render(y))
		}
		return mergeAll(parts)
	case anyOf:
		if len(x) == 1 {
			return render(x[0])
		}
		s := &Schema{}
		for _, y := range x {
			s.AnyOf = append(s.AnyOf, render(y))
		}
		return s
	}
	panic(fmt.Sprintf("render %T", x))
}

func renderTest(t test) *Schema {
	name := t.path[0]
	var sub *Schema
	if len(t.path) > 1 {
		sub = renderTest(test{path: t.path[1:], leaf: t.leaf, strict: t.strict})
	} else {
		sub = t.leaf
	}
	s := &Schema{}
	if t.strict {
		s.Required = []string{name}
	} else if len(t.path) == 1 && isAbsence(t) {
		return &Schema{Not: &Schema{Required: []string{name}}}
	}
	if sub != nil {
		s.Properties = []Property{{Name: name, Schema: sub}}
	}
	return s
}

// mergeAll is the schema of what all of parts accept: one schema when
// they only require fields and state their properties, each a different
// one; their allOf otherwise.
func mergeAll(parts []*Schema) *Schema {
	out := &Schema{}
	seen := map[string]bool{}
	for _, p := range parts {
		rest := p.clone()
		rest.Required, rest.Properties = nil, nil
		if rest.validation() {
			return &Schema{AllOf: parts}
		}
		for _, q := range p.Properties {
			if seen[q.Name] {
				return &Schema{AllOf: parts}
			}
			seen[q.Name] = true
		}
		for _, f := range p.Required {
			if !slices.Contains(out.Required, f) {
				out.Required = append(out.Required, f)
			}
		}
		out.Properties = append(out.Properties, p.Properties...)
	}
	return out
}

// dropRequired removes from s, a rule about an object, the fields it
// requires that the object requires anyway: every document the object
// accepts has them.
func dropRequired(s *Schema, required map[string]bool) {
	if s == nil {
		return
	}
	s.Required = slices.DeleteFunc(s.Required, func(f string) bool { return required[f] })
	for _, sub := range slices.Concat(s.AllOf, s.AnyOf, s.OneOf, []*Schema{s.Not, s.If, s.Then}) {
		dropRequired(sub, required)
	}
}
