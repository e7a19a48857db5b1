package plan_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/plan"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// camp writes a Campaign definition in YAML.
type camp struct {
	id      string
	prompt  string
	repos   []string // "name" or "name@branch"
	groups  map[string][]string
	prune   bool
	update  string
	suspend bool
	// rateLimit is the rate_limit line's value, if any.
	rateLimit string
}

func (c camp) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nkind: Campaign\nid: %s\ntitle: %s\n", c.id, c.id)
	if len(c.repos) > 0 {
		b.WriteString("repositories:\n")
		writeRepos(&b, "  ", c.repos)
	}
	if len(c.groups) > 0 {
		b.WriteString("groups:\n")
		for _, name := range slices.Sorted(maps.Keys(c.groups)) {
			fmt.Fprintf(&b, "  - name: %s\n    repositories:\n", name)
			writeRepos(&b, "      ", c.groups[name])
		}
	}
	prompt := c.prompt
	if prompt == "" {
		prompt = "Migrate from log.Printf to log/slog."
	}
	fmt.Fprintf(&b, "template:\n  execution:\n    agentic:\n      prompt: %q\n", prompt)
	if c.rateLimit != "" {
		fmt.Fprintf(&b, "rate_limit: %s\n", c.rateLimit)
	}
	fmt.Fprintf(&b, "suspend: %t\nsync_policy:\n  prune: %t\n", c.suspend, c.prune)
	if c.update != "" {
		fmt.Fprintf(&b, "  update: %s\n", c.update)
	}
	return b.String()
}

func writeRepos(b *strings.Builder, indent string, repos []string) {
	for _, r := range repos {
		name, branch, _ := strings.Cut(r, "@")
		fmt.Fprintf(b, "%s- url: https://github.com/acme/%s.git\n", indent, name)
		if branch != "" {
			fmt.Fprintf(b, "%s  branch: %s\n", indent, branch)
		}
	}
}

// task writes a Task definition in YAML.
func task(id, prompt string, repos ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "version: 1\nid: %s\ntitle: %s\nrepositories:\n", id, id)
	writeRepos(&b, "  ", repos)
	fmt.Fprintf(&b, "execution:\n  agentic:\n    prompt: %q\n", prompt)
	return b.String()
}

// files maps file names to definitions.
type files map[string]string

// load reads files with the real loader, as fleetlift does.
func load(t testing.TB, fs files) plan.Desired {
	t.Helper()
	fsys := fstest.MapFS{}
	for name, data := range fs {
		fsys[name] = &fstest.MapFile{Data: []byte(data)}
	}
	res, err := (&spec.Loader{Eval: spec.InProcess(1)}).Load(context.Background(), fsys, ".")
	if err != nil {
		t.Fatal(err)
	}
	return plan.Desired{Definitions: res.Definitions, Errors: res.Errors}
}

// applied is the state recorded once each definition in fs has been
// applied and is running.
func applied(t testing.TB, fs files) []state.Campaign {
	t.Helper()
	d := load(t, fs)
	if len(d.Errors) > 0 {
		t.Fatalf("fixture does not load: %v", spec.Errors(d.Errors))
	}
	var out []state.Campaign
	for _, def := range d.Definitions {
		out = append(out, record(t, def))
	}
	return out
}

func record(t testing.TB, def spec.Definition) state.Campaign {
	t.Helper()
	var v any = def.Task
	c := state.Campaign{ID: def.ID, Kind: state.Kind(def.Kind), File: def.File, SpecDigest: def.Digest,
		Generation: 1, WorkflowID: "fleetlift/" + def.ID, RunID: "run-1", Phase: state.PhaseRunning}
	if def.Campaign != nil {
		v = def.Campaign
		c.Prune = def.Campaign.SyncPolicy.Prune
		c.Suspended = def.Campaign.Suspend
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	c.Spec = b
	return c
}

// view is the part of a Change a test states.
type view struct {
	ID           string
	Action       plan.Action
	Strategy     spec.UpdateStrategy
	PreviousFile string
	Fields       []string // "path: old → new", absent as ∅
	Added        []string
	Removed      []string
	Reason       string
	Suspend      bool
	// Blind: the spec changed but the recorded spec is unknown, so there
	// is no field diff.
	Blind bool
}

func viewOf(c plan.Change) view {
	v := view{ID: c.ID, Action: c.Action, Strategy: c.Strategy, PreviousFile: c.PreviousFile,
		Added: c.Repositories.Added, Removed: c.Repositories.Removed, Reason: c.Reason,
		Suspend: c.Suspend, Blind: c.SpecChanged() && !c.FieldsKnown}
	for _, f := range c.Fields {
		v.Fields = append(v.Fields, fmt.Sprintf("%s: %s → %s", f.Path, orAbsent(f.Old), orAbsent(f.New)))
	}
	return v
}

func orAbsent(b json.RawMessage) string {
	if b == nil {
		return "∅"
	}
	return string(b)
}

func views(p plan.Plan) []view {
	var out []view
	for _, c := range p.Changes {
		out = append(out, viewOf(c))
	}
	return out
}
