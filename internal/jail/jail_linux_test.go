package jail

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The test binary is its own jail: Self runs TestMain's "jail" branch.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "jail":
			os.Exit(Main(os.Args[2:]))
		case helperUnderTerminal:
			os.Exit(underTerminal(os.Args[2:]))
		case helperProbe:
			os.Exit(probe(os.Args[2:]))
		case helperInContainer:
			os.Exit(inContainer(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

var self = []string{"/proc/self/exe", "jail"}

// box is a sandbox-like layout: a state directory holding a workspace
// (with a protocol directory and a prompt file in it) and a home.
type box struct {
	state, ws, home, pdir, prompt, secret string
}

func newBox(t *testing.T) box {
	t.Helper()
	state := t.TempDir()
	b := boxAt(state)
	for _, d := range []string{b.pdir, b.home, filepath.Dir(b.secret)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, content := range map[string]string{
		b.prompt:                             "the prompt",
		filepath.Join(b.pdir, "result.json"): `{"status":"awaiting_input"}`,
		b.secret:                             "PRIVATE KEY",
		filepath.Join(b.ws, "main.go"):       "package main\n",
		filepath.Join(state, "sandboxes", "other"): "another sandbox",
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

func (b box) jail() *Jail {
	return &Jail{Self: self, Spec: Spec{
		Writable: []string{b.ws, b.home},
		Hidden:   []string{b.state, b.pdir},
		Readable: []string{b.prompt},
		Scratch:  DefaultScratch,
	}}
}

// run runs a shell script in the jail and returns its exit code and
// combined output.
func run(t *testing.T, j *Jail, dir, script string, env ...string) (int, string) {
	t.Helper()
	code, out, _ := runCmd(t, j, dir, script, env...)
	return code, out
}

func requireJail(t *testing.T, j *Jail) {
	t.Helper()
	if err := j.Check(); err != nil {
		t.Fatalf("this kernel must allow unprivileged user, mount and PID namespaces for the jail: %v", err)
	}
}

func TestJailedCommandWritesOnlyItsWorkspaceAndHome(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	requireJail(t, j)
	outside := t.TempDir()
	code, out := run(t, j, b.ws, fmt.Sprintf(`
		echo changed > main.go && echo edited-workspace
		echo cached > "$HOME_DIR/cache" && echo wrote-home
		echo x > %[1]s/escape 2>/dev/null || echo outside-refused
		echo x > .fleetlift/steering.json 2>/dev/null || echo steering-refused
		echo x > .fleetlift/result.json 2>/dev/null || echo result-refused
		rm -rf .fleetlift 2>/dev/null; test -d .fleetlift && echo protocol-dir-kept
		umount .fleetlift 2>/dev/null || echo umount-refused
		echo tmp > /tmp/left-behind && echo wrote-tmp
	`, outside), "HOME_DIR="+b.home)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"edited-workspace", "wrote-home", "outside-refused", "steering-refused", "result-refused", "protocol-dir-kept", "umount-refused", "wrote-tmp"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(b.ws, "main.go")); string(data) != "changed\n" {
		t.Errorf("workspace file = %q; the command's write did not land", data)
	}
	if _, err := os.Stat(filepath.Join(b.home, "cache")); err != nil {
		t.Errorf("home write did not land: %v", err)
	}
	for _, p := range []string{filepath.Join(outside, "escape"), filepath.Join(b.pdir, "steering.json"), "/tmp/left-behind"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written from the jail", p)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(b.pdir, "result.json")); string(data) != `{"status":"awaiting_input"}` {
		t.Errorf("result.json = %q after the jailed command", data)
	}
}

func TestJailedCommandSeesNeitherHiddenStateNorOtherProcesses(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	requireJail(t, j)
	code, out := run(t, j, b.ws, fmt.Sprintf(`
		# What the jail hides stays hidden: no mount can be undone.
		umount -l %[2]s 2>/dev/null; umount -l %[4]s 2>/dev/null
		cat %[1]s 2>&1 || true
		ls -A %[2]s
		echo "prompt: $(cat .fleetlift/prompt.txt)"
		echo "result: $(cat .fleetlift/result.json 2>&1)"
		echo "pids: $(ls /proc | grep -E '^[0-9]+$' | tr '\n' ' ')"
		cat /proc/%[3]d/environ 2>&1 || true
		echo "uid: $(id -u) gid: $(id -g)"
		grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status
	`, b.secret, filepath.Join(b.state, "sandboxes"), os.Getpid(), filepath.Dir(b.secret)))
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, "PRIVATE KEY") || strings.Contains(out, "another sandbox") || strings.Contains(out, "other\n") {
		t.Errorf("the worker's state is visible in the jail:\n%s", out)
	}
	if !strings.Contains(out, "prompt: the prompt") {
		t.Errorf("the readable prompt file is not readable:\n%s", out)
	}
	if strings.Contains(out, "awaiting_input") {
		t.Errorf("result.json is readable in the jail:\n%s", out)
	}
	var pids []string
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "pids: "); ok {
			pids = strings.Fields(rest)
		}
	}
	if len(pids) == 0 || len(pids) > 6 || pids[0] != "1" {
		t.Errorf("the jail's /proc shows processes %v; want only the jail's own, from pid 1", pids)
	}
	if strings.Contains(out, "PATH=") {
		t.Errorf("the test process's environment is readable from the jail:\n%s", out)
	}
	want := fmt.Sprintf("uid: %d gid: %d", os.Getuid(), os.Getgid())
	if !strings.Contains(out, want) {
		t.Errorf("want %q in:\n%s", want, out)
	}
	// No capability, and no way to gain one: not from a setuid or
	// file-capability program (no_new_privs), and as root not from the
	// bounding set either.
	sets := []string{"CapInh", "CapPrm", "CapEff", "CapAmb"}
	if os.Getuid() == 0 {
		sets = append(sets, "CapBnd")
	}
	for _, set := range sets {
		if !strings.Contains(out, set+":\t0000000000000000") {
			t.Errorf("the jailed command has capabilities (%s):\n%s", set, out)
		}
	}
	if !strings.Contains(out, "NoNewPrivs:\t1") {
		t.Errorf("the jailed command may gain privileges (no_new_privs unset):\n%s", out)
	}
}

func TestNothingOutlivesAJailedCommand(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	requireJail(t, j)
	marker := "fleetlift-jail-orphan-" + strconv.Itoa(os.Getpid())
	// Detached from the command in every way a shell can: a new session,
	// output elsewhere, not waited for.
	// The process is a shell whose command line carries the marker (its
	// $0); the command waits until it runs.
	code, out := run(t, j, b.ws, fmt.Sprintf(`setsid sh -c 'touch "/tmp/$0.up"; sleep 300; :' %[1]s </dev/null >/dev/null 2>&1 &
while [ ! -e /tmp/%[1]s.up ]; do sleep 0.01; done; echo started`, marker))
	if code != 0 || !strings.Contains(out, "started") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if left := processesWith(t, marker); len(left) > 0 {
		t.Fatalf("processes outlived the jailed command: %v", left)
	}
}

func TestJailExitCodes(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	requireJail(t, j)
	tests := []struct {
		name   string
		argv   []string
		code   int
		output string
	}{
		{"success", []string{"true"}, 0, ""},
		{"exit status", []string{"sh", "-c", "exit 7"}, 7, ""},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"not found", []string{"no-such-command-fleetlift"}, ExitNotFound, "no-such-command-fleetlift"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, _ := runArgv(t, j, b.ws, tt.argv)
			if code != tt.code || !strings.Contains(out, tt.output) {
				t.Errorf("exit %d, output %q; want %d and %q", code, out, tt.code, tt.output)
			}
		})
	}
}

