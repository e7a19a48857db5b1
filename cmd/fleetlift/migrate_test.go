package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMigrate: `fleetlift migrate` writes a YAML definition as CUE and
// back, to standard output or over the file, meaning the same (validate
// and plan see the same digest); a bad file is refused with its file,
// line and field.
func TestMigrate(t *testing.T) {
	dir := t.TempDir()
	def := writeDef(t, dir, "bump.yaml", `# Raise the go directive.
version: 1
kind: Task
id: bump
title: Bump go
timeout: 30m
repositories:
  - url: https://github.com/acme/api.git
    name: api
    branch: main
execution:
  deterministic: {image: golang, command: [go, mod, edit, -go=1.26]}
`)
	out, code := runCLI(t, "migrate", "--file", def)
	want := `version: 1
kind: Task
id: bump
title: Bump go
execution:
  deterministic:
    image: golang
    command: [go, mod, edit, -go=1.26]
repositories:
  - url: https://github.com/acme/api.git
    branch: main
`
	if code != 0 || out != want {
		t.Fatalf("migrate: exit %d\n%s\nwant:\n%s", code, out, want)
	}

	cue := filepath.Join(dir, "bump.cue")
	if out, code := runCLI(t, "migrate", "--file", def, "--to", "cue", "--defaults", "explicit", "--out", cue); code != 0 {
		t.Fatalf("migrate --to cue: exit %d\n%s", code, out)
	}
	data, _ := os.ReadFile(cue)
	for _, line := range []string{`kind:    "Task"`, `timeout:          "30m"`, `name:   "api"`, `max_parallel: 5`} {
		if !strings.Contains(string(data), line) {
			t.Errorf("bump.cue lacks %q:\n%s", line, data)
		}
	}
	if out, code := runCLI(t, "migrate", "--file", cue, "--to", "yaml"); code != 0 || out != want {
		t.Errorf("migrate of the CUE back to YAML: exit %d\n%s", code, out)
	}
	// Both files mean the same: one digest, so a plan shows no change.
	y, err := loadOne(t.Context(), def)
	if err != nil {
		t.Fatal(err)
	}
	c, err := loadOne(t.Context(), cue)
	if err != nil {
		t.Fatal(err)
	}
	if y.Digest != c.Digest {
		t.Errorf("bump.yaml has digest %s, bump.cue %s", y.Digest, c.Digest)
	}
	// Over the file itself.
	if out, code := runCLI(t, "migrate", "--file", def, "--out", def); code != 0 {
		t.Fatalf("migrate --out FILE: exit %d\n%s", code, out)
	}
	if data, _ := os.ReadFile(def); string(data) != want {
		t.Errorf("bump.yaml after migrate --out bump.yaml:\n%s", data)
	}
	if out, code := runCLI(t, "migrate", "--file", cue, "--out", def); code == 0 || !strings.Contains(out, "the name of a cue file ends in .cue") {
		t.Errorf("migrate --out with the other extension: exit %d\n%s", code, out)
	}

	bad := writeDef(t, dir, "bad.yaml", "version: 2\nkind: Task\nid: bad\ntitle: Bad\n")
	if out, code := runCLI(t, "migrate", "--file", bad); code == 0 || !strings.Contains(out, "bad.yaml:1:") || !strings.Contains(out, "version: unsupported schema version: 2 (supported: 1)") {
		t.Errorf("migrate of version 2: exit %d\n%s", code, out)
	}
}
