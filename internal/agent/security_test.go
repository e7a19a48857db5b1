package agent_test

import (
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// A transform tries every way to approve its own change: write
// steering.json, rewrite result.json and status.json, and leave a process
// in a session of its own to write the approval once the agent waits for
// one. None works: the protocol directory is not writable from a command,
// and nothing the command started is alive when the agent waits.
func TestTransformCannotApproveItself(t *testing.T) {
	o := options(t)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := manifest(repo("svc", remote))
	m.RequireApproval = true
	marker := "fleetlift-self-approver-" + strconv.Itoa(os.Getpid())
	approve := `{"action":"approve","iteration":0}`
	m.Execution.Command = sh(`echo change >> README.md
for f in steering.json result.json status.json manifest.json; do
	if printf '` + approve + `' > "$FLEETLIFT_WORKSPACE/.fleetlift/$f" 2>/dev/null; then echo "wrote $f"; else echo "refused $f"; fi >> ATTEMPTS
done
setsid sh -c 'touch "/tmp/$0.up"; sleep 2; printf %s "$1" > "$FLEETLIFT_WORKSPACE/.fleetlift/steering.json"; :' ` + marker + ` '` + approve + `' </dev/null >/dev/null 2>&1 &
while [ ! -e /tmp/` + marker + `.up ]; do sleep 0.01; done
echo started >> ATTEMPTS`)
	wait := startRun(t, o, m)
	waitStatus(t, o.Workspace, "awaiting input", awaitingInput(0))

	if left := processesWith(t, marker); len(left) > 0 {
		t.Fatalf("a process the transform started is alive while the agent awaits approval: %v", left)
	}
	var res protocol.Result
	readJSON(t, filepath.Join(o.Workspace, protocol.Dir, protocol.ResultFile), &res)
	attempts := diffOf(repoResult(t, res, "svc"), "ATTEMPTS")
	if attempts == nil {
		t.Fatalf("result.json is not the agent's: %+v", res)
	}
	for _, f := range []string{"steering.json", "result.json", "status.json", "manifest.json"} {
		if !strings.Contains(attempts.Diff, "+refused "+f) {
			t.Errorf("the transform could write .fleetlift/%s:\n%s", f, attempts.Diff)
		}
	}
	if diffOf(repoResult(t, res, "svc"), "README.md") == nil {
		t.Errorf("the change awaiting approval is not the transform's: %+v", res.Repositories)
	}
	if st := status(t, o.Workspace); st.Phase != protocol.PhaseAwaitingInput {
		t.Fatalf("phase %s: the transform's approval was taken", st.Phase)
	}
	steer(t, o.Workspace, protocol.Steering{Action: protocol.ActionReject})
	if res := wait(); res.Status != protocol.PhaseCancelled || left(o, "svc") {
		t.Fatalf("phase %s after reject; change left %v", res.Status, left(o, "svc"))
	}
}

// Setup, transform and verifier commands never see the git or forge token,
// under its own name or another; the agent CLI sees only the variables
// the operator gave it, and nothing the agent writes holds a secret.
func TestCommandsNeverSeeTokens(t *testing.T) {
	const gitToken, forgeToken, apiKey = "git_token_0123456789", "forge_token_0123456789", "sk-api-key-0123456789"
	o := options(t,
		"FLEETLIFT_GIT_TOKEN="+gitToken,
		"FLEETLIFT_FORGE_TOKEN="+forgeToken,
		"GITHUB_TOKEN="+forgeToken, // the same token under a name nobody told the agent
		"ANTHROPIC_API_KEY="+apiKey,
		"FLEETLIFT_AGENT_CLI_ENV=ANTHROPIC_API_KEY",
		"GOPROXY=off",
	)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	r := repo("svc", remote)
	r.Setup = []string{"env > SETUP_ENV.txt"}
	m := manifest(r)
	m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "dump-env"}
	m.Verifiers = []protocol.Verifier{
		{Name: "env", Command: sh(`env > VERIFY_ENV.txt`)},
		{Name: "echo", Command: sh(`echo "key=$ANTHROPIC_API_KEY token=$FLEETLIFT_GIT_TOKEN forge=$FLEETLIFT_FORGE_TOKEN gh=$GITHUB_TOKEN"`)},
	}
	res := run(t, o, m)
	if res.Status != protocol.PhaseComplete {
		t.Fatalf("phase %s %q", res.Status, res.Error)
	}
	files := map[string]string{}
	for _, f := range []string{"SETUP_ENV.txt", "AGENT_ENV.txt", "VERIFY_ENV.txt"} {
		files[f] = leftFile(t, o, remote, res, "svc", f)
	}
	for f, env := range files {
		for _, secret := range []string{gitToken, forgeToken} {
			if strings.Contains(env, secret) {
				t.Errorf("%s: a command saw a token:\n%s", f, env)
			}
		}
		if strings.Contains(env, "FLEETLIFT_FORGE_") || strings.Contains(env, "FLEETLIFT_GIT_TOKEN") || strings.Contains(env, "FLEETLIFT_AGENT_CLI") {
			t.Errorf("%s: a command saw the agent's settings:\n%s", f, env)
		}
		if !strings.Contains(env, "GOPROXY=off") {
			t.Errorf("%s: a command lost an ordinary variable:\n%s", f, env)
		}
		if want := f == "AGENT_ENV.txt"; strings.Contains(env, "ANTHROPIC_API_KEY="+apiKey) != want {
			t.Errorf("%s: the agent CLI's key visible = %v; want %v", f, !want, want)
		}
	}
	if v := repoResult(t, res, "svc").VerifierResults; len(v) != 2 || v[1].Output != "key= token= forge= gh=\n" {
		t.Errorf("verifier output %+v", v)
	}
	// Nothing the agent wrote, in or beside the workspace, holds a secret.
	_ = filepath.WalkDir(filepath.Dir(o.Workspace), func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, secret := range []string{gitToken, forgeToken, apiKey} {
			if strings.Contains(string(data), secret) && !strings.HasSuffix(p, "AGENT_ENV.txt") {
				t.Errorf("%s holds a secret", p)
			}
		}
		return nil
	})
}

