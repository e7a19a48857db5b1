// Package outputschema compiles a report's output.schema, the JSON Schema
// its frontmatter must match, and validates frontmatter against it. The
// definition loader compiles it (a schema that cannot be used is an error
// in the definition file, found by validate and plan), and so does the
// worker, which checks each report an agent collected (the agent only
// parses it: what a sandbox says about a report decides nothing).
//
// A schema must be self-contained: a $ref outside it is refused, never
// loaded from a file or the network.
package outputschema

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// Schema is a compiled output.schema.
type Schema struct {
	s *jsonschema.Schema
}

// Problem is one thing wrong with a schema or a document: where (a JSON
// pointer into it, "" for the whole) and what.
type Problem struct {
	Pointer string
	Msg     string
}

func (p Problem) String() string {
	if p.Pointer == "" {
		return p.Msg
	}
	return p.Pointer + ": " + p.Msg
}

// CompileError is a schema that cannot be used: not JSON, not a valid
// JSON Schema (Problems say where), or one that refers outside itself.
type CompileError struct {
	Problems []Problem
}

func (e *CompileError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "output.schema is not a usable JSON Schema: " + strings.Join(parts, "; ")
}

// url names the schema while it is compiled; it never reaches a user.
const url = "https://fleetlift.invalid/output.schema.json"

// noLoader refuses every $ref outside the schema itself.
type noLoader struct{}

func (noLoader) Load(ref string) (any, error) {
	return nil, fmt.Errorf("loading %s is not allowed", ref)
}

// Compile compiles raw, a JSON document. An empty or null raw is no
// schema: nil and no error.
func Compile(raw []byte) (*Schema, error) {
	if !protocol.SchemaSet(raw) {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, &CompileError{Problems: []Problem{{Msg: "not JSON: " + err.Error()}}}
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(url, doc); err != nil {
		return nil, &CompileError{Problems: []Problem{{Msg: strings.ReplaceAll(err.Error(), url, "output.schema")}}}
	}
	s, err := c.Compile(url)
	if err == nil {
		return &Schema{s: s}, nil
	}
	var invalid *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	var load *jsonschema.LoadURLError
	switch {
	case errors.As(err, &invalid) && errors.As(invalid.Err, &ve):
		// The validator finds them in no fixed order.
		ps := leaves(ve)
		slices.SortFunc(ps, func(a, b Problem) int {
			return cmp.Or(strings.Compare(a.Pointer, b.Pointer), strings.Compare(a.Msg, b.Msg))
		})
		return nil, &CompileError{Problems: ps}
	case errors.As(err, &load):
		return nil, &CompileError{Problems: []Problem{{Msg: fmt.Sprintf("$ref %q refers outside the schema: output.schema must be self-contained", load.URL)}}}
	}
	return nil, &CompileError{Problems: []Problem{{Msg: strings.ReplaceAll(err.Error(), url, "output.schema")}}}
}

// Validate checks data, a JSON document (frontmatter as encoding/json
// encodes it), and returns every violation as "<JSON pointer>:
// <message>", sorted; none when data matches.
func (s *Schema) Validate(data []byte) ([]string, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	err = s.s.Validate(doc)
	if err == nil {
		return nil, nil
	}
	var out []string
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		for _, p := range leaves(ve) {
			out = append(out, p.String())
		}
	}
	if len(out) == 0 {
		out = []string{strings.ReplaceAll(err.Error(), url, "output.schema")}
	}
	// The validator finds them in no fixed order.
	slices.Sort(out)
	return out, nil
}

// leaves are the violations e stands for: its causes' leaves, or e itself.
func leaves(e *jsonschema.ValidationError) []Problem {
	var out []Problem
	p := message.NewPrinter(language.English)
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		out = append(out, Problem{Pointer: pointer(e.InstanceLocation), Msg: e.ErrorKind.LocalizedString(p)})
	}
	walk(e)
	return out
}

// pointer is the JSON pointer (RFC 6901) of a path of object keys and
// array indexes; "" for the document itself.
func pointer(tokens []string) string {
	var b strings.Builder
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	for _, t := range tokens {
		b.WriteString("/" + esc.Replace(t))
	}
	return b.String()
}
