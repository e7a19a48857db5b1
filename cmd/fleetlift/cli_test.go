package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
)

// runCLIErr runs fleetlift with args and returns what it wrote to
// standard output and to standard error apart, and its exit status.
func runCLIErr(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return out.String(), errOut.String(), code
}

// holdPort listens on a loopback port until the test ends, and returns
// its address.
func holdPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// TestExitStatus: scripts tell a wrong command line (2) from an
// operation that failed (1), for every command alike; under plan
// --detailed-exitcode, 2 means changes, so a wrong command line is 1.
func TestExitStatus(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nkind: Task\nid: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"unknown command", []string{"deploy"}, 2},
		{"unknown flag", []string{"status", "--colour"}, 2},
		{"a value -o does not take", []string{"validate", "-o", "yaml", dir}, 2},
		{"a value --log-level does not take", []string{"version", "--log-level", "verbose"}, 2},
		{"an argument too many", []string{"version", "extra"}, 2},
		{"a flag missing", []string{"plan"}, 2},
		{"flags that exclude each other", []string{"approve", "task/x", "--git", dir, "--push", "--pull-request"}, 2},
		{"a format migrate does not write", []string{"migrate", "--to", "json", bad}, 2},
		{"a pull request that is no number", []string{"plan", "--repo", dir, "--comment-on", "twelve"}, 2},
		{"schema --dir with a kind", []string{"schema", "--dir", dir, "task"}, 2},
		{"--forge-url without --forge-type", []string{"worker", "--forge-url", "https://git.example.com"}, 2},
		{"plan --detailed-exitcode with an unknown flag", []string{"plan", "--detailed-exitcode", "--colour"}, 1},
		{"invalid definitions", []string{"validate", dir}, 1},
		{"a directory that is not there", []string{"validate", filepath.Join(dir, "none")}, 1},
		{"success", []string{"version"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := runCLIErr(t, c.args...)
			if code != c.want {
				t.Errorf("fleetlift %s: exit %d, want %d; stderr: %s", strings.Join(c.args, " "), code, c.want, stderr)
			}
		})
	}
}

// TestJSONLogIsJSONEveryLine: with --log-format json, a log collector
// parses every line fleetlift writes to standard error, errors and
// progress lines included, whatever the command and however it fails.
func TestJSONLogIsJSONEveryLine(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nkind: Task\nid: x\nrepositories: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	busy := holdPort(t)
	state := filepath.Join(dir, "state")
	for _, c := range []struct {
		args []string
		// lines is how many lines standard error has at least.
		lines int
	}{
		{[]string{"validate", filepath.Join(dir, "none")}, 1},
		{[]string{"run", "--file", bad, "--temporal-address", freeAddr(t), "--state-dir", state}, 1},
		{[]string{"server", "--temporal-address", busy, "--state-dir", state}, 1},
		{[]string{"status", "--colour"}, 1},
		// Info from the metrics endpoint, then the error.
		{[]string{"worker", "--metrics-listen", "127.0.0.1:0", "--temporal-address", freeAddr(t), "--state-dir", state}, 2},
		// Starts the embedded server, saying so on standard error in a
		// plain line, and finds no such run.
		{[]string{"reports", "nothing", "--temporal-address", freeAddr(t), "--state-dir", state}, 2},
	} {
		args := append(c.args, "--log-format", "json")
		_, stderr, code := runCLIErr(t, args...)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code == 0 || len(lines) < c.lines {
			t.Errorf("fleetlift %s: exit %d, %d lines on standard error, want a failure and %d:\n%s", strings.Join(args, " "), code, len(lines), c.lines, stderr)
		}
		for _, line := range lines {
			var rec struct{ Level, Msg string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Level == "" || rec.Msg == "" {
				t.Errorf("fleetlift %s: a line of standard error is not a JSON record: %q", strings.Join(args, " "), line)
			}
		}
	}
}

// TestLogLevel: --log-level warn leaves out what info would say (the
// metrics endpoint a worker serves), and the error stays.
func TestLogLevel(t *testing.T) {
	args := []string{"worker", "--metrics-listen", "127.0.0.1:0", "--temporal-address", freeAddr(t), "--state-dir", t.TempDir()}
	_, stderr, _ := runCLIErr(t, args...)
	if !strings.Contains(stderr, "metrics listening") {
		t.Fatalf("at the default level, no info line:\n%s", stderr)
	}
	_, stderr, code := runCLIErr(t, append(args, "--log-level", "warn")...)
	if strings.Contains(stderr, "metrics listening") || code != 1 || !strings.Contains(stderr, "connect to Temporal") {
		t.Errorf("--log-level warn: exit %d:\n%s", code, stderr)
	}
}

// TestBusyPortIsOneLine: a server whose port is taken says so in one line
// naming the flag and the address, and exits non-zero.
func TestBusyPortIsOneLine(t *testing.T) {
	busy := holdPort(t)
	state := t.TempDir()
	for _, c := range []struct {
		flag string
		args []string
	}{
		{"--temporal-address", []string{"server", "--temporal-address", busy, "--state-dir", state}},
		{"--metrics-listen", []string{"up", "--repo", state, "--metrics-listen", busy, "--temporal-address", freeAddr(t), "--state-dir", state}},
		{"--metrics-listen", []string{"worker", "--metrics-listen", busy, "--state-dir", state}},
	} {
		_, stderr, code := runCLIErr(t, c.args...)
		want := "fleetlift: " + c.flag + " " + busy + ": the address is already in use (another fleetlift running?)\n"
		if code == 0 || stderr != want {
			t.Errorf("fleetlift %s: exit %d, stderr:\n%s\nwant:\n%s", strings.Join(c.args, " "), code, stderr, want)
		}
	}
}

// TestVersion: version says the release, the commit and the build date,
// in words and as JSON.
func TestVersion(t *testing.T) {
	out, _, code := runCLIErr(t, "version")
	if code != 0 || !strings.HasPrefix(out, "fleetlift ") || !strings.Contains(out, "commit ") || !strings.Contains(out, "built ") {
		t.Errorf("version: exit %d: %q", code, out)
	}
	out, _, code = runCLIErr(t, "version", "-o", "json")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 {
		t.Fatalf("version -o json: exit %d, %v: %s", code, err, out)
	}
	for _, k := range []string{"version", "commit", "date", "schema_version"} {
		if v[k] == nil || v[k] == "" {
			t.Errorf("version -o json has no %s: %s", k, out)
		}
	}
	if got, _, _ := runCLIErr(t, "--version"); !strings.Contains(got, "commit ") {
		t.Errorf("--version: %q", got)
	}
}

// complete returns what the shell is offered for the last of args.
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, stderr, code := runCLIErr(t, append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %v: exit %d: %s", args, code, stderr)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.HasPrefix(line, ":") {
			got = append(got, line)
		}
	}
	return got
}

