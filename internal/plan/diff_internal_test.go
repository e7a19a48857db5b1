package plan

import (
	"fmt"
	"slices"
	"testing"
)

func TestWalk(t *testing.T) {
	cases := []struct {
		name     string
		old, cur string
		want     []string
	}{
		{"no change", `{"a":1,"b":{"c":[1,2]}}`, `{"a":1,"b":{"c":[1,2]}}`, nil},
		{"no change in another layout", `{"a":1,"b":{"c":[1,2],"d":[{"name":"x","v":"<"}]}}`, "{\n  \"b\": {\"d\": [{\"v\": \"\\u003c\", \"name\": \"x\"}], \"c\": [1, 2]},\n  \"a\": 1\n}", nil},
		{"removed", `{"a":1,"b":{"c":2}}`, `{"a":1}`, []string{`b: {"c":2} → ∅`}},
		{"scalar changed", `{"title":"a"}`, `{"title":"b"}`, []string{`title: "a" → "b"`}},
		{"number kept exactly", `{"n":100000000000000001}`, `{"n":100000000000000002}`, []string{`n: 100000000000000001 → 100000000000000002`}},
		{"field added", `{}`, `{"suspend":true}`, []string{`suspend: ∅ → true`}},
		{"field removed", `{"suspend":true}`, `{}`, []string{`suspend: true → ∅`}},
		{"nested", `{"template":{"execution":{"agentic":{"prompt":"a"}}}}`, `{"template":{"execution":{"agentic":{"prompt":"b"}}}}`,
			[]string{`template.execution.agentic.prompt: "a" → "b"`}},
		{"execution kind switched", `{"execution":{"agentic":{"prompt":"a"}}}`, `{"execution":{"deterministic":{"image":"x"}}}`,
			[]string{`execution.agentic: {"prompt":"a"} → ∅`, `execution.deterministic: ∅ → {"image":"x"}`}},
		{"map key that is not a name", `{"env":{"A.B":"1"}}`, `{"env":{"A.B":"2"}}`, []string{`env["A.B"]: "1" → "2"`}},
		{"list of strings", `{"labels":["a","b"]}`, `{"labels":["a","c"]}`, []string{`labels: ["a","b"] → ["a","c"]`}},
		{"named element changed", `{"verifiers":[{"name":"build","command":["go","build"]},{"name":"test","command":["go","test"]}]}`,
			`{"verifiers":[{"name":"build","command":["go","build","./..."]},{"name":"test","command":["go","test"]}]}`,
			[]string{`verifiers[build].command: ["go","build"] → ["go","build","./..."]`}},
		{"named element added and removed", `{"verifiers":[{"name":"build"},{"name":"vet"}]}`, `{"verifiers":[{"name":"build"},{"name":"test"}]}`,
			[]string{`verifiers[test]: ∅ → {"name":"test"}`, `verifiers[vet]: {"name":"vet"} → ∅`}},
		{"named elements reordered", `{"verifiers":[{"name":"a"},{"name":"b"}]}`, `{"verifiers":[{"name":"b"},{"name":"a"}]}`,
			[]string{`verifiers: ["a","b"] → ["b","a"]`}},
		{"repositories added and removed are left to the repository diff", `{"repositories":[{"name":"a"},{"name":"b"}]}`, `{"repositories":[{"name":"a","branch":"x"},{"name":"c"}]}`,
			[]string{`repositories[a].branch: ∅ → "x"`}},
		{"unnamed objects by position", `{"xs":[{"k":1},{"k":2}]}`, `{"xs":[{"k":1},{"k":3}]}`, []string{`xs[1].k: 2 → 3`}},
		{"type changed", `{"a":[1]}`, `{"a":{"b":1}}`, []string{`a: [1] → {"b":1}`}},
		{"object values shown with sorted keys", `{"a":{"z":1,"y":2}}`, `{"a":null}`, []string{`a: {"y":2,"z":1} → null`}},
		{"html is not escaped", `{"body":"a"}`, `{"body":"\u003cb\u003e \u0026 \u003c/b\u003e"}`, []string{`body: "a" → "<b> & </b>"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old, ok1 := value([]byte(c.old))
			cur, ok2 := value([]byte(c.cur))
			if !ok1 || !ok2 {
				t.Fatal("bad fixture")
			}
			out := newDiffer().diff(old, cur)
			var got []string
			for _, f := range out {
				got = append(got, fmt.Sprintf("%s: %s → %s", f.Path, absent(f.Old), absent(f.New)))
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("diff:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

func absent(b []byte) string {
	if b == nil {
		return "∅"
	}
	return string(b)
}

func TestShortDigest(t *testing.T) {
	cases := map[string]string{
		"sha256:0123456789abcdef0123": "sha256:0123456789ab",
		"sha256:0123":                 "sha256:0123",
		"":                            "",
		"opaque":                      "opaque",
	}
	for in, want := range cases {
		if got := ShortDigest(in); got != want {
			t.Errorf("ShortDigest(%q) = %q, want %q", in, got, want)
		}
	}
}
