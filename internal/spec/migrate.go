package spec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing/fstest"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/token"
	"gopkg.in/yaml.v3"
)

// Format is the language of a definition file.
type Format string

const (
	FormatYAML Format = "yaml"
	FormatCUE  Format = "cue"
)

func (f Format) String() string { return string(f) }

// FormatOf is the format of a definition file, by its extension.
func FormatOf(name string) (Format, bool) {
	switch {
	case strings.HasSuffix(name, ".cue"):
		return FormatCUE, true
	case strings.HasSuffix(name, ".yaml"), strings.HasSuffix(name, ".yml"):
		return FormatYAML, true
	}
	return "", false
}

// Defaults says what Migrate does with fields whose value the schema
// gives anyway.
type Defaults string

const (
	// DefaultsOmit leaves out every field that can go without changing
	// the definition's meaning: defaults (timeout 30m,
	// limits, ...) and what is derived (a repository's name from its
	// URL). version, kind, id and title always stay.
	DefaultsOmit Defaults = "omit"
	// DefaultsExplicit writes every field, defaults included: the
	// normalised spec the digest is taken of.
	DefaultsExplicit Defaults = "explicit"
)

func (d Defaults) String() string { return string(d) }

// MigrateOptions say how Migrate writes a definition.
type MigrateOptions struct {
	Format   Format
	Defaults Defaults
}

// kept are the fields DefaultsOmit never leaves out: what names the
// definition to a reader.
var kept = []string{"version", "kind", "id", "title"}

// Migrate writes the definition d, loaded from a file, as a definition
// file of the schema version this build reads (SchemaVersion): normalised,
// with its keys in the order of the spec types (the digest's order) and
// map keys sorted, defaults written or left out as o says, in YAML or CUE.
// What a CUE file computes (let, comprehensions, string functions) is
// written as the data it came to; comments are not kept. The file written
// has d's digest: Migrate loads it again and fails if it has not.
//
// Only version 1 exists, so Migrate changes no field's meaning. A later
// schema version makes the loader read both; Migrate is where a definition
// of the old version is written as one of the new.
func Migrate(ctx context.Context, d Definition, o MigrateOptions) ([]byte, error) {
	var v any
	switch {
	case d.Task != nil:
		v = d.Task
	case d.Campaign != nil:
		v = d.Campaign
	default:
		return nil, fmt.Errorf("%s holds no Task or Campaign", d.File)
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", d.File, err)
	}
	doc, err := parseOrdered(canonical)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", d.File, err)
	}
	shortDurations(doc)
	m := &migration{ctx: ctx, digest: d.Digest}
	if o.Defaults == DefaultsOmit {
		if err := m.prune(doc, doc, true); err != nil {
			return nil, err
		}
	}
	out, err := render(doc, o.Format)
	if err != nil {
		return nil, err
	}
	got, err := m.digestOf(out, o.Format)
	if err != nil {
		return nil, fmt.Errorf("the %s written for %s does not load: %w", o.Format, d.File, err)
	}
	if got != d.Digest {
		return nil, fmt.Errorf("the %s written for %s means something else (digest %s, not %s)", o.Format, d.File, got, d.Digest)
	}
	return out, nil
}

// shortDurations writes each timeout as people do: "15m", not the
// canonical "15m0s" (both mean the same and have the same digest).
func shortDurations(v *ordered) {
	for i, k := range v.keys {
		if e := v.vals[i]; k == "timeout" && e.kind == kindString {
			e.text = shortDuration(e.text)
		}
	}
	for _, e := range v.vals {
		shortDurations(e)
	}
}