// A definition names its repositories, so it could name any repository on
// the worker's disk: local repositories are cloned only from under the
// directories the operator allowed, whichever way they are written and
// whatever links lead out of them.
func TestFileRepositoriesOnlyUnderAllowedRoots(t *testing.T) {
	allowed, outside := t.TempDir(), t.TempDir()
	inside := gittest.NewRemote(t, allowed, "inside", map[string]string{"README.md": "# inside\n"})
	secret := gittest.NewRemote(t, outside, "secret", map[string]string{"SECRET.md": "do not read\n"})
	if err := os.Symlink(secret, filepath.Join(allowed, "link")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		roots []string
		url   string
		ok    bool
	}{
		{"path under an allowed root", []string{allowed}, inside, true},
		{"file URL under an allowed root", []string{allowed}, "file://" + inside, true},
		{"path elsewhere", []string{allowed}, secret, false},
		{"file URL elsewhere", []string{allowed}, "file://" + secret, false},
		{"link out of an allowed root", []string{allowed}, "file://" + filepath.Join(allowed, "link"), false},
		{"no root allowed", nil, inside, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options(t)
			o.FileRoots = tt.roots
			m := manifest(repo("svc", tt.url))
			m.Execution.Command = sh(`ls > FILES.txt`)
			res := run(t, o, m)
			r := repoResult(t, res, "svc")
			if tt.ok {
				if r.Status != "success" {
					t.Fatalf("repository %s %q; want it cloned", r.Status, r.Error)
				}
				return
			}
			if r.Status != "failed" || !strings.Contains(r.Error, "--allow-file-root") {
				t.Fatalf("repository %s %q; want it refused naming --allow-file-root", r.Status, r.Error)
			}
			if _, err := os.Stat(filepath.Join(o.Workspace, "svc", "SECRET.md")); err == nil {
				t.Fatal("the repository outside the allowed roots was cloned")
			}
		})
	}
}

// An agent its sandbox provider started on one processor
// (protocol.EnvCommandGOMAXPROCS set) runs its commands with the
// sandbox's GOMAXPROCS, or none when the sandbox had none, and never with
// the variable that carried it.
func TestCommandsGetTheSandboxesGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct {
		name, kept, want string
	}{
		{"set", "3", "GOMAXPROCS=3"},
		{"unset", "", "GOMAXPROCS unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, "GOMAXPROCS=1", protocol.EnvCommandGOMAXPROCS+"="+tc.kept)
			remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
			m := manifest(repo("svc", remote))
			m.Execution.Command = sh(`if [ -n "${GOMAXPROCS+x}" ]; then echo "GOMAXPROCS=$GOMAXPROCS"; else echo "GOMAXPROCS unset"; fi > PROCS.txt; env > ENV.txt`)
			res := run(t, o, m)
			if res.Status != protocol.PhaseComplete {
				t.Fatalf("phase %s %q", res.Status, res.Error)
			}
			if got := strings.TrimSpace(leftFile(t, o, remote, res, "svc", "PROCS.txt")); got != tc.want {
				t.Errorf("the command saw %q, want %q", got, tc.want)
			}
			if env := leftFile(t, o, remote, res, "svc", "ENV.txt"); strings.Contains(env, protocol.EnvCommandGOMAXPROCS) {
				t.Errorf("the command saw %s:\n%s", protocol.EnvCommandGOMAXPROCS, env)
			}
		})
	}
}

