package spec

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Error is one problem with one definition file. File is relative to the
// root the definitions were loaded from; Line and Column are 1-based and
// zero when unknown; Field is the path of the offending field, such as
// "repositories[0].url", or empty when the problem is the whole file.
type Error struct {
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
	Field  string `json:"field,omitempty"`
	Msg    string `json:"message"`

	// check marks the complaint of a cross-field check in the schema.
	check bool
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, max(e.Column, 1))
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found while loading, sorted by file and position.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func sortErrors(es []*Error) {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Column, b.Column),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Msg, b.Msg),
		)
	})
}