// TestCompleteFlagValues: tab after -o, --sandbox, --log-format and
// --log-level offers exactly the values they take.
func TestCompleteFlagValues(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "-o", ""}, "human json"},
		{[]string{"plan", "--output", ""}, "human json markdown"},
		{[]string{"reports", "x", "-o", ""}, "table json csv markdown"},
		{[]string{"worker", "--sandbox", ""}, "local docker kubernetes kubernetes-jobs"},
		{[]string{"up", "--sandbox", "k"}, "kubernetes kubernetes-jobs"},
		{[]string{"validate", "--log-format", ""}, "text json"},
		{[]string{"server", "--log-level", ""}, "debug info warn error"},
	} {
		got := complete(t, c.args...)
		var kept []string
		for _, g := range got {
			if strings.HasPrefix(g, c.args[len(c.args)-1]) {
				kept = append(kept, g)
			}
		}
		if strings.Join(kept, " ") != c.want {
			t.Errorf("complete %v: %q, want %q", c.args, got, c.want)
		}
	}
}

// TestCompleteRunIDs: tab after status, approve and the other commands
// that take a run offers the runs Temporal records, and nothing (at
// once) when no server answers.
func TestCompleteRunIDs(t *testing.T) {
	state := t.TempDir()
	addr, c, _ := serverForTest(t, state)
	ctx := context.Background()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "task/tabbed", TaskQueue: "nobody-polls"}, "Task"); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--temporal-address", addr, "--state-dir", state}
	var got []string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got = complete(t, append(append([]string{"status"}, flags...), "")...); len(got) > 0 {
			break
		}
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "task/tabbed\t") {
		t.Fatalf("status <tab>: %q, want task/tabbed", got)
	}
	for _, cmd := range runIDCommands {
		if got := complete(t, append(append([]string{cmd}, flags...), "task/")...); len(got) != 1 || !strings.HasPrefix(got[0], "task/tabbed") {
			t.Errorf("%s task/<tab>: %q", cmd, got)
		}
	}
	if got := complete(t, append(append([]string{"approve"}, flags...), "campaign/")...); len(got) != 0 {
		t.Errorf("approve campaign/<tab>: %q, want nothing", got)
	}
	if got := complete(t, "approve", "--temporal-address", freeAddr(t), "--state-dir", state, ""); len(got) != 0 {
		t.Errorf("approve <tab> with no server: %q", got)
	}
}