// The agent CLI is pointed at the worker's gateway for the model APIs
// the gateway serves, and for no other: an API the gateway does not
// serve it reaches as the operator's variables say.
func TestAgentCLIReachesTheGatewayForWhatItServes(t *testing.T) {
	const sandboxKey, operatorKey = "fleetlift-gw-sandbox-key", "sk-ant-operator-key"
	for _, tc := range []struct {
		apis      []string
		want, not []string
	}{
		{[]string{"openai"}, []string{"OPENAI_BASE_URL=http://127.0.0.1:", "/openai/v1", "OPENAI_API_KEY=" + sandboxKey, "ANTHROPIC_API_KEY=" + operatorKey}, []string{"ANTHROPIC_BASE_URL="}},
		{[]string{"anthropic", "openai"}, []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:", "ANTHROPIC_API_KEY=" + sandboxKey, "OPENAI_API_KEY=" + sandboxKey}, []string{operatorKey}},
		{nil, []string{"ANTHROPIC_API_KEY=" + operatorKey}, []string{"ANTHROPIC_BASE_URL=", "OPENAI_BASE_URL=", sandboxKey}},
	} {
		o := options(t, "ANTHROPIC_API_KEY="+operatorKey, "FLEETLIFT_AGENT_CLI_ENV=ANTHROPIC_API_KEY")
		sock := filepath.Join(t.TempDir(), "gw.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.NotFoundHandler()}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close() })
		o.Isolation.Gateway, o.Isolation.GatewayAPIs = sock, tc.apis
		giveGatewayKey(t, o, sandboxKey)
		remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
		m := manifest(repo("svc", remote))
		m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "dump-env"}
		res := run(t, o, m)
		if res.Status != protocol.PhaseComplete {
			t.Fatalf("%v: phase %s %q", tc.apis, res.Status, res.Error)
		}
		env := leftFile(t, o, remote, res, "svc", "AGENT_ENV.txt")
		for _, w := range tc.want {
			if !strings.Contains(env, w) {
				t.Errorf("gateway serving %v: the CLI's environment lacks %q:\n%s", tc.apis, w, env)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(env, n) {
				t.Errorf("gateway serving %v: the CLI's environment has %q:\n%s", tc.apis, n, env)
			}
		}
	}
}

// An agent CLI that runs unjailed (isolation none, as in a pod whose
// runtime is the boundary) reaches the gateway too, through a port of the
// agent's loopback relayed to the gateway's socket, with the sandbox's
// key: the operator's key is never its.
func TestUnjailedAgentCLIReachesTheGateway(t *testing.T) {
	const sandboxKey, operatorKey = "fleetlift-gw-sandbox-key", "sk-ant-operator-key"
	var got []string
	var mu sync.Mutex
	sock := filepath.Join(t.TempDir(), "gw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.Path+" "+r.Header.Get("X-Api-Key"))
		mu.Unlock()
		fmt.Fprint(w, `{"type":"message","content":[{"type":"text","text":"from the gateway"}]}`)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	o := options(t, "ANTHROPIC_API_KEY="+operatorKey, "FLEETLIFT_AGENT_CLI_ENV=ANTHROPIC_API_KEY")
	o.Isolation = nil
	o.GitGateway, o.ModelAPIs = sock, []string{"anthropic"}
	giveGatewayKey(t, o, sandboxKey)
	remote := gittest.NewRemote(t, "", "svc", map[string]string{"README.md": "# svc\n"})
	m := manifest(repo("svc", remote))
	m.Execution = protocol.Execution{Type: protocol.ExecutionAgentic, Prompt: "call-model dump-env"}
	res := run(t, o, m)
	if res.Status != protocol.PhaseComplete {
		t.Fatalf("phase %s %q", res.Status, res.Error)
	}
	if answer := leftFile(t, o, remote, res, "svc", "MODEL.txt"); !strings.Contains(answer, "from the gateway") {
		t.Errorf("the CLI's call got %q; want the gateway's answer", answer)
	}
	mu.Lock()
	defer mu.Unlock()
	// The model call, and the agent's question of its usage.
	if !slices.Equal(got, []string{"/v1/messages " + sandboxKey, "/fleetlift/usage " + sandboxKey}) {
		t.Errorf("the gateway got %q; want the CLI's call and the agent's usage, with the sandbox's key", got)
	}
	if env := leftFile(t, o, remote, res, "svc", "AGENT_ENV.txt"); strings.Contains(env, operatorKey) {
		t.Errorf("the CLI got the operator's key:\n%s", env)
	}
}

// An error names the repository it is about whole: the origins the git
// token may go to (a variable whose name says TOKEN) are not a secret to
// cut out of it, while the token still is.
func TestRedactionKeepsTheRepositorysHost(t *testing.T) {
	const token = "git_token_0123456789"
	const origin = "http://127.0.0.1:1"
	o := options(t, "FLEETLIFT_GIT_TOKEN="+token, "FLEETLIFT_GIT_TOKEN_ORIGINS="+origin)
	res := run(t, o, manifest(repo("svc", origin+"/acme/service-a.git")))
	r := repoResult(t, res, "svc")
	if r.Status != "failed" {
		t.Fatalf("repository %s; want the clone of a closed port to fail", r.Status)
	}
	if !strings.Contains(r.Error, origin+"/acme/service-a.git") {
		t.Errorf("the error does not name the repository: %q", r.Error)
	}
	if strings.Contains(r.Error, token) {
		t.Errorf("the error holds the token: %q", r.Error)
	}
}
