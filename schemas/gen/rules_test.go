package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestChecks: a cross-field check whose conditions test fields becomes a
// rule; one that computes is left to fleetlift; one the converter cannot
// read is an error, never a rule silently dropped.
func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // in the schema's JSON; "" for no rule
		err        string
	}{
		{"not both", `a?: int
b?: int
if a != _|_ if b != _|_ {_check_b: error("not both")}`, `"allOf":[{"$comment":"not both","not":{"required":["a","b"]}}]`, ""},
		{"one of", `v!: int
a?: int
b?: int
if v != _|_ if a == _|_ if b == _|_ {_check_a: error("one")}
if a != _|_ if b != _|_ {_check_b: error("only one")}`, `"allOf":[{"$comment":"one; only one","oneOf":[{"required":["a"]},{"required":["b"]}]}]`, ""},
		{"needs", `a?: int
b?: int
if a != _|_ if b == _|_ {_check_b: error("a needs b")}`, `"dependentRequired":{"a":["b"]}`, ""},
		{"default", `m: *"x" | "y"
a?: int
if a != _|_ if m == "y" {_check_a: error("a only with x")}`, `"if":{"required":["a"]},"then":{"properties":{"m":{"not":{"const":"y"}}}}`, ""},
		{"computed", `a?: [...string]
_n: len(a)
if _n > 1 {_check_a: error("too many")}
_check_b: a & ["x"]`, "", ""},
		{"for clause", `a?: [...int]
for x in a {_check_a: error("no")}`, "", "only if clauses translate"},
		{"call", `a?: [...int]
if len(a) > 1 {_check_a: error("no")}`, "", "does not translate"},
		{"outer field", `a?: {b?: int, if c != _|_ {_check_b: error("no")}}
c?: int`, "", "not a field of the struct"},
		{"regular field", `a?: int
if a != _|_ {b: 1}`, "", "only hidden fields"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newConverter("t.cue", []byte("package t\n\n#T: {\n"+tc.body+"\n}\n"))
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.Document("#T")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == "" && strings.Contains(string(b), `"allOf"`):
				t.Errorf("a rule for a check that computes:\n%s", b)
			case tc.want != "" && !strings.Contains(string(b), tc.want):
				t.Errorf("schema:\n%s\nwant it to hold\n%s", b, tc.want)
			}
		})
	}
}
