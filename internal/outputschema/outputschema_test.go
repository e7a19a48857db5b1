package outputschema_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/fleetlift/fleetlift/internal/outputschema"
)

func TestNoSchemaIsNoSchema(t *testing.T) {
	for _, raw := range []string{"", "  ", "null"} {
		s, err := outputschema.Compile([]byte(raw))
		if s != nil || err != nil {
			t.Errorf("Compile(%q) = %v, %v; want no schema and no error", raw, s, err)
		}
	}
}

// A schema that cannot be used says where and why, one problem each, in
// a fixed order.
func TestCompileSaysWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want []outputschema.Problem
	}{
		{`{"type": "object", "properties": {"a/b": {"minimum": "3"}, "n": {"type": "strin"}}}`, []outputschema.Problem{
			{Pointer: "/properties/a~1b/minimum", Msg: "got string, want number"},
			{Pointer: "/properties/n/type", Msg: "got string, want array"},
			{Pointer: "/properties/n/type", Msg: "value must be one of 'array', 'boolean', 'integer', 'null', 'number', 'object', 'string'"},
		}},
		{`{"type":`, []outputschema.Problem{{Msg: "not JSON: unexpected EOF"}}},
		{`{"$ref": "file:///etc/passwd"}`, []outputschema.Problem{{Msg: `$ref "file:///etc/passwd" refers outside the schema: output.schema must be self-contained`}}},
	} {
		_, err := outputschema.Compile([]byte(tc.raw))
		var ce *outputschema.CompileError
		if !errors.As(err, &ce) {
			t.Fatalf("Compile(%s) = %v; want a CompileError", tc.raw, err)
		}
		if !slices.Equal(ce.Problems, tc.want) {
			t.Errorf("Compile(%s) problems:\n got %q\nwant %q", tc.raw, ce.Problems, tc.want)
		}
	}
}

func TestValidateListsEveryViolation(t *testing.T) {
	s, err := outputschema.Compile([]byte(`{"type": "object", "required": ["score"],
		"properties": {"score": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Validate([]byte(`{"tags": ["ok", 3]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/tags/1: got number, want string", "missing property 'score'"}
	if !slices.Equal(got, want) {
		t.Errorf("violations %q, want %q", got, want)
	}
	if got, err := s.Validate([]byte(`{"score": 3}`)); err != nil || got != nil {
		t.Errorf("a matching document: %q, %v; want none", got, err)
	}
}
