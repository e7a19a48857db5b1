package sandboxtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// UntrustedHarness tells RunUntrusted how to run fleetlift's own agent in
// one provider's sandboxes, with its isolation on.
type UntrustedHarness struct {
	// New returns a provider whose sandboxes run fleetlift-agent.
	// Required.
	New func(t *testing.T) sandbox.Provider
	// Options returns the options that provision sandbox id; the suite
	// sets ID and adds Secrets. Required.
	Options func(t *testing.T, id string) sandbox.ProvisionOptions
	// Repository makes a git repository with a README.md on main that
	// the sandbox's agent can clone and push to, and returns its URL and
	// a way to read a file on one of its branches ("" when the branch or
	// file is missing). Required.
	Repository func(t *testing.T) (url string, show func(branch, path string) string)
	// Processes is as in Harness; nil means this host's /proc.
	Processes func(t *testing.T, marker string) []string
	// NewWithEgress, when set, returns a provider like New's whose
	// sandboxes reach the network only through h, served as the egress
	// proxy (package egress) is; the suite then checks that the work's
	// HTTP requests arrive there. Providers without an egress proxy
	// leave it nil.
	NewWithEgress func(t *testing.T, h http.Handler) sandbox.Provider
	// NewWithGateway, when set, returns a provider like New's whose
	// sandboxes' agent CLIs reach their model through gw, and ModelCLI
	// is the argv of an agent CLI (FLEETLIFT_AGENT_CLI) that calls the
	// Messages API at $ANTHROPIC_BASE_URL with $ANTHROPIC_API_KEY as many
	// times as $MODEL_CALLS says, writes what it saw to MODEL_CALL.txt
	// and fails when a call does. Providers without a model gateway
	// leave both nil.
	NewWithGateway func(t *testing.T, gw *gateway.Gateway) sandbox.Provider
	ModelCLI       []string
	// SecretValue, when set, is the value the provider gives the agent's
	// secret variables instead of the ones Provision passes (a Kubernetes
	// Secret's): the work must not see it either.
	SecretValue string
	// Hidden is a directory of this host that the work must not see: the
	// one the provider's sandboxes were told to hide (as a worker hides
	// its state directory), or any when they see none of the host's
	// files. The suite writes a file into it. Required.
	Hidden string
}

// CurlModelCLI is a ModelCLI for sandboxes whose image has sh and curl.
var CurlModelCLI = []string{"sh", "-c", `n=0; : > MODEL_CALL.txt; env | sort >> MODEL_CALL.txt
while [ "$n" -lt "$MODEL_CALLS" ]; do
  code=$(curl -s -o /dev/null -w '%{http_code}' -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' \
    -d '{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages")
  echo "call $n: status $code" >> MODEL_CALL.txt
  [ "$code" = 200 ] || exit 1
  n=$((n+1))
done`}

