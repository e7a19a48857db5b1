package spec_test

import (
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue/format"
	"cuelang.org/go/encoding/yaml"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// TestYAMLNamesAsCUE loads definitions as YAML, whose repositories are
// named in the document's syntax, and the same definitions as CUE, whose
// repositories are named after evaluation: both must give the same
// definition (digest and names), or the same errors.
func TestYAMLNamesAsCUE(t *testing.T) {
	const work = "execution:\n  deterministic:\n    image: alpine:3\n    command: [sh, -c, 'true']\n"
	indent := func(s, by string) string {
		return by + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+by) + "\n"
	}
	cases := []struct {
		name, doc string
		// names are the repositories' names in the order RepoNames
		// lists them; nil when the definition is refused.
		names []string
		// field is the field of the error when it is refused.
		field string
	}{
		{
			name: "task repositories",
			doc: "version: 1\nkind: Task\nid: t\ntitle: T\n" + work + "repositories:\n" +
				"  - url: https://github.com/acme/api.git\n" +
				"  - url: https://github.com/acme/web/\n" +
				"  - {url: 'git@github.com:acme/cli.git'}\n" +
				"  - \"url\": file:///srv/git/tools\n" +
				"  - url: https://github.com/acme/api.git\n    name: api-fork\n",
			names: []string{"api", "web", "cli", "tools", "api-fork"},
		},
		{
			name: "anchors and merge keys",
			doc: "version: 1\nkind: Task\nid: t\ntitle: T\n" + work + "repositories:\n" +
				"  - &api\n    url: https://github.com/acme/api.git\n" +
				"  - <<: *api\n    name: api-again\n" +
				"  - url: &web https://github.com/acme/web.git\n" +
				"  - {url: *web, name: web-again}\n",
			names: []string{"api", "api-again", "web", "web-again"},
		},
		{
			name: "task transformation and targets",
			doc: "version: 1\nkind: Task\nid: t\ntitle: T\n" + work +
				"transformation:\n  url: https://github.com/acme/recipes.git\n" +
				"targets:\n  - url: https://github.com/acme/a.git\n  - url: https://github.com/acme/b.git\n",
			names: []string{"recipes", "a", "b"},
		},
		{
			name: "task groups",
			doc: "version: 1\nkind: Task\nid: t\ntitle: T\n" + work + "groups:\n" +
				"  - name: one\n    repositories:\n      - url: https://github.com/acme/a.git\n      - url: https://github.com/acme/b.git\n" +
				"  - name: two\n    repositories:\n      - url: https://github.com/acme/c.git\n        name: c2\n",
			names: []string{"a", "b", "c2"},
		},
		{
			name: "campaign template transformation and groups",
			doc: "version: 1\nkind: Campaign\nid: c\ntitle: C\ntemplate:\n" + indent(work, "  ") +
				"  transformation:\n    url: https://github.com/acme/recipes.git\n" +
				"groups:\n  - name: one\n    repositories:\n      - url: https://github.com/acme/a.git\n",
			names: []string{"recipes", "a"},
		},
		{
			name: "campaign repositories",
			doc: "version: 1\nkind: Campaign\nid: c\ntitle: C\ntemplate:\n" + indent(work, "  ") +
				"repositories:\n  - url: https://github.com/acme/a.git\n  - url: ssh://git@example.com/acme/b\n",
			names: []string{"a", "b"},
		},
		{
			name: "two repositories named alike",
			doc: "version: 1\nkind: Campaign\nid: c\ntitle: C\ntemplate:\n" + indent(work, "  ") +
				"repositories:\n  - url: https://github.com/acme/api.git\n  - url: https://github.com/other/api\n",
			field: "repositories",
		},
		{
			name: "a name the URL cannot give",
			doc: "version: 1\nkind: Task\nid: t\ntitle: T\n" + work +
				"repositories:\n  - url: https://github.com/acme/..git\n",
			field: "repositories[0].name",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := yaml.Extract("d.yaml", []byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			cueSrc, err := format.Node(f)
			if err != nil {
				t.Fatal(err)
			}
			asYAML := load(t, map[string]string{"d.yaml": tc.doc})
			asCUE := load(t, map[string]string{"d.cue": string(cueSrc)})
			if tc.names == nil {
				for _, r := range []*spec.Result{asYAML, asCUE} {
					if len(r.Errors) != 1 || r.Errors[0].Field != tc.field {
						t.Fatalf("errors %v, want one at %s", r.Errors, tc.field)
					}
				}
				if y, c := asYAML.Errors[0].Msg, asCUE.Errors[0].Msg; y != c {
					t.Errorf("YAML's error %q, CUE's %q", y, c)
				}
				return
			}
			for _, r := range []*spec.Result{asYAML, asCUE} {
				if len(r.Errors) > 0 || len(r.Definitions) != 1 {
					t.Fatalf("definitions %d, errors %v", len(r.Definitions), r.Errors)
				}
			}
			y, c := asYAML.Definitions[0], asCUE.Definitions[0]
			if got := repoNames(y); !slices.Equal(got, tc.names) {
				t.Errorf("YAML's names %q, want %q", got, tc.names)
			}
			if got := repoNames(c); !slices.Equal(got, tc.names) {
				t.Errorf("CUE's names %q, want %q", got, tc.names)
			}
			if y.Digest != c.Digest {
				t.Errorf("YAML's digest %s, CUE's %s: the same definition differs", y.Digest, c.Digest)
			}
		})
	}
}

// repoNames lists a definition's repositories' names: the transformation,
// then repositories or targets, then each group's.
func repoNames(d spec.Definition) []string {
	var rs []spec.Repository
	switch {
	case d.Task != nil:
		if d.Task.Transformation != nil {
			rs = append(rs, *d.Task.Transformation)
		}
		rs = append(append(rs, d.Task.Repositories...), d.Task.Targets...)
		for _, g := range d.Task.Groups {
			rs = append(rs, g.Repositories...)
		}
	case d.Campaign != nil:
		if d.Campaign.Template.Transformation != nil {
			rs = append(rs, *d.Campaign.Template.Transformation)
		}
		rs = append(rs, d.Campaign.Repositories...)
		for _, g := range d.Campaign.Groups {
			rs = append(rs, g.Repositories...)
		}
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
	}
	return names
}
