package spec_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// exampleFiles are the definition files under examples/.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("../../examples", func(p string, d os.DirEntry, err error) error {
		if _, ok := spec.FormatOf(p); ok && err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("examples: %v (%d files)", err, len(files))
	}
	return files
}

// loadData loads one definition file from data.
func loadData(t *testing.T, name string, data []byte) spec.Definition {
	t.Helper()
	res, err := (&spec.Loader{}).LoadFiles(context.Background(), fstest.MapFS{name: {Data: data}}, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || len(res.Definitions) != 1 {
		t.Fatalf("%s does not load: %v\n%s", name, res.Errors, data)
	}
	return res.Definitions[0]
}

// TestMigrateExamples: every example, normalised in its own format with
// defaults left out, is the golden file testdata/migrate/<name>; in the
// other format too, and with every default written. Each means what the
// example means (the same digest), and migrating it again changes
// nothing.
func TestMigrateExamples(t *testing.T) {
	ctx := context.Background()
	for _, file := range exampleFiles(t) {
		rel, _ := filepath.Rel("../../examples", file)
		base := strings.ReplaceAll(strings.TrimSuffix(rel, filepath.Ext(rel)), string(filepath.Separator), "__")
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			own, _ := spec.FormatOf(file)
			d := loadData(t, filepath.Base(file), data)
			for _, o := range []spec.MigrateOptions{
				{Format: spec.FormatYAML, Defaults: spec.DefaultsOmit},
				{Format: spec.FormatCUE, Defaults: spec.DefaultsOmit},
				{Format: spec.FormatYAML, Defaults: spec.DefaultsExplicit},
			} {
				out, err := spec.Migrate(ctx, d, o)
				if err != nil {
					t.Fatalf("%s, defaults %s: %v", o.Format, o.Defaults, err)
				}
				name := base + "." + string(o.Format)
				if o.Defaults == spec.DefaultsExplicit {
					name = base + ".explicit." + string(o.Format)
				}
				golden(t, filepath.Join("testdata", "migrate", name), out)

				again := loadData(t, "again."+string(o.Format), out)
				if again.Digest != d.Digest {
					t.Errorf("%s means something else: digest %s, not %s", name, again.Digest, d.Digest)
				}
				twice, err := spec.Migrate(ctx, again, o)
				if err != nil || string(twice) != string(out) {
					t.Errorf("migrating %s again changes it (%v):\n%s", name, err, twice)
				}
				if o.Format == own && o.Defaults == spec.DefaultsOmit && len(out) > len(data)+len(data)/2 {
					t.Errorf("%s is %d bytes, the example %d: defaults were not left out", name, len(out), len(data))
				}
			}
		})
	}
}

// TestMigrateLeavesOutWhatIsDerived: a repository's name that its URL
// gives, the default branch, limits and timeout go; what differs from
// the default stays, and the header always does.
func TestMigrateLeavesOutWhatIsDerived(t *testing.T) {
	src := `version: 1
kind: Task
id: bump
title: Bump
timeout: 30m
require_approval: false
repositories:
  - {url: "https://github.com/acme/api.git", name: api, branch: main}
  - {url: "https://github.com/acme/web.git", name: frontend, branch: develop}
execution:
  deterministic: {image: golang, command: [go, mod, tidy]}
`
	d := loadData(t, "bump.yaml", []byte(src))
	out, err := spec.Migrate(context.Background(), d, spec.MigrateOptions{Format: spec.FormatYAML, Defaults: spec.DefaultsOmit})
	if err != nil {
		t.Fatal(err)
	}
	want := `version: 1
kind: Task
id: bump
title: Bump
execution:
  deterministic:
    image: golang
    command: [go, mod, tidy]
repositories:
  - url: https://github.com/acme/api.git
    branch: main
  - url: https://github.com/acme/web.git
    branch: develop
    name: frontend
`
	if string(out) != want {
		t.Errorf("migrated:\n%s\nwant:\n%s", out, want)
	}
	explicit, err := spec.Migrate(context.Background(), d, spec.MigrateOptions{Format: spec.FormatYAML, Defaults: spec.DefaultsExplicit})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"timeout: 30m\n", "require_approval: false\n", "    name: api\n", "max_parallel: 5\n", "  threshold_percent: 100\n"} {
		if !strings.Contains(string(explicit), line) {
			t.Errorf("explicit form lacks %q:\n%s", line, explicit)
		}
	}
}

// golden compares got with the file path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs (run go test -update if the change is intended):\n%s", path, got)
	}
}
