package agentcmd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/jail"
)

// The agent runs a fleetlift-jail that lies beside it and speaks its jail
// protocol, and jails with it as with its own jail command; a missing one,
// one from another build, or one it cannot run leaves it on its own.
func TestJailProgram(t *testing.T) {
	dir := t.TempDir()
	if got := agentcmd.JailProgram(dir); got != "" {
		t.Errorf("JailProgram of a directory without one = %q", got)
	}
	bin := filepath.Join(dir, agentcmd.JailProgramName)
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/fleetlift/fleetlift/cmd/fleetlift-jail").CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/fleetlift-jail: %v\n%s", err, out)
	}
	if got := agentcmd.JailProgram(dir); got != bin {
		t.Fatalf("JailProgram = %q, want %q", got, bin)
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
	if strings.Contains(string(out), agentcmd.JailProgramName) {
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
		if got := agentcmd.JailProgram(dir); got != "" {
			t.Errorf("%s: JailProgram = %q, want none", name, got)
		}
	}
	if err := os.Chmod(bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := agentcmd.JailProgram(dir); got != "" {
		t.Errorf("one that cannot be run: JailProgram = %q, want none", got)
	}
}

// An agent makes its scratch repositories in its workspace's protocol
// directory: its jailed commands cannot see them, and removing the
// sandbox removes them, also those of an agent killed before it closed
// them, which the system's temporary directory kept.
func TestServeMakesScratchRepositoriesInTheProtocolDirectory(t *testing.T) {
	ws := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	g, err := agentcmd.ServeGit(ws)
	if err != nil {
		t.Fatal(err)
	}
	s, err := g.NewScratch(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if want := filepath.Join(ws, protocol.Dir, "git"); filepath.Dir(s.Dir()) != want {
		t.Errorf("scratch repository at %s, want in %s", s.Dir(), want)
	}
	if left, _ := os.ReadDir(os.Getenv("TMPDIR")); len(left) != 0 {
		t.Errorf("the temporary directory holds %d entries", len(left))
	}
}
