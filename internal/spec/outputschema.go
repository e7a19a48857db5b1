package spec

import (
	"errors"
	"slices"
	"strings"

	"cuelang.org/go/cue"

	"github.com/fleetlift/fleetlift/internal/outputschema"
)

// checkOutputSchema compiles the output.schema of an evaluated Task or
// Campaign, as the worker will, and returns what makes it unusable: one
// error per problem, at the field of the schema it is in (where the file
// has that field), so that validate and plan refuse a schema the worker
// would refuse every task of.
func checkOutputSchema(name string, kind Kind, data, final cue.Value) []*Error {
	sels := []string{"execution", "agentic", "output", "schema"}
	if kind == KindCampaign {
		sels = append([]string{"template"}, sels...)
	}
	v := final.LookupPath(cuePath(sels))
	if !v.Exists() {
		return nil
	}
	raw, err := v.MarshalJSON()
	if err != nil {
		return nil
	}
	var ce *outputschema.CompileError
	if _, err := outputschema.Compile(raw); !errors.As(err, &ce) {
		return nil
	}
	// One error a field: the branches of an anyOf that failed at the
	// same place are one problem.
	var errs []*Error
	byField := map[string]*Error{}
	for _, p := range ce.Problems {
		inner := pointerSels(p.Pointer)
		full := append(slices.Clone(sels), inner...)
		field := fieldPath(full)
		if e := byField[field]; e != nil {
			if !strings.Contains(e.Msg, p.Msg) {
				e.Msg += "; " + p.Msg
			}
			continue
		}
		e := &Error{File: name, Field: field, Msg: "not a usable JSON Schema: " + p.Msg}
		// The innermost field the file itself spells out, the schema
		// itself at the outermost.
		for n := len(full); n >= len(sels); n-- {
			if setPos(e, name, data.LookupPath(cuePath(full[:n])).Pos()) {
				break
			}
		}
		byField[field] = e
		errs = append(errs, e)
	}
	return errs
}

// pointerSels are the selectors of a JSON pointer: keys, and indexes as
// numbers (as fieldPath and cuePath take them).
func pointerSels(pointer string) []string {
	if pointer == "" {
		return nil
	}
	unescape := strings.NewReplacer("~1", "/", "~0", "~")
	out := strings.Split(strings.TrimPrefix(pointer, "/"), "/")
	for i, tok := range out {
		out[i] = unescape.Replace(tok)
	}
	return out
}
