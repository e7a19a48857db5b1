package main

import (
	"bytes"
	"encoding/json"
	"slices"
)

// Schema is a JSON Schema (2020-12) as gen writes it: the keywords it
// uses, written in a fixed order so the files read well and diff cleanly.
type Schema struct {
	// Bool, when set, makes this the schema true or false.
	Bool *bool

	Schema      string
	ID          string
	Ref         string
	Title       string
	Description string
	// Comment is $comment: for readers of the schema (the message of the
	// CUE check a rule states).
	Comment     string
	Type        string
	Const       *Value
	Enum        []Value
	Default     *Value
	Pattern     string
	MinLength   *int64
	MaxLength   *int64
	Minimum     *json.Number
	Maximum     *json.Number
	ExclMinimum *json.Number
	ExclMaximum *json.Number
	MinItems    *int64
	MaxItems    *int64
	PrefixItems []*Schema
	Items       *Schema
	Properties  []Property
	// PatternProperties are keyed by regular expression.
	PatternProperties    []Property
	AdditionalProperties *Schema
	Required             []string
	DependentRequired    []Dependent
	Not                  *Schema
	AllOf                []*Schema
	AnyOf                []*Schema
	OneOf                []*Schema
	If                   *Schema
	Then                 *Schema
	Defs                 []Property

	// hasDefault is set when the CUE value has a default, even one the
	// schema cannot state (a computed one).
	hasDefault bool
}

// Property is a named subschema: a property, a pattern property or a
// definition.
type Property struct {
	Name   string
	Schema *Schema
}

// Dependent is a member of dependentRequired: when property Name is
// present, Fields must be too.
type Dependent struct {
	Name   string
	Fields []string
}

// Value is a JSON value: a constant, an enum member or a default.
type Value struct{ V any }

func boolSchema(b bool) *Schema { return &Schema{Bool: &b} }

// isTrue reports whether s accepts everything and says nothing else.
func (s *Schema) isTrue() bool {
	if s.Bool != nil {
		return *s.Bool
	}
	c := *s
	c.Description, c.Comment, c.Default, c.hasDefault = "", "", nil, false
	b, _ := json.Marshal(&c)
	return string(b) == "{}"
}

// validation reports whether s has keywords other than annotations
// (description, $comment, default).
func (s *Schema) validation() bool {
	c := *s
	c.Description, c.Comment, c.Default, c.hasDefault = "", "", nil, false
	b, _ := json.Marshal(&c)
	return string(b) != "{}"
}

func (s *Schema) clone() *Schema {
	c := *s
	return &c
}

// MarshalJSON writes the keywords in a fixed order.
func (s *Schema) MarshalJSON() ([]byte, error) {
	if s.Bool != nil && !(*s.Bool && (s.Description != "" || s.Comment != "" || s.Default != nil)) {
		return json.Marshal(*s.Bool)
	}
	var o object
	o.add("$schema", s.Schema, s.Schema != "")
	o.add("$id", s.ID, s.ID != "")
	o.add("title", s.Title, s.Title != "")
	o.add("description", s.Description, s.Description != "")
	o.add("$comment", s.Comment, s.Comment != "")
	o.add("$ref", s.Ref, s.Ref != "")
	o.add("type", s.Type, s.Type != "")
	if s.Const != nil {
		o.add("const", s.Const.V, true)
	}
	if len(s.Enum) > 0 {
		vs := make([]any, len(s.Enum))
		for i, v := range s.Enum {
			vs[i] = v.V
		}
		o.add("enum", vs, true)
	}
	if s.Default != nil {
		o.add("default", s.Default.V, true)
	}
	o.add("pattern", s.Pattern, s.Pattern != "")
	o.add("minLength", s.MinLength, s.MinLength != nil)
	o.add("maxLength", s.MaxLength, s.MaxLength != nil)
	o.add("minimum", s.Minimum, s.Minimum != nil)
	o.add("exclusiveMinimum", s.ExclMinimum, s.ExclMinimum != nil)
	o.add("maximum", s.Maximum, s.Maximum != nil)
	o.add("exclusiveMaximum", s.ExclMaximum, s.ExclMaximum != nil)
	o.add("minItems", s.MinItems, s.MinItems != nil)
	o.add("maxItems", s.MaxItems, s.MaxItems != nil)
	o.add("prefixItems", s.PrefixItems, len(s.PrefixItems) > 0)
	o.add("items", s.Items, s.Items != nil)
	o.add("properties", properties(s.Properties), len(s.Properties) > 0)
	o.add("patternProperties", properties(s.PatternProperties), len(s.PatternProperties) > 0)
	o.add("additionalProperties", s.AdditionalProperties, s.AdditionalProperties != nil)
	o.add("required", s.Required, len(s.Required) > 0)
	o.add("dependentRequired", dependents(s.DependentRequired), len(s.DependentRequired) > 0)
	o.add("not", s.Not, s.Not != nil)
	o.add("allOf", s.AllOf, len(s.AllOf) > 0)
	o.add("anyOf", s.AnyOf, len(s.AnyOf) > 0)
	o.add("oneOf", s.OneOf, len(s.OneOf) > 0)
	o.add("if", s.If, s.If != nil)
	o.add("then", s.Then, s.Then != nil)
	o.add("$defs", properties(s.Defs), len(s.Defs) > 0)
	if o.err != nil {
		return nil, o.err
	}
	return o.bytes(), nil
}

// properties keeps the order of its members when written.
type properties []Property

func (ps properties) MarshalJSON() ([]byte, error) {
	var o object
	for _, p := range ps {
		o.add(p.Name, p.Schema, true)
	}
	if o.err != nil {
		return nil, o.err
	}
	return o.bytes(), nil
}

// dependents keeps the order of its members when written.
type dependents []Dependent

func (ds dependents) MarshalJSON() ([]byte, error) {
	var o object
	for _, d := range ds {
		o.add(d.Name, d.Fields, true)
	}
	if o.err != nil {
		return nil, o.err
	}
	return o.bytes(), nil
}

// object writes a JSON object member by member.
type object struct {
	buf bytes.Buffer
	err error
}

func (o *object) add(key string, v any, ok bool) {
	if !ok || o.err != nil {
		return
	}
	if o.buf.Len() == 0 {
		o.buf.WriteByte('{')
	} else {
		o.buf.WriteByte(',')
	}
	o.buf.Write(marshal(key))
	o.buf.WriteByte(':')
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		o.err = err
		return
	}
	o.buf.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// marshal encodes a string without escaping <, > and &, which
// descriptions and patterns use.
func marshal(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func (o *object) bytes() []byte {
	if o.buf.Len() == 0 {
		return []byte("{}")
	}
	return append(slices.Clone(o.buf.Bytes()), '}')
}