func shortDuration(s string) string {
	if strings.HasSuffix(s, "m0s") || strings.HasSuffix(s, "h0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// migration leaves fields out of a document while its meaning stays.
type migration struct {
	ctx    context.Context
	digest string
}

// prune leaves out each field of obj, depth first, whose absence keeps
// the digest of the whole document doc; a field that must stay is pruned
// inside. top is set for the document itself, whose kept fields stay.
func (m *migration) prune(doc, obj *ordered, top bool) error {
	for i := 0; i < len(obj.keys); i++ {
		key, val := obj.keys[i], obj.vals[i]
		if top && contains(kept, key) {
			continue
		}
		obj.keys = append(obj.keys[:i:i], obj.keys[i+1:]...)
		obj.vals = append(obj.vals[:i:i], obj.vals[i+1:]...)
		same, err := m.same(doc)
		if err != nil {
			return err
		}
		if same {
			i--
			continue
		}
		obj.keys = append(obj.keys[:i:i], append([]string{key}, obj.keys[i:]...)...)
		obj.vals = append(obj.vals[:i:i], append([]*ordered{val}, obj.vals[i:]...)...)
		if err := m.pruneIn(doc, val); err != nil {
			return err
		}
	}
	return nil
}

// pruneIn prunes the objects in v: v itself, or a list's elements.
func (m *migration) pruneIn(doc, v *ordered) error {
	switch v.kind {
	case kindObject:
		return m.prune(doc, v, false)
	case kindArray:
		for _, e := range v.vals {
			if err := m.pruneIn(doc, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// same reports whether doc still means the definition: it loads, to the
// same digest.
func (m *migration) same(doc *ordered) (bool, error) {
	data, err := render(doc, FormatYAML)
	if err != nil {
		return false, err
	}
	got, err := m.digestOf(data, FormatYAML)
	if err != nil {
		var es Errors
		if errors.As(err, &es) {
			return false, nil
		}
		return false, err
	}
	return got == m.digest, nil
}

// digestOf loads data, a definition written by render (data, never a
// program), and returns its digest.
func (m *migration) digestOf(data []byte, f Format) (string, error) {
	name := "definition." + string(f)
	res, err := (&Loader{Eval: InProcess(1)}).LoadFiles(m.ctx, fstest.MapFS{name: {Data: data}}, name)
	if err != nil {
		return "", err
	}
	if len(res.Errors) > 0 {
		return "", res.Errors
	}
	if len(res.Definitions) != 1 {
		return "", fmt.Errorf("%d definitions", len(res.Definitions))
	}
	return res.Definitions[0].Digest, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// ordered is a JSON value that keeps the order of its object's keys.
type ordered struct {
	kind byte
	keys []string
	vals []*ordered
	// text is a string's value, a number as written, or true or false.
	text string
}

const (
	kindObject = 'o'
	kindArray  = 'a'
	kindString = 's'
	kindNumber = 'n'
	kindBool   = 'b'
	kindNull   = 'z'
)

// parseOrdered decodes JSON keeping the order of keys.
func parseOrdered(data []byte) (*ordered, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (*ordered, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &ordered{kind: kindObject}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k.(string))
				o.vals = append(o.vals, v)
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := &ordered{kind: kindArray}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				a.vals = append(a.vals, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &ordered{kind: kindString, text: t}, nil
	case json.Number:
		return &ordered{kind: kindNumber, text: t.String()}, nil
	case bool:
		return &ordered{kind: kindBool, text: fmt.Sprint(t)}, nil
	case nil:
		return &ordered{kind: kindNull}, nil
	}
	return nil, fmt.Errorf("unexpected %T", tok)
}

// render writes doc as a definition file in f.
func render(doc *ordered, f Format) ([]byte, error) {
	if f == FormatCUE {
		s, ok := cueNode(doc, 0).(*ast.StructLit)
		if !ok {
			return nil, errors.New("a definition is an object")
		}
		b, err := format.Node(&ast.File{Decls: s.Elts})
		if err != nil {
			return nil, fmt.Errorf("format CUE: %w", err)
		}
		return b, nil
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(yamlNode(doc)); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	return b.Bytes(), nil
}

func yamlNode(v *ordered) *yaml.Node {
	switch v.kind {
	case kindObject:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for i, k := range v.keys {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, yamlNode(v.vals[i]))
		}
		return n
	case kindArray:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		scalars := true
		for _, e := range v.vals {
			n.Content = append(n.Content, yamlNode(e))
			scalars = scalars && e.kind != kindObject && e.kind != kindArray
		}
		if scalars && len(v.vals) > 0 {
			// [a, b], as people write argv and labels.
			n.Style = yaml.FlowStyle
		}
		return n
	case kindString:
		n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v.text}
		if strings.Contains(v.text, "\n") {
			n.Style = yaml.LiteralStyle
		}
		return n
	case kindNumber:
		tag := "!!int"
		if strings.ContainsAny(v.text, ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.text}
	case kindBool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: v.text}
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
}

// cueIdent is a label CUE reads as a regular field without quotes.
var cueIdent = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

var cueKeywords = []string{"true", "false", "null", "if", "for", "in", "let", "func", "import", "package", "div", "mod", "quo", "rem"}

func cueLabel(k string) ast.Label {
	if cueIdent.MatchString(k) && !contains(cueKeywords, k) {
		return ast.NewIdent(k)
	}
	return ast.NewString(k)
}

// cueNode is v as a CUE expression at depth tabs of indentation.
func cueNode(v *ordered, depth int) ast.Expr {
	switch v.kind {
	case kindObject:
		s := &ast.StructLit{}
		for i, k := range v.keys {
			s.Elts = append(s.Elts, &ast.Field{Label: cueLabel(k), Value: cueNode(v.vals[i], depth+1)})
		}
		return s
	case kindArray:
		l := &ast.ListLit{}
		for _, e := range v.vals {
			l.Elts = append(l.Elts, cueNode(e, depth+1))
		}
		return l
	case kindString:
		if strings.Contains(v.text, "\n") {
			return &ast.BasicLit{Kind: token.STRING, Value: literal.String.WithTabIndent(depth).Quote(v.text)}
		}
		return ast.NewString(v.text)
	case kindNumber:
		kind := token.INT
		if strings.ContainsAny(v.text, ".eE") {
			kind = token.FLOAT
		}
		return &ast.BasicLit{Kind: kind, Value: v.text}
	case kindBool:
		return ast.NewBool(v.text == "true")
	}
	return ast.NewNull()
}
