package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/fleetlift/fleetlift/schemas"
)

// TestTemplateRunsOneRelease: the campaigns template names one fleetlift
// release: its CI installs it (the setup action's tag, the one pin), and
// the yaml-language-server line of each of its YAML files points the
// editor at that release's JSON Schema for the file's kind, as the README
// installs it locally.
func TestTemplateRunsOneRelease(t *testing.T) {
	const tmpl = "../../campaigns-template"
	wf, err := os.ReadFile(filepath.Join(tmpl, ".github/workflows/fleetlift-plan.yml"))
	if err != nil {
		t.Fatal(err)
	}
	pins := regexp.MustCompile(`uses: fleetlift/fleetlift/\.github/actions/setup-fleetlift@(\S+)`).FindAllSubmatch(wf, -1)
	if len(pins) != 1 || !regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`).Match(pins[0][1]) {
		t.Fatalf("the workflow must install fleetlift with the setup action at one release tag: %q", pins)
	}
	release := string(pins[0][1])
	for _, bad := range []string{"@latest", "go install", "go-version", "--state none"} {
		if bytes.Contains(wf, []byte(bad)) {
			t.Errorf("the workflow still has %q", bad)
		}
	}
	if !bytes.Contains(wf, []byte(`--comment-on "$PR_URL"`)) {
		t.Errorf("the workflow does not keep its plan comment with --comment-on")
	}
	files, _ := filepath.Glob(filepath.Join(tmpl, "campaigns", "*.y*ml"))
	files = append(files, filepath.Join(tmpl, "fleetlift.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := "config.schema.json"
		if filepath.Base(f) != "fleetlift.yaml" {
			name = "task.schema.json"
			if regexp.MustCompile(`(?m)^kind: Campaign$`).Match(b) {
				name = "campaign.schema.json"
			}
		}
		want := "# yaml-language-server: $schema=" + schemas.URL(release, name) + "\n"
		if !bytes.HasPrefix(b, []byte(want)) {
			first, _, _ := bytes.Cut(b, []byte("\n"))
			t.Errorf("%s starts with %q, want %q", f, first, want)
		}
	}
	readme, err := os.ReadFile(filepath.Join(tmpl, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`v[0-9]+\.[0-9]+\.[0-9]+`).FindAll(readme, -1) {
		if string(m) != release {
			t.Errorf("the template's README names release %s, its workflow %s", m, release)
		}
	}
}