// RunUntrusted runs what the work in a sandbox (the transform, the agent
// CLI, setup and verifiers) must not be able to do, against the real agent
// in the provider's sandboxes, driven as the worker drives it: through
// manifest.json, status.json, result.json and steering.json.
func RunUntrusted(t *testing.T, h UntrustedHarness) {
	if h.New == nil || h.Options == nil || h.Repository == nil || h.Hidden == "" {
		t.Fatal("sandboxtest: UntrustedHarness needs New, Options, Repository and Hidden")
	}
	if h.Processes == nil {
		h.Processes = func(t *testing.T, marker string) []string { return hostProcesses(t, marker) }
	}
	u := &untrusted{h: h}
	cases := []struct {
		name string
		run  func(*testing.T)
	}{
		{"TransformCannotApproveItself", u.cannotApproveItself},
		{"CommandsNeverSeeTokens", u.neverSeeTokens},
		{"NothingOutlivesItsCommand", u.nothingOutlives},
		{"HiddenStaysHidden", u.hiddenStaysHidden},
		{"CannotReachTheHost", u.cannotReachTheHost},
		{"AForkBombFailsItsTaskAlone", u.forkBomb},
	}
	if h.NewWithGateway != nil && len(h.ModelCLI) > 0 {
		cases = append(cases, struct {
			name string
			run  func(*testing.T)
		}{"ModelCallsGoThroughTheGateway", u.throughGateway})
	}
	if h.NewWithGateway != nil {
		cases = append(cases, struct {
			name string
			run  func(*testing.T)
		}{"ClonesGoThroughTheGateway", u.clonesThroughGateway})
	}
	if h.NewWithEgress != nil {
		cases = append(cases, struct {
			name string
			run  func(*testing.T)
		}{"ReachesTheNetworkThroughTheEgressProxy", u.throughEgress})
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

type untrusted struct {
	h UntrustedHarness
}

// session is one sandbox running the agent, driven as the worker does.
type session struct {
	t   *testing.T
	ctx context.Context
	p   sandbox.Provider
	id  string
	m   protocol.Manifest
	// roots are the directories its repositories may be in.
	roots []string
}

func (u *untrusted) start(t *testing.T, name string, secrets map[string]string, m protocol.Manifest) *session {
	t.Helper()
	return u.startOn(t, u.h.New(t), name, secrets, m)
}

func (u *untrusted) startOn(t *testing.T, p sandbox.Provider, name string, secrets map[string]string, m protocol.Manifest, env ...string) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*opTimeout)
	t.Cleanup(cancel)
	id := newID(name)
	opts := u.h.Options(t, id)
	opts.ID, opts.Secrets = id, secrets
	if len(env) > 0 {
		opts.Env = maps.Clone(opts.Env)
		if opts.Env == nil {
			opts.Env = map[string]string{}
		}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			opts.Env[k] = v
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if err := p.Cleanup(ctx, id); err != nil {
			t.Errorf("clean up sandbox %s: %v", id, err)
		}
	})
	if _, err := p.Provision(ctx, opts); err != nil {
		t.Fatalf("Provision(%s): %v", id, err)
	}
	s := &session{t: t, ctx: ctx, p: p, id: id, m: m, roots: filepath.SplitList(opts.Env["FLEETLIFT_ALLOW_FILE_ROOTS"])}
	s.write(protocol.ManifestFile, m)
	return s
}

// propose has the worker propose the changes the finished agent left
// (Propose), and returns the result with the pull requests.
func (s *session) propose() protocol.Result {
	s.t.Helper()
	out := Propose(s.t, s.p, s.id, s.m, s.roots...)
	for _, rr := range out.Result.Repositories {
		if rr.Status == "failed" {
			s.t.Errorf("repository %s failed: %s", rr.Name, rr.Error)
		}
	}
	return out.Result
}

func (s *session) write(name string, v any) {
	s.t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		s.t.Fatal(err)
	}
	copyTo(s.t, s.ctx, s.p, s.id, protocol.Dir+"/"+name, string(data))
}

// read decodes a protocol file; false when it is not there yet.
func (s *session) read(name string, v any) bool {
	s.t.Helper()
	rc, err := s.p.CopyFrom(s.ctx, s.id, protocol.Dir+"/"+name)
	if errors.Is(err, sandbox.ErrNotFound) {
		return false
	}
	if err != nil {
		s.t.Fatalf("CopyFrom(%s): %v", name, err)
	}
	defer rc.Close()
	if err := json.NewDecoder(rc).Decode(v); err != nil {
		return false // being replaced; read again
	}
	return true
}

