package spec

import (
	"bytes"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

var schemaVariants = flag.Int("schema.variants", 1500, "generated variations TestJSONSchemaAgreesWithCUE compares")

// seedInputs are the YAML examples, invalid inputs, the benchmark's
// campaigns and definitions that use every field of the schema.
func seedInputs(t testing.TB) []Input {
	t.Helper()
	var in []Input
	for _, dir := range []string{"../../examples", "../../testdata/invalid", "../../campaigns-template"} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && len(b) < 64<<10 {
				in = append(in, Input{Name: filepath.Base(p), Data: b})
			}
			return nil
		})
	}
	if len(in) < 20 {
		t.Fatalf("only %d seed files found", len(in))
	}
	for _, s := range []string{kitchenSinkTask, kitchenSinkCampaign, reportTask, groupsTask} {
		in = append(in, Input{Name: "sink.yaml", Data: []byte(s)})
	}
	var b strings.Builder
	b.WriteString("version: 1\nkind: Campaign\nid: campaign-0007\ntitle: Campaign 7\n")
	b.WriteString("template:\n  execution:\n    agentic:\n      prompt: |\n        Migrate logging in this repository to log/slog (7).\n")
	b.WriteString("      verifiers:\n        - name: build\n          command: [go, build, ./...]\n")
	b.WriteString("  pull_request:\n    branch_prefix: auto/campaign-7\n    title: Migrate to slog\n    labels: [automated]\n")
	b.WriteString("batch_size: 10\nmax_parallel: 4\nfailure:\n  threshold_percent: 20\nrepositories:\n")
	for j := range 6 {
		fmt.Fprintf(&b, "  - url: https://github.com/acme/service-7-%d.git\n", j)
		if j%5 == 0 {
			fmt.Fprintf(&b, "    branch: release/v%d\n    name: svc-7-%d\n", j, j)
		}
	}
	in = append(in, Input{Name: "bench.yaml", Data: []byte(b.String())})
	return in
}

const kitchenSinkTask = `version: 1
kind: Task
id: sink-task
title: "Every field"
description: |
  Two lines
  of description.
mode: transform
transformation:
  url: ssh://git@example.com:2222/acme/recipes.git
  branch: v1.2
  setup: ["make deps"]
  submodules: true
targets:
  - url: git@github.com:acme/a.git
  - url: http://127.0.0.1:3000/acme/b.git
    name: b_2
    branch: feature/x-1
  - url: file:///srv/git/c.git
    setup: [a, b]
    submodules: false
execution:
  deterministic:
    image: ghcr.io/acme/tool:1
    command: [tool, "--flag", ""]
    args: ['x', "y z", "\t"]
    env:
      GOFLAGS: -mod=mod
      _X1: ""
    verifiers: []
timeout: 1h30m
require_approval: true
pull_request:
  branch_prefix: auto/sink
  title: Sink
  body: ""
  labels: []
  reviewers: [alice, "bob"]
  draft: false
sandbox:
  namespace: ns-1
  runtime_class: gvisor
  node_selector: {"kubernetes.io/arch": amd64, pool: "batch"}
  resources:
    limits: {cpu: "2", memory: 4Gi}
    requests: {cpu: 500m}
credentials:
  github: {secret_ref: {name: gh, key: token}}
  anthropic:
    secret_ref:
      name: anthropic
      key: api.key-1
max_parallel: 1000
failure:
  threshold_percent: 0
  action: abort
`

const kitchenSinkCampaign = `version: 1
kind: Campaign
id: sink-campaign
title: Sink campaign
description: ""
template:
  mode: transform
  transformation:
    url: https://example.com/recipes
  execution:
    agentic:
      prompt: "Do it.\n"
      verifiers:
        - name: v.1
          command: ["make", "test"]
      limits:
        max_iterations: 1000
        max_tokens: 1000
        max_verifier_retries: 0
        max_steering_iterations: 100
      output:
        capture: stdout
      agent: codex
  timeout: 90s
  require_approval: false
  pull_request:
    branch_prefix: a/b/c
    title: T
    draft: true
  sandbox: {}
  credentials: {}
groups:
  - name: one
    repositories:
      - url: https://github.com/acme/x.git
      - url: https://github.com/acme/y.git
        name: y
    max_parallel: 3
  - name: two
    repositories:
      - url: https://github.com/acme/x.git
batch_size: 10000
strict_batches: true
max_parallel: 1
failure: {}
rate_limit:
  pull_requests_per_hour: 10000
  burst: 1
suspend: true
sync_policy:
  prune: true
  update: restart
`

const reportTask = `version: 1
id: report
title: Report
mode: report
repositories:
  - url: https://github.com/acme/a.git
for_each:
  - name: api
    context: services/api
  - name: web
    context: ""
execution:
  agentic:
    prompt: Report.
    output:
      schema:
        type: object
        required: [a, "b"]
        properties:
          a: {type: integer, minimum: 1, maximum: 10}
          "#b": {enum: [x, 'y', null, true, 0]}
          _c: {enum: [[]]}
`

const groupsTask = `version: 1
kind: Task
id: groups
title: Groups
groups:
  - name: g
    repositories:
      - url: https://github.com/acme/a.git
      - url: https://github.com/acme/b.git
execution:
  agentic:
    prompt: p
    limits: {}
    output: {}
max_parallel: 7
`

