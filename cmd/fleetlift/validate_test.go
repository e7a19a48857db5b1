package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/jail"
	"github.com/fleetlift/fleetlift/internal/spec"
)

// TestMain lets the test binary serve as the spec worker, as the fleetlift
// binary does for `validate`.
func TestMain(m *testing.M) {
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	// Local sandboxes start this binary as `<exe> agent serve ...`, and
	// the agent jails its commands in `<exe> agent jail ...`.
	if args, ok := agentcmd.JailArgs(os.Args[1:], "agent"); ok {
		os.Exit(jail.Main(args))
	}
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// An agentic task's agent CLI that calls its model (standInModelCLI).
	if len(os.Args) > 1 && os.Args[1] == standInModelArg {
		os.Exit(standInModel())
	}
	// A script that runs `fleetlift` runs this binary (cliOnPath).
	if os.Getenv(asCLIEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// Tests' repositories are local, in temporary directories: the one
	// place outside the demo where local repositories are allowed.
	os.Setenv("FLEETLIFT_ALLOW_FILE_ROOTS", os.TempDir())
	// Tests run tasks as local processes unless they ask for containers,
	// whatever engine this machine has.
	os.Setenv("SANDBOX_PROVIDER", "local")
	// Sandboxes a test leaves behind (its worker stopped with tasks
	// waiting) end themselves soon after; the suite leaves none running.
	os.Setenv("FLEETLIFT_SANDBOX_ORPHAN_AFTER", "10s")
	code := kubeCP.Main(m)
	if left := leftoverAgents(time.Minute); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "agents still running a minute after the tests ended:\n%s\n", strings.Join(left, "\n"))
		code = 1
	}
	os.Exit(code)
}

// leftoverAgents waits up to d for the agents this test binary started to
// end, and lists those that did not.
func leftoverAgents(d time.Duration) []string {
	self, err := os.Executable()
	if err != nil {
		return nil
	}
	prefix := []byte(self + "\x00agent\x00serve\x00")
	deadline := time.Now().Add(d)
	for {
		var left []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.HasPrefix(cmdline, prefix) {
				left = append(left, e.Name()+": "+string(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func runCLI(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	code := run(args, &out, &out)
	return out.String(), code
}

func TestValidateExamplesAndTemplate(t *testing.T) {
	for _, dir := range []string{"../../examples", "../../campaigns-template"} {
		out, code := runCLI(t, "validate", dir)
		if code != 0 {
			t.Errorf("validate %s: exit %d\n%s", dir, code, out)
		}
		if !strings.Contains(out, "definitions valid in") {
			t.Errorf("validate %s: no summary line:\n%s", dir, out)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	out, code := runCLI(t, "validate", "-o", "json", "../../examples")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rep struct {
		Valid       bool
		Definitions []struct{ ID, Kind, File, Digest string }
		Errors      []json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	kinds := map[string]int{}
	for _, d := range rep.Definitions {
		kinds[d.Kind]++
		if d.ID == "" || !strings.HasPrefix(d.Digest, "sha256:") || !strings.HasPrefix(d.File, "../../examples/") {
			t.Errorf("incomplete definition entry: %+v", d)
		}
	}
	if !rep.Valid || len(rep.Errors) != 0 || kinds["Task"] < 6 || kinds["Campaign"] < 2 {
		t.Errorf("want every seed example and two campaigns, valid: %+v", kinds)
	}
}

// TestValidateInvalidInputs: every bad input exits 1 and each error line
// names the file, the line and column, and (for a field) the field.
func TestValidateInvalidInputs(t *testing.T) {
	root := "../../testdata/invalid"
	cases, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^error: (\S+?):(\d+):(\d+): (.+)$`)
	for _, c := range cases {
		// The generated cases are covered in internal/spec.
		if !c.IsDir() || c.Name() == "file-50mb" || c.Name() == "symlink-escape" {
			continue
		}
		t.Run(c.Name(), func(t *testing.T) {
			dir := filepath.Join(root, c.Name())
			out, code := runCLI(t, "validate", dir)
			if code != 1 {
				t.Fatalf("exit %d, want 1:\n%s", code, out)
			}
			want, err := os.ReadFile(filepath.Join(dir, "want.txt"))
			if err != nil {
				t.Fatal(err)
			}
			var errs int
			for _, l := range strings.Split(out, "\n") {
				if !strings.HasPrefix(l, "error: ") {
					continue
				}
				errs++
				m := line.FindStringSubmatch(l)
				if m == nil || !strings.HasPrefix(m[1], dir+"/") {
					t.Errorf("error line does not name file:line:col: %q", l)
				}
			}
			if wantErrs := strings.Count(string(want), "\n"); errs != wantErrs {
				t.Errorf("%d error lines, want %d (as in want.txt):\n%s", errs, wantErrs, out)
			}
		})
	}
}

func TestValidateUsageErrors(t *testing.T) {
	if out, code := runCLI(t, "validate", "does-not-exist"); code != 1 || !strings.Contains(out, "does-not-exist") {
		t.Errorf("missing dir: exit %d: %s", code, out)
	}
	if out, code := runCLI(t, "validate", "-o", "yaml", "../../examples"); code != 2 || !strings.Contains(out, `invalid argument "yaml" for "-o, --output" flag: want human or json`) {
		t.Errorf("bad -o: exit %d: %s", code, out)
	}
}