// wait polls status.json until the agent is in one of phases, and returns
// its result.
func (s *session) wait(phases ...protocol.Phase) protocol.Result {
	s.t.Helper()
	deadline := time.Now().Add(opTimeout)
	var st protocol.Status
	for {
		if s.read(protocol.StatusFile, &st) {
			for _, p := range phases {
				if st.Phase == p {
					var r protocol.Result
					if !s.read(protocol.ResultFile, &r) {
						s.t.Fatalf("phase %s without a result", st.Phase)
					}
					return r
				}
			}
			if st.Phase.Terminal() {
				var r protocol.Result
				s.read(protocol.ResultFile, &r)
				s.t.Fatalf("the agent ended %s (%s: %s), want %v", st.Phase, st.Message, r.Error, phases)
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the agent did not reach %v; last status %+v", phases, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// manifest is a deterministic transform of url, run in the sandbox.
func manifest(url string, script string) protocol.Manifest {
	return protocol.Manifest{
		TaskID:         "untrusted",
		Mode:           protocol.ModeTransform,
		Title:          "untrusted work",
		Repositories:   []protocol.Repository{{Name: "svc", URL: url, Branch: "main"}},
		Execution:      protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", script}},
		TimeoutSeconds: 120,
		PullRequest:    &protocol.PullRequest{BranchPrefix: "fleetlift", Title: "untrusted work"},
		GitConfig:      protocol.GitConfig{UserName: "Fleetlift Bot", UserEmail: "bot@example.com"},
		Forge:          "local",
	}
}

const untrustedBranch = "fleetlift/untrusted"

func diffOf(r protocol.Result, path string) string {
	for _, rr := range r.Repositories {
		for _, d := range rr.Diffs {
			if d.Path == path {
				return d.Diff
			}
		}
	}
	return ""
}

// cannotApproveItself: the transform writes every protocol file it can and
// leaves a process in a session of its own to approve once the agent
// waits. Nothing is written, nothing is left, and only the worker's reject
// decides.
func (u *untrusted) cannotApproveItself(t *testing.T) {
	url, show := u.h.Repository(t)
	marker := newMarker()
	approve := `{"action":"approve","iteration":0}`
	m := manifest(url, `echo change >> README.md
for f in steering.json result.json status.json manifest.json; do
	if printf '`+approve+`' > "$FLEETLIFT_WORKSPACE/.fleetlift/$f" 2>/dev/null; then echo "wrote $f"; else echo "refused $f"; fi >> ATTEMPTS
done
setsid sh -c 'sleep `+marker+` & sleep 2; printf %s > "$FLEETLIFT_WORKSPACE/.fleetlift/steering.json"' '`+approve+`' </dev/null >/dev/null 2>&1 &
echo started >> ATTEMPTS`)
	m.RequireApproval = true
	s := u.start(t, "approve-itself", nil, m)
	r := s.wait(protocol.PhaseAwaitingInput)
	if left := u.h.Processes(t, marker); len(left) > 0 {
		t.Fatalf("a process the transform started is alive while the agent awaits approval: %v", left)
	}
	attempts := diffOf(r, "ATTEMPTS")
	for _, f := range []string{"steering.json", "result.json", "status.json", "manifest.json"} {
		if !strings.Contains(attempts, "+refused "+f) {
			t.Errorf("the transform could write .fleetlift/%s:\n%s", f, attempts)
		}
	}
	if diffOf(r, "README.md") == "" {
		t.Errorf("the result awaiting approval is not the transform's: %+v", r.Repositories)
	}
	s.write(protocol.SteeringFile, protocol.Steering{Action: protocol.ActionReject, Timestamp: time.Now().UTC()})
	s.wait(protocol.PhaseCancelled)
	if got := show(untrustedBranch, "README.md"); got != "" {
		t.Errorf("a branch was pushed though the change was rejected:\n%s", got)
	}
}

// neverSeeTokens: the agent's secrets reach neither a command's
// environment nor any process's it can read, nor anything the agent
// writes; the command's ordinary environment still works.
func (u *untrusted) neverSeeTokens(t *testing.T) {
	url, show := u.h.Repository(t)
	canary := "canary-" + newMarker() + newMarker()
	dump := `env > ENV.txt; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f"; done > PROC.txt 2>/dev/null; true`
	m := manifest(url, dump)
	m.Repositories[0].Setup = []string{`env > SETUP_ENV.txt`}
	m.Verifiers = []protocol.Verifier{{Name: "env", Command: []string{"sh", "-c", "env > VERIFY_ENV.txt"}}}
	s := u.start(t, "tokens", map[string]string{"FLEETLIFT_FORGE_TOKEN": canary, "FLEETLIFT_GIT_TOKEN": canary, "GITHUB_TOKEN": canary}, m)
	s.wait(protocol.PhaseComplete)
	r := s.propose()
	canaries := []string{canary}
	if u.h.SecretValue != "" {
		canaries = append(canaries, u.h.SecretValue)
	}
	holds := func(data string) bool {
		return slices.ContainsFunc(canaries, func(c string) bool { return strings.Contains(data, c) })
	}
	for _, f := range []string{"ENV.txt", "PROC.txt", "SETUP_ENV.txt", "VERIFY_ENV.txt"} {
		got := show(untrustedBranch, f)
		if !strings.Contains(got, "PATH=") {
			t.Errorf("%s was not pushed with the command's environment:\n%s", f, got)
		}
		if holds(got) {
			t.Errorf("%s: the work saw the agent's token:\n%s", f, got)
		}
	}
	for _, name := range []string{protocol.StatusFile, protocol.ResultFile} {
		if data := copyFrom(t, s.ctx, s.p, s.id, protocol.Dir+"/"+name); holds(data) {
			t.Errorf("%s holds the token", name)
		}
	}
	if data, _ := json.Marshal(r); holds(string(data)) {
		t.Error("the result holds the token")
	}
}

// nothingOutlives: a process the transform leaves behind, in a session of
// its own, is gone by the time the agent has moved on.
func (u *untrusted) nothingOutlives(t *testing.T) {
	url, _ := u.h.Repository(t)
	marker := newMarker()
	m := manifest(url, fmt.Sprintf(`setsid sleep %s </dev/null >/dev/null 2>&1 & sleep %s </dev/null >/dev/null 2>&1 & echo x >> README.md`, marker, marker))
	s := u.start(t, "outlive", nil, m)
	s.wait(protocol.PhaseComplete)
	if left := u.h.Processes(t, marker); len(left) > 0 {
		t.Fatalf("processes outlived the transform: %v", left)
	}
}

// hiddenStaysHidden: the work can neither list nor read what the sandbox
// keeps from it (the worker's state), whatever characters its path holds.
func (u *untrusted) hiddenStaysHidden(t *testing.T) {
	url, _ := u.h.Repository(t)
	secret := "state-" + newMarker()
	if err := os.WriteFile(filepath.Join(u.h.Hidden, "state.txt"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := "'" + strings.ReplaceAll(u.h.Hidden, "'", `'\''`) + "'"
	m := manifest(url, `{ ls -a `+dir+`; cat `+dir+`/state.txt; } > SEEN 2>&1; echo change >> README.md`)
	s := u.start(t, "hidden", nil, m)
	r := s.wait(protocol.PhaseComplete)
	seen := diffOf(r, "SEEN")
	if seen == "" {
		t.Fatalf("the change does not hold what the work saw of %s: %+v", u.h.Hidden, r.Repositories)
	}
	// ls would list state.txt on a line of its own; cat would print the
	// secret.
	if strings.Contains(seen, secret) || strings.Contains(seen, "\n+state.txt\n") {
		t.Errorf("the work saw into %s:\n%s", u.h.Hidden, seen)
	}
}

// cannotReachTheHost: the work connects to nothing on the host's
// loopback, where the control plane listens (Temporal, the Web UI,
// metrics, the webhook): a listener there, as the Web UI's, accepts no
// connection from it.
func (u *untrusted) cannotReachTheHost(t *testing.T) {
	url, _ := u.h.Repository(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	m := manifest(url, `git ls-remote http://`+l.Addr().String()+`/control-plane.git > REACH 2>&1; echo "exit $?" >> REACH; echo change >> README.md`)
	s := u.start(t, "reach", nil, m)
	r := s.wait(protocol.PhaseComplete)
	reach := diffOf(r, "REACH")
	if reach == "" {
		t.Fatalf("the change does not hold what the work tried: %+v", r.Repositories)
	}
	if n := accepted.Load(); n > 0 {
		t.Errorf("the work reached a port on the host's loopback (%d connections):\n%s", n, reach)
	}
}

// throughEgress: the work's HTTP requests (git's, through the proxy
// variables the agent gives it) arrive at the egress proxy, naming the
// host the work asked for; the work resolved nothing itself.
func (u *untrusted) throughEgress(t *testing.T) {
	url, _ := u.h.Repository(t)
	var seen atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Method + " " + r.URL.String())
		http.Error(w, "refused by the test's egress proxy", http.StatusForbidden)
	})
	m := manifest(url, `git ls-remote http://registry.example/pkg.git > EGRESS 2>&1; echo "exit $?" >> EGRESS; echo change >> README.md`)
	s := u.startOn(t, u.h.NewWithEgress(t, h), "egress", nil, m)
	r := s.wait(protocol.PhaseComplete)
	got, _ := seen.Load().(string)
	if !strings.Contains(got, "http://registry.example/pkg.git/info/refs") {
		t.Errorf("the egress proxy saw %q; want git's request for registry.example. The work said:\n%s", got, diffOf(r, "EGRESS"))
	}
}

// forkBomb: work that starts processes without end is held to the
// sandbox's process limit until its timeout fails its task; meanwhile
// another task runs to completion and this host can start processes.
// Nothing of the bomb is left.
func (u *untrusted) forkBomb(t *testing.T) {
	url, _ := u.h.Repository(t)
	marker := newMarker()
	m := manifest(url, `while :; do (sleep `+marker+` &) 2>/dev/null; done`)
	m.TimeoutSeconds = 8
	bomb := u.start(t, "bomb", nil, m)
	otherURL, show := u.h.Repository(t)
	other := u.start(t, "beside-bomb", nil, manifest(otherURL, `echo change >> README.md`))
	other.wait(protocol.PhaseComplete)
	other.propose()
	if got := show(untrustedBranch, "README.md"); !strings.Contains(got, "change") {
		t.Errorf("the task beside the bomb did not push its change: %q", got)
	}
	if out, err := exec.Command("sh", "-c", "echo forked").CombinedOutput(); err != nil {
		t.Errorf("this host could not start a process while the bomb ran: %v %s", err, out)
	}
	// The bomb ends at its timeout, or sooner when its shell gives up
	// for want of a process to fork (dash exits 2): either way its task
	// fails.
	r := bomb.wait(protocol.PhaseFailed)
	if !strings.Contains(r.Error, "timed out") && !strings.Contains(r.Error, "exited with status") {
		t.Errorf("the bomb's task failed with %q; want its timeout or its command's end", r.Error)
	}
	if left := u.h.Processes(t, marker); len(left) > 0 {
		t.Errorf("%d processes of the bomb outlived its task", len(left))
	}
}

// throughGateway: the agent CLI reaches its model through the gateway
// alone. The model sees the real key, and the sandbox never does; the
// result counts the tokens the model reported, and what they cost at the
// worker's prices; past the task's limits.max_tokens, or its
// limits.max_cost_per_task, the gateway refuses, and the task fails
// saying why, with the work done so far kept in its result.
func (u *untrusted) throughGateway(t *testing.T) {
	const realKey = "sk-ant-real-key-canary-0123456789"
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"message","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":200,"output_tokens":80}}`)
	}))
	defer srv.Close()
	upstream, _ := neturl.Parse(srv.URL)
	// A call: 200 × $3 + 80 × $15 a million tokens = $0.0018.
	gw := &gateway.Gateway{Upstream: upstream, Key: realKey, Prices: gateway.Prices{"claude-sonnet-4-5": {Input: 3, Output: 15}}}
	p := u.h.NewWithGateway(t, gw)
	cli, _ := json.Marshal(u.h.ModelCLI)

	for _, tc := range []struct {
		name      string
		maxTokens int
		maxCost   float64
		calls     string
	}{{"within", 100000, 0, "2"}, {"past", 1000, 0, "6"}, {"past-cost", 100000, 0.005, "6"}} {
		url, _ := u.h.Repository(t)
		m := manifest(url, "")
		m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "call the model"}
		m.Limits = protocol.Limits{MaxTokens: tc.maxTokens, MaxCostUSD: tc.maxCost, MaxIterations: 1}
		s := u.startOn(t, p, "gateway-"+tc.name, nil, m, "FLEETLIFT_AGENT_CLI="+string(cli), "MODEL_CALLS="+tc.calls)
		r := s.wait(protocol.PhaseComplete, protocol.PhaseFailed)
		if data, _ := json.Marshal(r); strings.Contains(string(data), realKey) {
			t.Errorf("%s: the result holds the real key", tc.name)
		}
		seen := diffOf(r, "MODEL_CALL.txt")
		if strings.Contains(seen, realKey) || strings.Contains(s.readAll(protocol.Dir+"/"+protocol.UsageFile), realKey) {
			t.Errorf("%s: the sandbox saw the real key:\n%s", tc.name, seen)
		}
		switch tc.name {
		case "within":
			if r.Status != protocol.PhaseComplete || !strings.Contains(seen, "status 200") {
				t.Fatalf("within: phase %s (%s); the CLI saw:\n%s", r.Status, r.Error, seen)
			}
			want := protocol.ModelUsage{Requests: 2, InputTokens: 400, OutputTokens: 160, CostUSD: 0.0036}
			if r.ModelUsage == nil || *r.ModelUsage != want {
				t.Errorf("within: usage %+v; want %+v", r.ModelUsage, want)
			}
		case "past":
			// 280 tokens a call: the fourth call finds 840 used, the
			// fifth 1120 of 1000, and is refused.
			var failure string
			for _, rr := range r.Repositories {
				failure += rr.Error
			}
			if !strings.Contains(failure, "token budget is spent: 1120 of limits.max_tokens 1000 used") {
				t.Errorf("past: repositories failed with %q; want the spent budget named", failure)
			}
			if r.ModelUsage == nil || r.ModelUsage.Requests != 4 || r.ModelUsage.Refused == "" {
				t.Errorf("past: usage %+v; want 4 requests and the refusal", r.ModelUsage)
			}
		case "past-cost":
			// $0.0018 a call: the fourth call finds $0.0054 of $0.0050
			// spent, and is refused; the calls before it wrote their
			// lines, which the failed result keeps.
			var failure string
			for _, rr := range r.Repositories {
				failure += rr.Error
			}
			if r.Status != protocol.PhaseFailed || !strings.Contains(failure, "cost budget is spent: $0.0054 of limits.max_cost_per_task $0.0050 used") {
				t.Errorf("past cost: phase %s, repositories failed with %q; want the spent budget named", r.Status, failure)
			}
			if strings.Count(seen, "status 200") != 3 {
				t.Errorf("past cost: the result keeps the work of the calls before the budget was spent? it shows:\n%s", seen)
			}
			if r.ModelUsage == nil || r.ModelUsage.Requests != 3 || !strings.Contains(r.ModelUsage.Refused, "cost budget is spent") {
				t.Errorf("past cost: usage %+v; want 3 requests and the refusal", r.ModelUsage)
			}
		}
	}
	// A steer runs the agent again in its sandbox: what its calls used
	// counts on, so the result awaiting approval has both runs'.
	url, _ := u.h.Repository(t)
	m := manifest(url, "")
	m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "call the model"}
	m.Limits = protocol.Limits{MaxTokens: 100000, MaxIterations: 1}
	m.RequireApproval = true
	s := u.startOn(t, p, "gateway-steered", nil, m, "FLEETLIFT_AGENT_CLI="+string(cli), "MODEL_CALLS=2")
	if r := s.wait(protocol.PhaseAwaitingInput); r.ModelUsage == nil || r.ModelUsage.Requests != 2 {
		t.Fatalf("steered: usage before the steer %+v; want 2 requests", r.ModelUsage)
	}
	s.write(protocol.SteeringFile, protocol.Steering{Action: protocol.ActionSteer, Prompt: "once more", Iteration: 1, Timestamp: time.Now().UTC()})
	var r protocol.Result
	for deadline := time.Now().Add(opTimeout); ; time.Sleep(50 * time.Millisecond) {
		var st protocol.Status
		if s.read(protocol.StatusFile, &st) && st.Phase == protocol.PhaseAwaitingInput && st.Iteration == 1 {
			r = s.wait(protocol.PhaseAwaitingInput)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("steered: the agent did not come back after the steer; last status %+v", st)
		}
	}
	if want := (protocol.ModelUsage{Requests: 4, InputTokens: 800, OutputTokens: 320, CostUSD: 0.0072}); r.ModelUsage == nil || *r.ModelUsage != want {
		t.Errorf("steered: usage after the steer %+v; want both runs': %+v", r.ModelUsage, want)
	}
	s.write(protocol.SteeringFile, protocol.Steering{Action: protocol.ActionReject, Iteration: 1, Timestamp: time.Now().UTC()})
	s.wait(protocol.PhaseCancelled)

	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 13 {
		t.Errorf("the model was called %d times; want 13 (2 within the budget, 4 before the tokens were spent, 3 before the money was, 4 steered)", len(keys))
	}
	for _, k := range keys {
		if k != realKey {
			t.Errorf("the model was called with key %q, not the real one", k)
		}
	}
}

// clonesThroughGateway: the agent clones a repository at the forge,
// which wants the worker's token, through the gateway, with no token in
// the sandbox: the forge is sent the token and never the sandbox's key,
// and neither the work nor anything it can read holds the token.
func (u *untrusted) clonesThroughGateway(t *testing.T) {
	const token = "forge-token-canary-0123456789abcdef"
	root := t.TempDir()
	remote := gittest.NewRemote(t, root, "svc", map[string]string{"README.md": "# svc\n"})
	gittest.Commit(t, remote, "main", map[string]string{"a.txt": "a\n"})
	gittest.Commit(t, remote, "main", map[string]string{"b.txt": "b\n"})
	forge := gittest.ServeHTTP(t, root, token)
	var mu sync.Mutex
	var sent []string
	backend := forge.Config.Handler
	forge.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, r.Header.Get("Authorization"))
		mu.Unlock()
		backend.ServeHTTP(w, r)
	})
	worker := &git.Git{Env: append(gittest.Env(), git.DefaultTokenEnv+"="+token), TokenOrigins: []string{forge.URL}, ScratchDir: t.TempDir()}
	gw := &gateway.Gateway{Git: &gateway.GitReads{Git: worker}}
	p := u.h.NewWithGateway(t, gw)
	dump := `env > ENV.txt; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\0' '\n' < "$f"; done > PROC.txt 2>/dev/null; cat .git/config > CONFIG.txt; cat .git/shallow > SHALLOW.txt; true`
	m := manifest(forge.URL+"/svc.git", dump)
	m.GitConfig.CloneDepth = 2
	s := u.startOn(t, p, "clone-gateway", nil, m, "FLEETLIFT_GIT_TOKEN_ORIGINS="+forge.URL)
	r := s.wait(protocol.PhaseComplete)
	if env := diffOf(r, "ENV.txt"); !strings.Contains(env, "PATH=") {
		t.Fatalf("the work did not run in the clone: %+v", r.Repositories)
	}
	// The clone is as deep as the task asks, two of three commits: the
	// gateway's copy is, and the clone takes its shallow end.
	if got, want := diffOf(r, "SHALLOW.txt"), "+"+gittest.Run(t, remote, "rev-parse", "main~1"); !strings.Contains(got, want) || !strings.Contains(got, "@@ -0,0 +1 @@") {
		t.Errorf("the clone's shallow commits: %q; want the one %s", got, want)
	}
	for _, f := range []string{"ENV.txt", "PROC.txt", "CONFIG.txt"} {
		if strings.Contains(diffOf(r, f), token) {
			t.Errorf("%s: the work saw the forge's token", f)
		}
	}
	if data, _ := json.Marshal(r); strings.Contains(string(data), token) {
		t.Error("the result holds the token")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sent) == 0 {
		t.Fatal("the forge was never asked: the clone did not go through the gateway")
	}
	withToken := 0
	for _, a := range sent {
		switch a {
		case "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token)):
			withToken++
		case "": // git asks without credentials first
		default:
			t.Errorf("the forge was sent %q, not the worker's token", a)
		}
	}
	if withToken == 0 {
		t.Errorf("the forge was never sent the worker's token: %q", sent)
	}
}

// readAll is a sandbox file's content, "" when it is not there.
func (s *session) readAll(rel string) string {
	rc, err := s.p.CopyFrom(s.ctx, s.id, rel)
	if err != nil {
		return ""
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	return string(data)
}