// trickyScalars are values at the edges of what YAML and the schema
// accept: YAML 1.1 and 1.2 booleans, octal and float forms, empty and
// null, strings that look like numbers, bounds and bad patterns.
var trickyScalars = []string{
	"", `""`, "''", "~", "null", "Null", "true", "True", "yes", "no", "on", "off", "y", "n",
	"0", "1", "-1", "01", "010", "0o10", "0x10", "1_000", "1.0", "1e3", ".5", ".inf", "-.inf", ".nan",
	"5", "20", "99", "100", "101", "999", "1000", "1001", "9999", "10000", "10001", "100000", "99999999999999999999",
	`"1"`, `"10"`, `'true'`, "!!str 1", "!!int 3", "!!float 1", "!!binary aGVsbG8=", "!!bool true", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
	"main", "develop", "a..b", "-x", "x/", "x.lock", "x.", "a//b", "@{x", "release/v1", "_x", ".x", "x y", "X", "a-", "-a", "ab-c", strings.Repeat("a", 63), strings.Repeat("a", 64),
	strings.Repeat("b", 100), strings.Repeat("b", 101),
	"https://github.com/acme/x.git", "https://u:p@github.com/acme/x.git", "http://example.com/x", "http://localhost:8080/x", "git://h/x",
	"https://github.com/acme/.git", "https://github.com/acme/../x", "git@github.com:acme/x.git", "ext::sh -c x", "file:///x", "https://h/", "https://h/a%20b",
	"30m", "1h30m", "1.5h", "90", "90s", "1d", "10µs", "9999999999h", "0s",
	"500m", "2", "4Gi", "1.5", "1Gb", "transform", "report", "pause", "abort", "file", "stdout", "in_place", "restart",
	"Task", "Campaign", "Approval", "Config", "claude-code", "token", "api.key", "key with space",
	`"tab\there"`, `"nl\nhere"`, `"\u00e9"`, "e\u0301", "\u212a", `"\x00"`, `"\ud800"`, "|\n  block\n  text", ">\n  folded\n  text",
	"[]", "{}", "[a]", "[\"\"]", "[1]", "[a, a]", "{a: b}", "{url: https://github.com/acme/z.git}", "&a x", "*a", "<<: {a: b}",
}

// fieldNames are every field the schema knows, and some it does not.
var fieldNames = []string{
	"version", "kind", "id", "title", "description", "template", "mode", "transformation", "for_each", "execution",
	"agentic", "deterministic", "timeout", "require_approval", "pull_request", "sandbox", "credentials", "repositories",
	"targets", "groups", "max_parallel", "failure", "batch_size", "strict_batches", "rate_limit", "suspend", "sync_policy", "url", "branch",
	"name", "setup", "submodules", "context", "prompt", "verifiers", "limits", "output", "agent", "image", "command",
	"args", "env", "max_iterations", "max_tokens", "max_verifier_retries", "max_steering_iterations", "schema", "capture",
	"threshold_percent", "action", "branch_prefix", "body", "labels", "reviewers", "draft", "secret_ref", "key",
	"namespace", "runtime_class", "node_selector", "resources", "memory", "cpu", "github", "anthropic",
	"pull_requests_per_hour", "burst", "prune", "update",
	"_check_repositories", "_sources", "#Task", "Kind", "unknown", "kind ", "\u212aind", "ñ", "1", "true", "null", "",
}

// mutateYAML applies one to three random edits to a YAML document.
func mutateYAML(rng *rand.Rand, src []byte) ([]byte, bool) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil || len(doc.Content) != 1 {
		return nil, false
	}
	var nodes []*yaml.Node
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		nodes = append(nodes, n)
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc.Content[0])
	for range 1 + rng.IntN(3) {
		n := nodes[rng.IntN(len(nodes))]
		switch rng.IntN(7) {
		case 0, 1: // replace a value with a tricky scalar (or snippet)
			var v yaml.Node
			s := trickyScalars[rng.IntN(len(trickyScalars))]
			if err := yaml.Unmarshal([]byte("v: "+s), &v); err != nil || len(v.Content) == 0 || len(v.Content[0].Content) < 2 {
				*n = yaml.Node{Kind: yaml.ScalarNode, Value: s}
				continue
			}
			*n = *v.Content[0].Content[1]
		case 2: // delete a mapping entry or list item
			if len(n.Content) > 0 {
				i := rng.IntN(len(n.Content))
				if n.Kind == yaml.MappingNode {
					i &^= 1
					n.Content = slices.Delete(n.Content, i, i+2)
				} else {
					n.Content = slices.Delete(n.Content, i, i+1)
				}
			}
		case 3: // add a field, known or not
			if n.Kind == yaml.MappingNode {
				k := fieldNames[rng.IntN(len(fieldNames))]
				v := nodes[rng.IntN(len(nodes))]
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, cloneNode(v))
			}
		case 4: // duplicate a list item or mapping entry
			if len(n.Content) > 0 {
				i := rng.IntN(len(n.Content))
				if n.Kind == yaml.MappingNode {
					i &^= 1
					n.Content = append(n.Content, cloneNode(n.Content[i]), cloneNode(n.Content[i+1]))
				} else {
					n.Content = append(n.Content, cloneNode(n.Content[i]))
				}
			}
		case 5: // rename a key
			if n.Kind == yaml.MappingNode && len(n.Content) > 0 {
				i := rng.IntN(len(n.Content)) &^ 1
				n.Content[i] = &yaml.Node{Kind: yaml.ScalarNode, Value: fieldNames[rng.IntN(len(fieldNames))]}
			}
		case 6: // change a scalar's style
			if n.Kind == yaml.ScalarNode {
				styles := []yaml.Style{0, yaml.DoubleQuotedStyle, yaml.SingleQuotedStyle, yaml.LiteralStyle, yaml.FoldedStyle, yaml.FlowStyle}
				n.Style = styles[rng.IntN(len(styles))]
				n.Tag = ""
			}
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, false
	}
	return buf.Bytes(), true
}

func cloneNode(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = nil
	for _, x := range n.Content {
		c.Content = append(c.Content, cloneNode(x))
	}
	return &c
}
