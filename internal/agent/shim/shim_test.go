package shim

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func workspace(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "sub", "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	return ws
}

func run(t *testing.T, e Exec) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = e.Run(nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestExecDirectory(t *testing.T) {
	ws := workspace(t)
	for _, c := range []struct {
		dir  string
		want string // "" means refused
	}{
		{"", ws},
		{"sub/dir", filepath.Join(ws, "sub/dir")},
		{"sub/../sub", filepath.Join(ws, "sub")},
		{"../", ""},
		{"/etc", ""},
		{"sub/../..", ""},
		{"link", ""},
		{"missing", ""},
	} {
		code, out, errOut := run(t, Exec{Workspace: ws, Dir: c.dir, Args: []string{"pwd"}})
		switch {
		case c.want == "" && code != ExitShim:
			t.Errorf("dir %q: exit %d, %q; want refused (%d)", c.dir, code, out, ExitShim)
		case c.want != "" && (code != 0 || strings.TrimSpace(out) != c.want):
			t.Errorf("dir %q: exit %d, %q %q; want %s", c.dir, code, out, errOut, c.want)
		}
	}
}

func TestExecEnvironment(t *testing.T) {
	t.Setenv("FLEETLIFT_SHIM_SECRET", "secret")
	_, out, _ := run(t, Exec{ClearEnv: true, Env: []string{"A=1", "HOME=/home/x"}, Args: []string{"env"}})
	got := strings.Fields(out)
	if strings.Contains(out, "FLEETLIFT_SHIM_SECRET") || !contains(got, "A=1") || !contains(got, "HOME=/home/x") {
		t.Errorf("env with ClearEnv = %q; want A=1, HOME=/home/x and PATH only", got)
	}
	for _, kv := range got {
		if k, _, _ := strings.Cut(kv, "="); k != "A" && k != "HOME" && k != "PATH" {
			t.Errorf("undeclared variable %s", kv)
		}
	}
	// Without ClearEnv the environment is inherited.
	if _, out, _ := run(t, Exec{Env: []string{"B=2"}, Args: []string{"env"}}); !strings.Contains(out, "FLEETLIFT_SHIM_SECRET=secret") || !strings.Contains(out, "B=2") {
		t.Errorf("env without ClearEnv = %q; want the shim's environment plus B=2", out)
	}
}

func TestExecExitCodes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"sh", "-c", "exit 3"}, 3},
		{[]string{"fleetlift-no-such-command"}, ExitNotFound},
		{[]string{"/etc/passwd"}, ExitCannotRun},
		{[]string{"sh", "-c", "kill -9 $$"}, 137},
	} {
		if code, _, _ := run(t, Exec{Args: c.args}); code != c.want {
			t.Errorf("%q: exit %d; want %d", c.args, code, c.want)
		}
	}
}

// alive reports whether a process with marker in its command line runs.
func alive(t *testing.T, marker string) bool {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(marker)) {
			return true
		}
	}
	return false
}