// A path of the spec is taken as it is, whatever it holds: commas,
// spaces, quotes, a newline, what looks like a flag.
func TestJailTakesPathsAsTheyAre(t *testing.T) {
	root := filepath.Join(t.TempDir(), "a,b c'd\"e\n--drop")
	ws, hidden := filepath.Join(root, "--", "ws"), filepath.Join(root, "--uid 0")
	for _, d := range []string{ws, hidden} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(hidden, "secret"), []byte("PRIVATE"), 0o644); err != nil {
		t.Fatal(err)
	}
	// No scratch: a private /tmp would hide the test's directories all by
	// itself.
	j := &Jail{Self: self, Spec: Spec{Writable: []string{ws}, Hidden: []string{hidden}}}
	requireJail(t, j)
	code, out := run(t, j, ws, `echo landed > "$WS/out"; ls -A "$HIDDEN"; cat "$HIDDEN/secret" 2>/dev/null; echo "uid: $(id -u)"`,
		"WS="+ws, "HIDDEN="+hidden)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, "secret") || strings.Contains(out, "PRIVATE") {
		t.Errorf("the hidden directory shows in the jail:\n%s", out)
	}
	if want := fmt.Sprintf("uid: %d", os.Getuid()); !strings.Contains(out, want) {
		t.Errorf("want %q in:\n%s", want, out)
	}
	if data, _ := os.ReadFile(filepath.Join(ws, "out")); string(data) != "landed\n" {
		t.Errorf("the write to the writable directory holds %q", data)
	}
}

