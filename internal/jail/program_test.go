package jail_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/jail"
)

// A fleetlift-jail that speaks this build's protocol is found, and jails
// as the agent's own jail command does; a missing one, one from another
// build, or one that cannot be run is not.
func TestProgram(t *testing.T) {
	dir := t.TempDir()
	if got := jail.Program(dir); got != "" {
		t.Errorf("Program of a directory without one = %q", got)
	}
	bin := filepath.Join(dir, jail.ProgramName)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetlift/fleetlift/cmd/fleetlift-jail").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fleetlift-jail: %v\n%s", err, out)
	}
	if got := jail.Program(dir); got != bin {
		t.Fatalf("Program = %q, want %q", got, bin)
	}

	ws := t.TempDir()
	j := &jail.Jail{Self: []string{bin}, Spec: jail.Spec{Writable: []string{ws}, Hidden: []string{dir}, Scratch: jail.DefaultScratch}}
	cmd, err := j.Command([]string{"sh", "-c", "echo jailed > out.txt; ls " + dir})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil || cmd.SetupError() != nil {
		t.Fatalf("jailed command: %v, setup error %v\n%s", err, cmd.SetupError(), out)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(got) != "jailed\n" {
		t.Errorf("the command's file holds %q", got)
	}
	if strings.Contains(string(out), jail.ProgramName) {
		t.Errorf("the jailed command saw the hidden directory: %s", out)
	}
	// A jail it cannot make says why, through the program as through the
	// agent's own command.
	notDir := filepath.Join(ws, "out.txt")
	j.Spec.Writable = append(j.Spec.Writable, notDir)
	cmd, err = j.Command([]string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = ws
	if _, err := cmd.CombinedOutput(); err == nil || cmd.SetupError() == nil || !strings.Contains(cmd.SetupError().Error(), "is not a directory") {
		t.Errorf("a jail that cannot be made: %v, setup error %v", err, cmd.SetupError())
	}

	for name, content := range map[string]string{
		"another protocol": "#!/bin/sh\necho 1\n",
		"a failing one":    "#!/bin/sh\nexit 1\n",
	} {
		if err := os.WriteFile(bin, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		if got := jail.Program(dir); got != "" {
			t.Errorf("%s: Program = %q, want none", name, got)
		}
	}
	if err := os.Chmod(bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := jail.Program(dir); got != "" {
		t.Errorf("one that cannot be run: Program = %q, want none", got)
	}
}
