package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// standIn is the stand-in agent CLI.
func standIn(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", "stand-in-agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// options runs the agent in a new workspace with the stand-in agent CLI
// (through FLEETLIFT_AGENT_CLI), fast polling and its
// commands jailed.
func options(t *testing.T, extraEnv ...string) agent.Options {
	t.Helper()
	cli, _ := json.Marshal([]string{standIn(t)})
	env := append(gittest.Env(), protocol.EnvAgentCLI+"="+string(cli))
	env = append(env, extraEnv...)
	ws := t.TempDir()
	// As serve's: scratch repositories in the protocol directory.
	g := &git.Git{Env: env, ScratchDir: filepath.Join(ws, protocol.Dir, "git")}
	return agent.Options{
		Workspace:    ws,
		Env:          env,
		Git:          g,
		ManifestPoll: 20 * time.Millisecond,
		SteeringPoll: 50 * time.Millisecond,
		Isolation:    &agent.Isolation{Self: []string{"/proc/self/exe", "jail"}},
		// Test repositories live in temporary directories.
		FileRoots: []string{os.TempDir()},
	}
}

// manifest is a transform of the given repositories with a deterministic
// command; tests change what they need.
func manifest(repos ...protocol.Repository) protocol.Manifest {
	return protocol.Manifest{
		TaskID:         "task-1",
		Mode:           protocol.ModeTransform,
		Title:          "Test change",
		Repositories:   repos,
		Execution:      protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"true"}},
		TimeoutSeconds: 60,
		PullRequest:    &protocol.PullRequest{BranchPrefix: "fleetlift", Title: "Test change", Labels: []string{"automated"}},
		GitConfig:      protocol.GitConfig{UserName: "Fleetlift Bot", UserEmail: "bot@example.com"},
		Forge:          "local",
	}
}

func repo(name, url string) protocol.Repository {
	return protocol.Repository{Name: name, URL: url, Branch: "main"}
}

const branch = "fleetlift/task-1"

func sh(script string) []string { return []string{"sh", "-c", script} }

// run runs m and checks that result.json and status.json agree with the
// returned result.
func run(t *testing.T, o agent.Options, m protocol.Manifest) protocol.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := agent.Run(ctx, o, m)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var onDisk protocol.Result
	readJSON(t, filepath.Join(o.Workspace, protocol.Dir, protocol.ResultFile), &onDisk)
	st := status(t, o.Workspace)
	if onDisk.Status != res.Status || st.Phase != res.Status {
		t.Fatalf("result.json says %s, status.json %s, Run returned %s", onDisk.Status, st.Phase, res.Status)
	}
	if !res.Status.Terminal() || res.CompletedAt == nil {
		t.Fatalf("Run returned in phase %s (completed_at %v)", res.Status, res.CompletedAt)
	}
	return res
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, data)
	}
}

func status(t *testing.T, ws string) protocol.Status {
	t.Helper()
	var st protocol.Status
	readJSON(t, filepath.Join(ws, protocol.Dir, protocol.StatusFile), &st)
	return st
}

// waitStatus polls status.json until ok accepts it.
func waitStatus(t *testing.T, ws string, what string, ok func(protocol.Status) bool) protocol.Status {
	t.Helper()
	path := filepath.Join(ws, protocol.Dir, protocol.StatusFile)
	deadline := time.Now().Add(30 * time.Second)
	var st protocol.Status
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(path)
		if err == nil {
			st = protocol.Status{}
			if err := json.Unmarshal(data, &st); err != nil {
				t.Fatalf("status.json is not valid JSON (half written?): %v\n%s", err, data)
			}
			if ok(st) {
				return st
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("waiting for %s: last status %+v", what, st)
	return st
}

// steer writes steering.json the way the worker does: atomically.
func steer(t *testing.T, ws string, s protocol.Steering) {
	t.Helper()
	s.Timestamp = time.Now().UTC()
	data, _ := json.Marshal(s)
	path := filepath.Join(ws, protocol.Dir, protocol.SteeringFile)
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// remoteRef is the commit of ref in the bare repository, or "".
func remoteRef(t *testing.T, bare, ref string) string {
	t.Helper()
	out := gittest.Run(t, bare, "for-each-ref", "--format=%(objectname)", ref)
	return strings.TrimSpace(out)
}

// leftChange reads the change the agent left for the worker in r's
// repository (protocol.BundleFile) into a new repository with remote's
// history, as the worker does, and returns that repository and the
// change's commit; "" and "" when it left none. The commit must hold
// r.Tree on r.Base.
func leftChange(t *testing.T, o agent.Options, remote string, r protocol.RepositoryResult) (dir, commit string) {
	t.Helper()
	bundle := filepath.Join(o.Workspace, protocol.Dir, protocol.BundleFile(r.Name))
	if _, err := os.Stat(bundle); errors.Is(err, fs.ErrNotExist) {
		return "", ""
	}
	dir = t.TempDir()
	gittest.Run(t, dir, "init", "--quiet", "--bare")
	gittest.Run(t, dir, "fetch", "--quiet", remote, "+refs/heads/*:refs/heads/*")
	gittest.Run(t, dir, "fetch", "--quiet", bundle, "+"+protocol.BundleRef+":refs/left")
	commit = strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "refs/left"))
	if tree := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "refs/left^{tree}")); tree != r.Tree {
		t.Fatalf("the change left in %s has tree %s, the result says %s", r.Name, tree, r.Tree)
	}
	if parent := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "refs/left^")); r.Base == "" || parent != r.Base {
		t.Fatalf("the change left in %s builds on %s, the result says %q", r.Name, parent, r.Base)
	}
	return dir, commit
}

// leftFile is path in the change the agent left for the worker in
// repository name of res (leftChange).
func leftFile(t *testing.T, o agent.Options, remote string, res protocol.Result, name, path string) string {
	t.Helper()
	dir, commit := leftChange(t, o, remote, repoResult(t, res, name))
	if commit == "" {
		t.Fatalf("no change left in %s", name)
	}
	return gittest.Run(t, dir, "show", commit+":"+path)
}

// left reports whether the agent left a change for the worker in
// repository name.
func left(o agent.Options, name string) bool {
	_, err := os.Stat(filepath.Join(o.Workspace, protocol.Dir, protocol.BundleFile(name)))
	return err == nil
}

func repoResult(t *testing.T, res protocol.Result, name string) protocol.RepositoryResult {
	t.Helper()
	for _, r := range res.Repositories {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no result for repository %s in %+v", name, res.Repositories)
	return protocol.RepositoryResult{}
}

func diffOf(r protocol.RepositoryResult, path string) *protocol.FileDiff {
	for i := range r.Diffs {
		if r.Diffs[i].Path == path {
			return &r.Diffs[i]
		}
	}
	return nil
}

// processGone reports whether pid has exited (a zombie counts: it has).
func processGone(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return false
	}
	// pid (comm) state ...
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// giveGatewayKey writes key into the protocol directory of o's workspace,
// as a provider gives its sandbox its key to the gateway.
func giveGatewayKey(t *testing.T, o agent.Options, key string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(o.Workspace, protocol.Dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.Workspace, protocol.Dir, protocol.GatewayKeyFile), []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
}