func TestJailRefusesBadSpecs(t *testing.T) {
	b := newBox(t)
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"relative path", Spec{Writable: []string{"workspace"}}, "must be absolute"},
		{"root", Spec{Hidden: []string{"/"}}, "not /"},
		{"missing workspace", Spec{Writable: []string{filepath.Join(b.state, "nope")}}, "no such file"},
		{"forward port 0", Spec{Forwards: []Forward{{Port: 0, Socket: "/run/x.sock"}}}, "from 1 to 65535"},
		{"forward port twice", Spec{Forwards: []Forward{{Port: 80, Socket: "/run/x.sock"}, {Port: 80, Socket: "/run/y.sock"}}}, "once"},
		{"relative forward socket", Spec{Forwards: []Forward{{Port: 80, Socket: "x.sock"}}}, "must be absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := &Jail{Self: self, Spec: tt.spec}
			if _, err := j.Command([]string{"true"}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Command: %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// processesWith lists the host's processes whose command line contains
// marker.
func processesWith(t *testing.T, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(data, []byte(marker)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return out
}

// TestCheckFromAPrivateDirectory: the caller's working directory under
// /tmp, which every jail makes private, does not make the check fail
// (fleetlift run from a checkout under /tmp).
func TestCheckFromAPrivateDirectory(t *testing.T) {
	b := newBox(t)
	t.Chdir(t.TempDir())
	if err := b.jail().Check(); err != nil {
		t.Fatalf("check with the working directory under /tmp: %v", err)
	}
}

// A jail that cannot be made says why through Cmd.SetupError, and
// nothing a jailed command does can say it in its stead.
func TestSetupErrorIsTheJailsAlone(t *testing.T) {
	b := newBox(t)
	requireJail(t, b.jail())
	t.Run("a jail that cannot be made", func(t *testing.T) {
		j := b.jail()
		notDir := filepath.Join(b.ws, "main.go")
		j.Spec.Writable = append(j.Spec.Writable, notDir)
		code, out, setupErr := runCmd(t, j, b.ws, "echo ran > ran.txt")
		if code != ExitSetup || setupErr == nil || !strings.Contains(setupErr.Error(), "writable path "+notDir+" is not a directory") {
			t.Fatalf("exit %d, setup error %v, output %q; want %d and the jail's reason", code, setupErr, out, ExitSetup)
		}
		if _, err := os.Stat(filepath.Join(b.ws, "ran.txt")); err == nil {
			t.Error("the command ran in a jail that could not be made")
		}
	})
	for name, script := range map[string]string{
		"a command that says what a jail says":          `echo "fleetlift jail: make mounts private: operation not permitted" >&2; exit 126`,
		"a command that writes the report's descriptor": `echo forged >&3; exit 126`,
		"a command that writes init's report":           `echo forged > /proc/1/fd/3; exit 126`,
	} {
		t.Run(name, func(t *testing.T) {
			code, out, setupErr := runCmd(t, b.jail(), b.ws, script)
			if code != ExitSetup || setupErr != nil {
				t.Fatalf("exit %d, setup error %v, output %q; want %d from the command and no setup error", code, setupErr, out, ExitSetup)
			}
		})
	}
}

// runCmd runs a shell script in j and returns its exit code, combined
// output and the jail's setup error.
func runCmd(t *testing.T, j *Jail, dir, script string, env ...string) (int, string, error) {
	t.Helper()
	return runArgv(t, j, dir, []string{"sh", "-c", script}, env...)
}

// runArgv runs argv in j as runCmd runs a script.
func runArgv(t *testing.T, j *Jail, dir string, argv []string, env ...string) (int, string, error) {
	t.Helper()
	cmd, err := j.Command(argv)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out), cmd.SetupError()
}

// The drop step is the probe's alone: asked to run a command, it refuses
// and runs nothing, before any namespace is made.
func TestDropRunsNoCommand(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	out, err := exec.Command("/proc/self/exe", "jail", flagDrop, "--", "touch", ran).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitSetup || !strings.Contains(string(out), "--drop runs no command") {
		t.Fatalf("--drop with a command: %v, %q; want exit %d and why", err, out, ExitSetup)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the command ran")
	}
}

// The jail starts on one processor, and its command runs with the
// GOMAXPROCS it was given, or none, never with the variable that carried
// it.
func TestJailRunsOnOneProcessorItsCommandOnItsOwn(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	requireJail(t, j)
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"GOMAXPROCS=3"}, "GOMAXPROCS=3 carrier=none"},
		{nil, "GOMAXPROCS=none carrier=none"},
	} {
		cmd, err := j.Command([]string{"sh", "-c", `echo "GOMAXPROCS=${GOMAXPROCS-none} carrier=${FLEETLIFT_JAIL_GOMAXPROCS-none}"`})
		if err != nil {
			t.Fatal(err)
		}
		cmd.Dir = b.ws
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, tc.env...)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("env %q: %v, %q; want %q", tc.env, err, out, tc.want)
		}
		if !slices.Contains(cmd.Env, "GOMAXPROCS=1") {
			t.Errorf("env %q: the jail started with %q, not on one processor", tc.env, cmd.Env)
		}
	}
}

// The jail's /proc says nothing about the host that work needs not know,
// as a container runtime's does: the masked entries are empty, the
// kernel's tunables read-only.
func TestJailMasksTheHostsProcEntries(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	requireJail(t, j)
	host, err := os.ReadFile("/proc/interrupts")
	if err != nil || len(host) == 0 {
		t.Fatalf("this host's /proc/interrupts: %v (%d bytes)", err, len(host))
	}
	code, out := run(t, j, b.ws, `
		echo "interrupts: $(wc -c < /proc/interrupts)"
		echo "kcore: $(head -c 16 /proc/kcore 2>/dev/null | wc -c)"
		echo "keys: $(cat /proc/keys 2>/dev/null | wc -c)"
		echo "acpi: $(ls -A /proc/acpi 2>/dev/null | wc -l)"
		awk '$5 == "/proc/sys" { print "sys:", $6 }' /proc/self/mountinfo
	`)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"interrupts: 0", "kcore: 0", "keys: 0", "acpi: 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "sys: ro,") {
		t.Errorf("/proc/sys is not read-only in the jail:\n%s", out)
	}
}