func gone(t *testing.T, marker string) bool {
	t.Helper()
	for range 100 {
		if !alive(t, marker) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func TestExecTimeoutKillsTheGroup(t *testing.T) {
	marker := "987654321"
	code, _, errOut := run(t, Exec{Timeout: 200 * time.Millisecond, Args: []string{"sh", "-c", "sleep " + marker + " & sleep " + marker + "; echo not reached"}})
	if code != ExitTimeout || !strings.Contains(errOut, "timeout") {
		t.Errorf("exit %d, %q; want %d and a message", code, errOut, ExitTimeout)
	}
	if !gone(t, marker) {
		t.Error("the command's processes survive its timeout")
	}
}

func TestExecHangup(t *testing.T) {
	marker := "987654322"
	r, w := io.Pipe()
	done := make(chan int)
	go func() {
		done <- Exec{HangupOnEOF: true, Args: []string{"sleep", marker}}.Run(r, io.Discard, io.Discard)
	}()
	for !alive(t, marker) {
		time.Sleep(10 * time.Millisecond)
	}
	w.Close()
	if code := <-done; code != ExitHangup {
		t.Errorf("exit %d after the stream closed; want %d", code, ExitHangup)
	}
	if !gone(t, marker) {
		t.Error("the command survives the exec stream")
	}
}

// A command that exits leaves what it started in the background
// running: only the sandbox's end stops that.
func TestExecBackgroundSurvives(t *testing.T) {
	marker := "987654323"
	if code, _, _ := run(t, Exec{Args: []string{"sh", "-c", "sleep " + marker + " >/dev/null 2>&1 &"}}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !alive(t, marker) {
		t.Fatal("the background process is gone")
	}
	kill(t, marker)
}

// kill kills the processes with marker in their command line.
func kill(t *testing.T, marker string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(b, []byte(marker)) {
			continue
		}
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestExecStdinFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "stdin")
	os.WriteFile(f, []byte("hello"), 0o600)
	code, out, _ := run(t, Exec{StdinFile: f, Args: []string{"cat"}})
	if code != 0 || out != "hello" {
		t.Errorf("cat = %d, %q; want hello", code, out)
	}
	if _, err := os.Stat(f); err == nil {
		t.Error("the standard input file is left behind")
	}
}

func get(t *testing.T, g Get) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := g.Run(&out, io.Discard)
	return code, out.String()
}

func put(t *testing.T, p Put) int {
	t.Helper()
	return p.Run(io.Discard)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestFiles(t *testing.T) {
	ws, scratch := workspace(t), t.TempDir()
	// An upload in two steps, then committed.
	if code := put(t, Put{Workspace: ws, Scratch: scratch, Upload: "u1", Data: []string{b64("hel")}}); code != 0 {
		t.Fatalf("put: %d", code)
	}
	if _, err := os.Stat(filepath.Join(ws, "a")); err == nil {
		t.Error("an upload shows before its commit")
	}
	if code := put(t, Put{Workspace: ws, Scratch: scratch, Upload: "u1", Data: []string{b64("lo"), b64(" world")}, Commit: "a/b/c.txt"}); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	if code, out := get(t, Get{Workspace: ws, Path: "a/b/c.txt"}); code != 0 || out != "hello world" {
		t.Errorf("get = %d, %q", code, out)
	}
	if code, out := get(t, Get{Workspace: ws, Path: "a/b/c.txt", Offset: 6, Length: 3}); code != 0 || out != "wor" {
		t.Errorf("get range = %d, %q; want wor", code, out)
	}
	if code, out := get(t, Get{Workspace: ws, Path: "a/b/c.txt", Offset: 20, Length: 3}); code != 0 || out != "" {
		t.Errorf("get past the end = %d, %q; want nothing", code, out)
	}
	if code, out := get(t, Get{Workspace: ws, Path: "a/b/c.txt", Base64: true}); code != 0 || out != b64("hello world") {
		t.Errorf("get base64 = %d, %q", code, out)
	}
	if entries, _ := os.ReadDir(scratch); len(entries) != 0 {
		t.Errorf("scratch holds %d files after the commit", len(entries))
	}
	// An empty file.
	if code := put(t, Put{Workspace: ws, Scratch: scratch, Upload: "u2", Commit: "empty"}); code != 0 {
		t.Errorf("commit of nothing: %d", code)
	}
	if code, out := get(t, Get{Workspace: ws, Path: "empty"}); code != 0 || out != "" {
		t.Errorf("get empty = %d, %q", code, out)
	}
	// An aborted upload leaves nothing.
	put(t, Put{Workspace: ws, Scratch: scratch, Upload: "u3", Data: []string{b64("cut")}})
	if code := put(t, Put{Workspace: ws, Scratch: scratch, Upload: "u3", Abort: true}); code != 0 {
		t.Errorf("abort: %d", code)
	}
	if entries, _ := os.ReadDir(scratch); len(entries) != 0 {
		t.Errorf("scratch holds %d files after the abort", len(entries))
	}

	for _, p := range []string{"missing", "no/such/file"} {
		if code, _ := get(t, Get{Workspace: ws, Path: p}); code != ExitMissing {
			t.Errorf("get %s: %d; want %d", p, code, ExitMissing)
		}
	}
	for _, p := range []string{"../x", "/etc/passwd", "link/passwd", "sub/../../x", "sub"} {
		if code, _ := get(t, Get{Workspace: ws, Path: p}); code != ExitShim {
			t.Errorf("get %s: %d; want refused (%d)", p, code, ExitShim)
		}
	}
	for _, p := range []string{"../x", "/tmp/x", "link/x", "sub/../../x", "."} {
		if code := put(t, Put{Workspace: ws, Scratch: scratch, Upload: "u4", Data: []string{b64("x")}, Commit: p}); code != ExitShim {
			t.Errorf("put %s: %d; want refused (%d)", p, code, ExitShim)
		}
	}
	for _, u := range []string{"", "../x", "a/b", ".hidden"} {
		if code := put(t, Put{Workspace: ws, Scratch: scratch, Upload: u, Data: []string{b64("x")}}); code != ExitShim {
			t.Errorf("upload name %q: %d; want refused", u, code)
		}
	}
}

func TestInstall(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bin")
	if err := Install(self, dir); err != nil {
		t.Fatalf("Install: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, Binary))
	if err != nil || fi.Mode().Perm() != 0o555 {
		t.Fatalf("installed file: %v, %v; want mode 0555", fi, err)
	}
	// Again, over the first.
	if err := Install(self, dir); err != nil {
		t.Errorf("Install again: %v", err)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}
