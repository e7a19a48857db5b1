package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/egress"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/gateway"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/jail"
	"github.com/fleetlift/fleetlift/internal/metrics"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// workerFlags configure the worker and its sandboxes.
type workerFlags struct {
	// providerName is the sandbox provider: local, docker, kubernetes,
	// kubernetes-jobs, or empty to choose (local or docker).
	providerName string
	docker       dockerFlags
	kube         kubeFlags
	agentCLI     string
	agentEnv     []string
	passEnv      []string
	fileRoots    []string
	isolation    string
	egress       []string
	limits       localLimits
	// modelAPI and modelKeyEnv are --model-gateway and --model-key-env;
	// gatewayKey is set once a local provider's gateway holds the key,
	// which then goes to no sandbox.
	modelAPI    string
	modelKeyEnv string
	gatewayKey  string
	// openAIAPI and openAIKeyEnv are --openai-gateway and
	// --openai-key-env; openAIKey is set once the gateway holds that key.
	openAIAPI, openAIKeyEnv, openAIKey string
	// gitReads is set once a local provider's gateway serves the agents'
	// clones from the forge: its token then goes to no sandbox. gw is
	// that gateway, whose copies of the repositories changes are
	// proposed from.
	gitReads bool
	gw       *gateway.Gateway
	hide     []string
	queue    string
	orphan   time.Duration
	// maxSandboxes is --max-sandboxes.
	maxSandboxes int
	// forge is set by the command, not flags: the operator's forge, on
	// which the worker proposes changes and from which sandboxes clone
	// (see forgeSetup.sandbox); nil: the local forge alone.
	forge *forgeSetup
	// metrics, set by the command, records sandbox provisioning; nil:
	// not kept.
	metrics *metrics.Metrics
	// activityNews, set by the command, is called whenever an activity
	// of this process's workers starts (ended false) or ends (run follows
	// its run by it); nil: not called.
	activityNews func(ended bool)
	// unitStarted and unitEnded, set by the command, are told of each
	// unit of a run of units as it starts and ends
	// (activity.Activities.UnitStarted, UnitEnded); nil: not told.
	unitStarted func(workflowID string, u activity.UnitRef)
	unitEnded   func(workflowID string, u activity.UnitOutcome)
}

// options are the workers' options: with activityNews, an interceptor
// that calls it as each activity starts and ends.
func (w *workerFlags) options() worker.Options {
	if w.activityNews == nil {
		return worker.Options{}
	}
	return worker.Options{Interceptors: []interceptor.WorkerInterceptor{&newsInterceptor{news: w.activityNews}}}
}

// newsInterceptor calls news as each activity starts and ends.
type newsInterceptor struct {
	interceptor.WorkerInterceptorBase
	news func(ended bool)
}

func (n *newsInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &newsActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, news: n.news}
}

type newsActivity struct {
	interceptor.ActivityInboundInterceptorBase
	news func(ended bool)
}

func (a *newsActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	a.news(false)
	defer a.news(true)
	return a.Next.ExecuteActivity(ctx, in)
}

// dockerFlags configure the Docker sandbox provider; image and
// agentImage (--sandbox-image, --sandbox-agent-image) serve the
// Kubernetes ones too.
type dockerFlags struct {
	image, agentImage, agentBinary, network, scope string
	readOnly                                       bool
}

// Sandbox providers --sandbox names.
const (
	sandboxLocal  = "local"
	sandboxDocker = "docker"
)

func (w *workerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&w.providerName, "sandbox", "",
		"where tasks run: "+sandboxLocal+" (processes on this machine), "+sandboxDocker+" (a container per task, in the task's image, on the engine DOCKER_HOST names), "+
			sandboxKubernetes+" (pods the sandbox controller makes from SandboxRequests; the worker may only create those) or "+sandboxKubernetesJobs+" (Jobs this worker makes and execs into itself, for clusters without the controller); by default the one recorded in the state directory, which its first start chose: docker when an engine answered and had the sandbox and agent images, else local; --sandbox is recorded there too")
	cmd.Flags().StringVar(&w.docker.image, "sandbox-image", docker.DefaultImage,
		"docker and kubernetes: the image of tasks that name none; for docker also the one whose presence makes docker the default")
	cmd.Flags().StringVar(&w.docker.agentImage, "sandbox-agent-image", docker.DefaultAgentImage,
		"docker and kubernetes-jobs: the image fleetlift-agent is injected from into every task's image (the controller has its own for kubernetes)")
	cmd.Flags().StringVar(&w.docker.agentBinary, "sandbox-agent-binary", "",
		"docker: a static fleetlift-agent on the engine's host to bind-mount instead of the agent image's (development)")
	cmd.Flags().StringVar(&w.docker.network, "sandbox-network", docker.DefaultNetwork,
		"docker: the sandboxes' network: none, host, bridge or a network's name (cloning and pushing over the network needs one)")
	cmd.Flags().StringVar(&w.docker.scope, "sandbox-scope", defaultScope(),
		"docker: this worker's name among the workers sharing an engine; it sees and re-attaches to its scope's sandboxes only (default: the host name)")
	cmd.Flags().BoolVar(&w.docker.readOnly, "sandbox-read-only", false,
		"docker: mount task images read-only; /workspace, HOME and /tmp stay writable")
	w.kube.register(cmd)
	cmd.Flags().StringVar(&w.agentCLI, "agent-cli", "",
		`agent CLI for agentic tasks, as a JSON argv (default: Claude Code, "claude -p")`)
	cmd.Flags().StringSliceVar(&w.agentEnv, "agent-env", []string{envAnthropicAPIKey},
		"names of this process's environment variables that only the agent CLI sees in sandboxes, such as its model's API key (only when set)")
	cmd.Flags().StringSliceVar(&w.passEnv, "sandbox-env", nil,
		"names of this process's environment variables every command in sandboxes sees (only when set; never a token)")
	cmd.Flags().StringSliceVar(&w.fileRoots, "allow-file-root", nil,
		"a directory local repositories (file:// URLs and absolute paths) may be cloned from and pushed to (repeatable); by default none may")
	cmd.Flags().StringVar(&w.isolation, "sandbox-isolation", agentcmd.IsolationNamespaces,
		"how the agent isolates the work it runs: "+agentcmd.IsolationNamespaces+" (Linux user, mount and PID namespaces), or "+agentcmd.IsolationNone+" (none: the work can read tokens, approve itself and outlive its commands)")
	cmd.Flags().DurationVar(&w.orphan, "sandbox-orphan-after", agentcmd.DefaultOrphanAfter,
		"a sandbox no worker has watched for this long ends itself (a worker that never came back)")
	cmd.Flags().StringVar(&w.queue, "sandbox-queue", "",
		"the task queue for the steps on this worker's sandboxes, which only this host can reach (default: named after the host and the state directory)")
	cmd.Flags().StringSliceVar(&w.egress, "sandbox-egress", nil,
		"local and docker: a host the work in sandboxes may reach through the worker's egress proxy, as registry.npmjs.org, proxy.golang.org:443 or *.pythonhosted.org (repeatable; without a port, 80 and 443); by default the work reaches no network, and never loopback or a private address")
	cmd.Flags().StringVar(&w.limits.memory, "sandbox-memory", "4Gi",
		"local: the most memory each command in a sandbox and what it starts may use (a cgroup's, where this host lets the worker make one: cgroup v1 as root); 0: no bound")
	cmd.Flags().IntVar(&w.maxSandboxes, "max-sandboxes", 4*runtime.NumCPU(),
		"local and docker: the most sandboxes this worker runs at once (a task waiting for approval keeps its own); a task beyond them waits, and runs here or on another worker once there is room; 0: no bound")
	cmd.Flags().IntVar(&w.limits.processes, "sandbox-processes", 4096,
		"local: the most processes and threads each command in a sandbox may run at once (a cgroup's, else an rlimit, which does not bind a worker run as root); 0: no bound")
	cmd.Flags().StringVar(&w.limits.cpu, "sandbox-cpu", "0",
		"local: the most CPUs each command in a sandbox may use, as 2 or 500m (a cgroup's); 0: no bound")
	cmd.Flags().StringVar(&w.limits.tmp, "sandbox-tmp-size", "1Gi",
		"local: the size of each command's private /tmp, /var/tmp and /dev/shm, held in memory")
	cmd.Flags().StringVar(&w.limits.file, "sandbox-file-size", "8Gi",
		"local: the largest file a command in a sandbox may write; 0: no bound")
	cmd.Flags().StringVar(&w.limits.diskReserve, "sandbox-disk-reserve", "1Gi",
		"local: the free space to keep on the disk holding the sandboxes (and the state directory, if it is the same): a command that leaves less is stopped and its task fails; 0: none kept")
	cmd.Flags().StringVar(&w.modelAPI, "model-gateway", "https://api.anthropic.com",
		"the Anthropic API agent CLIs reach through this worker's model gateway, which adds the key --model-key-env names and counts tokens against each task's limits.max_tokens; the key then enters no sandbox (kubernetes: with --gateway-listen). Empty: no gateway, the key goes to the agent CLI as --agent-env says")
	cmd.Flags().StringVar(&w.openAIAPI, "openai-gateway", "",
		"an OpenAI-compatible API (its base URL without /v1, such as https://api.openai.com) agent CLIs that speak it reach through this worker's gateway, at OPENAI_BASE_URL, with the key --openai-key-env names added and tokens counted against each task's limits.max_tokens; empty: none")
	cmd.Flags().StringVar(&w.openAIKeyEnv, "openai-key-env", "OPENAI_API_KEY",
		"the variable of this process's environment holding the OpenAI-compatible API's key for --openai-gateway")
	cmd.Flags().StringVar(&w.modelKeyEnv, "model-key-env", envAnthropicAPIKey,
		"the variable of this process's environment holding the model gateway's API key; unset: no gateway")
	cmd.Flags().StringSliceVar(&w.hide, "sandbox-hide", nil,
		"a directory or file the work in sandboxes must not see (repeatable), besides the state directory and the usual credential files")
}

// commaList splits a comma-separated list, dropping blanks.
func commaList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// sandbox is what every sandbox gets: env, the agent's settings and the
// variables for its commands, and secrets, for the agent alone (the
// forge's token, the agent CLI's key). Both stay in the worker's memory.
func (w *workerFlags) sandbox() (env, secrets map[string]string, _ error) {
	env, secrets = map[string]string{}, map[string]string{}
	if w.agentCLI != "" {
		var argv []string
		if err := json.Unmarshal([]byte(w.agentCLI), &argv); err != nil || len(argv) == 0 {
			return nil, nil, fmt.Errorf(`--agent-cli must be a JSON array such as ["claude","-p"]`)
		}
		env[agent.EnvAgentCLI] = w.agentCLI
	}
	var cliOnly []string
	for _, name := range w.agentEnv {
		if strings.HasPrefix(name, "FLEETLIFT_") {
			return nil, nil, fmt.Errorf("--agent-env %s: fleetlift's own variables are not for the agent CLI", name)
		}
		if name == w.gatewayKey || name == w.openAIKey {
			continue // the model gateway holds it
		}
		if v, ok := os.LookupEnv(name); ok {
			secrets[name] = v
			cliOnly = append(cliOnly, name)
		}
	}
	if len(cliOnly) > 0 {
		env[agent.EnvAgentCLIEnv] = strings.Join(cliOnly, ",")
	}
	for _, name := range w.passEnv {
		if strings.HasPrefix(name, "FLEETLIFT_") || gitx.SecretName(name) {
			return nil, nil, fmt.Errorf("--sandbox-env %s: every command in a sandbox would see it; tokens and secrets never go to commands (give the agent CLI its key with --agent-env)", name)
		}
		if v, ok := os.LookupEnv(name); ok {
			env[name] = v
		}
	}
	roots, err := w.roots()
	if err != nil {
		return nil, nil, err
	}
	if len(roots) > 0 {
		env[agent.EnvAllowFileRoots] = strings.Join(roots, string(filepath.ListSeparator))
	}
	forgeEnv, forgeSecrets := w.forge.sandbox()
	for k, v := range forgeEnv {
		env[k] = v
	}
	for k, v := range forgeSecrets {
		if !w.gitReads {
			secrets[k] = v
		}
	}
	return env, secrets, nil
}

// roots are the --allow-file-root directories, absolute.
func (w *workerFlags) roots() ([]string, error) {
	var roots []string
	for _, r := range w.fileRoots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("--allow-file-root %s: %w", r, err)
		}
		roots = append(roots, abs)
	}
	return roots, nil
}

// deliverer gives acts what it proposes changes with (Activities.Forges,
// Git and FileRoots): the local forge, pushing to repositories under
// --allow-file-root, and the operator's forge with its token, which no
// sandbox holds.
func (w *workerFlags) deliverer(acts *activity.Activities) error {
	roots, err := w.roots()
	if err != nil {
		return err
	}
	g := &gitx.Git{}
	fs := w.forge
	if fs != nil && fs.Type != "local" {
		g = &gitx.Git{TokenEnv: fs.TokenEnv, TokenOrigins: fs.gitOrigins()}
		if fs.Hub == nil {
			if err := fs.connect(w.metrics); err != nil {
				return err
			}
		}
	}
	local := activity.LocalForges(&gitx.Git{})
	acts.Git, acts.FileRoots = g, roots
	if w.gw != nil && w.gw.Git != nil {
		// The gateway's copies of what the sandboxes read: a change is
		// proposed from the copy its sandbox cloned.
		acts.Copies = w.gw
	}
	acts.Forges = func(name string) (forge.Forge, error) {
		if fs != nil && fs.Type == name && fs.Hub != nil {
			return fs.Hub, nil
		}
		f, err := local(name)
		if err != nil {
			return nil, fmt.Errorf("forge %q: this worker proposes changes on the local forge and on the forge the operator allows it (--forge-type, --forge-url)", name)
		}
		return f, nil
	}
	return nil
}

// hidden is what the work in local sandboxes must not see: the state
// directory (the embedded server's database and credentials, every
// sandbox), the Temporal client credential files, credentials in this
// user's home, container engines' sockets, and --sandbox-hide.
func (w *workerFlags) hidden(tf *temporalFlags) ([]string, error) {
	state, err := filepath.Abs(tf.stateDir)
	if err != nil {
		return nil, err
	}
	out := []string{state}
	for _, p := range []string{tf.tls.cert, tf.tls.key} {
		if p != "" {
			if abs, err := filepath.Abs(p); err == nil {
				out = append(out, abs)
			}
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		h, _ := local.HomeView(home, os.Getenv("PATH"))
		out = append(out, h...)
	}
	out = append(out, "/run/docker.sock", "/var/run/docker.sock", "/run/containerd", "/run/user")
	for _, p := range w.hide {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-hide %s: %w", p, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// newWorker registers fleetlift's workflows and activities, with the
// sandbox provider --sandbox names (or the one chosen for this machine,
// see chooseSandbox), and says which on logw.
func newWorker(ctx context.Context, logw io.Writer, c client.Client, tf *temporalFlags, wf *workerFlags) (*workers, error) {
	provider, kind, err := wf.provider(ctx, logw, tf)
	if err != nil {
		return nil, err
	}
	if kind == sandboxKubernetes || kind == sandboxKubernetesJobs {
		return newKubeWorker(c, wf, provider)
	}
	env, secrets, err := wf.sandbox()
	if err != nil {
		return nil, err
	}
	queue, err := wf.hostQueue(tf)
	if err != nil {
		return nil, err
	}
	if wf.maxSandboxes < 0 {
		return nil, fmt.Errorf("--max-sandboxes %d: want 0 (no bound) or more", wf.maxSandboxes)
	}
	acts := &activity.Activities{Sandbox: wf.observed(provider), SandboxEnv: env, SandboxSecrets: secrets, Queue: queue,
		CredentialVariables: credentialVariables(), UnitStarted: wf.unitStarted, UnitEnded: wf.unitEnded,
		MaxSandboxes: wf.maxSandboxes}
	if held, ok := provider.(interface{ Sandboxes() []string }); ok {
		// An earlier worker's sandboxes, which this one took over, count.
		acts.Adopted = held.Sandboxes()
	}
	if err := wf.deliverer(acts); err != nil {
		return nil, err
	}
	// This host's queue: the steps on the sandboxes it provisions, which
	// only it can reach.
	hw := worker.New(c, queue, wf.options())
	hw.RegisterActivity(acts)
	return newWorkers(provider, sharedWorker(c, acts, wf.options()), hw), nil
}

// observed is provider with its provisioning recorded in the metrics,
// when kept.
func (w *workerFlags) observed(provider sandbox.Provider) sandbox.Provider {
	if w.metrics == nil {
		return provider
	}
	return w.metrics.Sandbox(provider)
}

// sharedWorker is the worker of the shared task queue: the workflows, and
// the activities any worker may run.
func sharedWorker(c client.Client, acts *activity.Activities, opts worker.Options) worker.Worker {
	w := worker.New(c, workflow.TaskQueue, opts)
	w.RegisterWorkflow(workflow.Task)
	w.RegisterWorkflow(workflow.Campaign)
	// The lease reconciler replicas elect their leader with.
	w.RegisterWorkflow(workflow.Lease)
	// The latch the reconciler keeps watch.require_reviewed_merge in.
	w.RegisterWorkflow(workflow.Latch)
	w.RegisterActivity(acts)
	return w
}

// newWorkers runs all together, and closes provider with them when it
// is a Closer (the provider itself, before metrics wrap it).
func newWorkers(provider sandbox.Provider, all ...worker.Worker) *workers {
	ws := &workers{all: all}
	if c, ok := provider.(io.Closer); ok {
		ws.provider = c
	}
	return ws
}

// hostQueue is the task queue of this worker's host: --sandbox-queue, or
// one named after the host and the state directory, whose sandboxes are
// this worker's alone.
func (w *workerFlags) hostQueue(tf *temporalFlags) (string, error) {
	if w.queue != "" {
		return w.queue, nil
	}
	state, err := filepath.Abs(tf.stateDir)
	if err != nil {
		return "", err
	}
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host + "\x00" + state))
	return fmt.Sprintf("%s/host/%s-%x", workflow.TaskQueue, host, sum[:6]), nil
}

// workers run together: the worker of the shared task queue (workflows,
// provisioning) and the one of this host's queue (the steps on its
// sandboxes).
type workers struct {
	all []worker.Worker
	// provider stops watching its sandboxes with the workers: those a
	// worker started again in time takes over end themselves.
	provider io.Closer
}

// Start starts every worker, or none.
func (ws *workers) Start() error {
	for i, w := range ws.all {
		if err := w.Start(); err != nil {
			for _, started := range ws.all[:i] {
				started.Stop()
			}
			return err
		}
	}
	return nil
}

// Stop stops every worker, and the watching of their sandboxes.
func (ws *workers) Stop() {
	for i := len(ws.all) - 1; i >= 0; i-- {
		ws.all[i].Stop()
	}
	if ws.provider != nil {
		_ = ws.provider.Close()
	}
}

// Run starts the workers and stops them when interrupt closes.
func (ws *workers) Run(interrupt <-chan any) error {
	if err := ws.Start(); err != nil {
		return err
	}
	<-interrupt
	ws.Stop()
	return nil
}

// provider makes the sandbox provider --sandbox names, choosing one when
// it names none, and logs the choice; kind is the provider's --sandbox.
func (w *workerFlags) provider(ctx context.Context, logw io.Writer, tf *temporalFlags) (_ sandbox.Provider, kind string, _ error) {
	kind, why := w.providerName, "--sandbox "+w.providerName
	if kind == "" {
		kind, why = w.recordedSandbox(ctx, tf.stateDir)
	} else if err := recordSandbox(tf.stateDir, kind); err != nil {
		return nil, "", err
	}
	switch kind {
	case sandboxLocal:
		p, err := w.localProvider(tf)
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(logw, "sandboxes: local processes under %s (%s)\n", filepath.Join(tf.stateDir, "sandboxes"), why)
		w.sayGateway(logw)
		return p, kind, nil
	case sandboxDocker:
		p, err := w.dockerProvider(tf.stateDir)
		if err != nil {
			return nil, "", err
		}
		checkCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := p.Check(checkCtx); err != nil {
			p.Close()
			return nil, "", fmt.Errorf("--sandbox docker: %w: start the engine, or build the images with `make images`, or run tasks as local processes with --sandbox local", err)
		}
		fmt.Fprintf(logw, "sandboxes: docker containers of scope %s, images %s and agent %s, network %s (%s); the agent checks in each sandbox that it can isolate the work, and fails the task when it cannot\n",
			w.docker.scope, w.docker.image, cmpOr(w.docker.agentBinary, w.docker.agentImage), w.docker.network, why)
		w.sayGateway(logw)
		return p, kind, nil
	case sandboxKubernetes, sandboxKubernetesJobs:
		p, err := w.kubeProvider(ctx, logw, kind)
		if err != nil {
			return nil, "", err
		}
		if kind == sandboxKubernetes {
			fmt.Fprintf(logw, "sandboxes: kubernetes SandboxRequests in namespace %s, image %s, pods made by fleetlift-controller (%s)\n", w.kube.namespace, w.docker.image, why)
		} else {
			fmt.Fprintf(logw, "sandboxes: kubernetes Jobs this worker makes in namespace %s, image %s and agent %s (%s)\n", w.kube.namespace, w.docker.image, w.docker.agentImage, why)
		}
		return p, kind, nil
	default:
		return nil, "", fmt.Errorf("--sandbox %q: want %s, %s, %s or %s", kind, sandboxLocal, sandboxDocker, sandboxKubernetes, sandboxKubernetesJobs)
	}
}

// sandboxRecord is the file in the state directory that holds the
// provider its tasks run in: where untrusted code runs must not change
// under a running campaign with what happens to be installed when the
// worker starts again.
const sandboxRecord = "sandbox"

// recordedSandbox is the provider recorded in stateDir, or, on the state
// directory's first start (or with none), the one chooseSandbox picks,
// then recorded.
func (w *workerFlags) recordedSandbox(ctx context.Context, stateDir string) (kind, why string) {
	if stateDir != "" {
		path := filepath.Join(stateDir, sandboxRecord)
		data, err := os.ReadFile(path)
		switch rec := strings.TrimSpace(string(data)); {
		case err == nil && validSandbox(rec):
			return rec, fmt.Sprintf("chosen at this state directory's first start and kept (%s); --sandbox changes it", path)
		case err == nil:
			return sandboxLocal, fmt.Sprintf("%s names no provider (%q): local, the one that needs nothing installed; --sandbox chooses", path, rec)
		}
	}
	kind, why = w.chooseSandbox(ctx)
	if err := recordSandbox(stateDir, kind); err != nil {
		return kind, why + " (not recorded: " + err.Error() + ")"
	}
	return kind, why
}

// recordSandbox records kind in stateDir (nothing when it is empty): the
// provider later starts without --sandbox keep.
func recordSandbox(stateDir, kind string) error {
	if stateDir == "" || !validSandbox(kind) {
		return nil
	}
	path := filepath.Join(stateDir, sandboxRecord)
	if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) == kind {
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("record the sandbox provider: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(kind+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the sandbox provider: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("record the sandbox provider: %w", err)
	}
	return nil
}

func validSandbox(kind string) bool {
	switch kind {
	case sandboxLocal, sandboxDocker, sandboxKubernetes, sandboxKubernetesJobs:
		return true
	}
	return false
}

// chooseSandbox picks docker when an engine answers and has the sandbox
// and agent images, else local, and says why.
func (w *workerFlags) chooseSandbox(ctx context.Context) (kind, why string) {
	p, err := w.dockerProvider("")
	if err != nil {
		return sandboxLocal, fmt.Sprintf("the default, as docker cannot be set up: %v", err)
	}
	defer p.Close()
	checkCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := p.Check(checkCtx); err != nil {
		return sandboxLocal, fmt.Sprintf("the default without docker: %v", err)
	}
	return sandboxDocker, "the default where a Docker engine answers and has the images"
}

// dockerProvider makes the Docker provider. The work is isolated by the
// agent in each container (its jail needs what the container allows,
// which the agent checks before every run); the worker's own check of
// local sandboxes does not apply.
//
// With a state directory, the worker's egress proxy (--sandbox-egress)
// and model gateway are served in stateDir/docker for the containers to
// mount.
func (w *workerFlags) dockerProvider(stateDir string) (*docker.Provider, error) {
	opts := docker.Options{
		Image:        w.docker.image,
		AgentImage:   w.docker.agentImage,
		AgentBinary:  w.docker.agentBinary,
		Scope:        w.docker.scope,
		Network:      w.docker.network,
		ReadOnlyRoot: w.docker.readOnly,
	}
	switch w.isolation {
	case agentcmd.IsolationNamespaces:
	case agentcmd.IsolationNone:
		opts.ServeArgs = []string{"--isolation", agentcmd.IsolationNone}
	default:
		return nil, fmt.Errorf("--sandbox-isolation %q: want %s or %s", w.isolation, agentcmd.IsolationNamespaces, agentcmd.IsolationNone)
	}
	// Local repositories are cloned from and pushed to where the worker
	// allows them: the same paths, bind-mounted read-write.
	for _, r := range w.fileRoots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("--allow-file-root %s: %w", r, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--allow-file-root %s: not a directory to mount into sandboxes", r)
		}
		opts.Binds = append(opts.Binds, abs)
	}
	if stateDir != "" {
		abs, err := filepath.Abs(filepath.Join(stateDir, "docker"))
		if err != nil {
			return nil, err
		}
		opts.SocketDir = abs
		if len(w.egress) > 0 {
			if opts.Egress, err = w.egressProxy(); err != nil {
				return nil, err
			}
		}
		if opts.Gateway, err = w.gateway(); err != nil {
			return nil, err
		}
	}
	return docker.New(opts)
}

// egressProxy is the proxy --sandbox-egress allows hosts through.
func (w *workerFlags) egressProxy() (*egress.Proxy, error) {
	if w.isolation != agentcmd.IsolationNamespaces {
		return nil, fmt.Errorf("--sandbox-egress needs --sandbox-isolation=%s: unjailed work shares the agent's network", agentcmd.IsolationNamespaces)
	}
	rules, err := egress.ParseRules(w.egress)
	if err != nil {
		return nil, fmt.Errorf("--sandbox-egress: %w", err)
	}
	return &egress.Proxy{Rules: rules}, nil
}

// gateway is the sandboxes' gateway, nil when it would serve nothing.
// It serves the model with --model-gateway when it holds the key
// --model-key-env names (a jailed agent CLI reaches it through a port its
// jail forwards, an unjailed one through the agent's loopback), and then
// gatewayKey is
// set: the key goes to no sandbox. It serves the agents' clones of their
// repositories at the operator's forge when the worker has its token,
// and then gitReads is set: the token goes to no sandbox either.
func (w *workerFlags) gateway() (*gateway.Gateway, error) {
	gw := &gateway.Gateway{}
	if key := os.Getenv(w.modelKeyEnv); w.modelAPI != "" && key != "" {
		u, err := url.Parse(w.modelAPI)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("--model-gateway %q: want the API's base URL, such as https://api.anthropic.com", w.modelAPI)
		}
		gw.Upstream, gw.Key = u, key
		w.gatewayKey = w.modelKeyEnv
	}
	if key := os.Getenv(w.openAIKeyEnv); w.openAIAPI != "" && key != "" {
		u, err := url.Parse(w.openAIAPI)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "" {
			return nil, fmt.Errorf("--openai-gateway %q: want the API's base URL without its version, such as https://api.openai.com", w.openAIAPI)
		}
		gw.OpenAI = &gateway.OpenAI{Upstream: u, Key: key}
		w.openAIKey = w.openAIKeyEnv
	}
	if fs := w.forge; fs != nil && fs.Type != "local" && fs.Token != "" {
		gw.Git = &gateway.GitReads{Git: &gitx.Git{TokenEnv: fs.TokenEnv, TokenOrigins: fs.gitOrigins()}}
		w.gitReads = true
	}
	if gw.Upstream == nil && gw.OpenAI == nil && gw.Git == nil {
		return nil, nil
	}
	w.gw = gw
	return gw, nil
}

// sayGateway says on logw what the sandboxes' gateway holds for them.
func (w *workerFlags) sayGateway(logw io.Writer) {
	if w.gatewayKey != "" {
		fmt.Fprintf(logw, "model calls: agent CLIs reach %s through this worker's gateway, which holds %s and counts tokens\n", w.modelAPI, w.gatewayKey)
	}
	if w.openAIKey != "" {
		fmt.Fprintf(logw, "model calls: agent CLIs that speak an OpenAI-compatible API reach %s through this worker's gateway (OPENAI_BASE_URL), which holds %s and counts tokens\n", w.openAIAPI, w.openAIKey)
	}
	if w.gitReads {
		fmt.Fprintf(logw, "clones: agents read their repositories at %s through this worker's gateway, which holds its token; this worker pushes and opens the pull requests\n", w.forge.URL)
	}
}

// localLimits are the --sandbox-memory, -processes, -cpu, -tmp-size,
// -file-size and -disk-reserve flags.
type localLimits struct {
	memory, cpu, tmp, file string
	diskReserve            string
	processes              int
}

// serveArgs are the agent's flags that bound each jailed command.
func (l localLimits) serveArgs() ([]string, error) {
	var args []string
	for _, q := range []struct{ flag, value, arg string }{
		{"--sandbox-memory", l.memory, "--max-memory"},
		{"--sandbox-tmp-size", l.tmp, "--tmp-size"},
		{"--sandbox-file-size", l.file, "--max-file-size"},
		{"--sandbox-disk-reserve", l.diskReserve, "--disk-reserve"},
	} {
		if q.value == "" || q.value == "0" {
			continue
		}
		n, err := sandbox.ParseMemory(q.value)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", q.flag, q.value, err)
		}
		args = append(args, q.arg, strconv.FormatInt(n, 10))
	}
	if l.cpu != "" && l.cpu != "0" {
		nano, err := sandbox.ParseCPU(l.cpu)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-cpu %q: %w", l.cpu, err)
		}
		args = append(args, "--max-cpu", strconv.FormatFloat(float64(nano)/1e9, 'f', -1, 64))
	}
	if l.processes < 0 {
		return nil, fmt.Errorf("--sandbox-processes %d: want 0 (no bound) or more", l.processes)
	}
	if l.processes > 0 {
		args = append(args, "--max-processes", strconv.Itoa(l.processes))
	}
	return args, nil
}

// localProvider makes the local provider: sandboxes under the state
// directory's sandboxes/ whose agent is fleetlift-agent (or this
// executable). Unless --sandbox-isolation=none, it first makes sure the
// agent can jail the work it runs, and refuses to start when it cannot.
func (w *workerFlags) localProvider(tf *temporalFlags) (sandbox.Provider, error) {
	agentArgv, err := agentCommand()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(tf.stateDir, "sandboxes")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	hidden, err := w.hidden(tf)
	if err != nil {
		return nil, err
	}
	var serve []string
	switch w.isolation {
	case agentcmd.IsolationNamespaces:
		self := append(append([]string{}, agentArgv...), "jail")
		if p := ownJailProgram(); p != "" {
			// The agents jail with it too, told so rather than each
			// asking it for its protocol at start.
			self = []string{p}
			serve = append(serve, "--jail-program", p)
		}
		j := &jail.Jail{Self: self, Spec: jail.Spec{
			Writable: []string{root}, Hidden: hidden, Scratch: jail.DefaultScratch,
		}}
		if err := j.Check(); err != nil {
			return nil, fmt.Errorf("local sandboxes cannot isolate the work they run (%v): allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone), or accept running untrusted work unisolated with --sandbox-isolation=%s", err, agentcmd.IsolationNone)
		}
		for _, h := range hidden {
			serve = append(serve, "--hide", h)
		}
		if home, err := os.UserHomeDir(); err == nil {
			_, shown := local.HomeView(home, os.Getenv("PATH"))
			for _, p := range shown {
				serve = append(serve, "--show", p)
			}
		}
		limits, err := w.limits.serveArgs()
		if err != nil {
			return nil, err
		}
		serve = append(serve, limits...)
	case agentcmd.IsolationNone:
		serve = []string{"--isolation", agentcmd.IsolationNone}
	default:
		return nil, fmt.Errorf("--sandbox-isolation %q: want %s or %s", w.isolation, agentcmd.IsolationNamespaces, agentcmd.IsolationNone)
	}
	var proxy http.Handler
	if len(w.egress) > 0 {
		p, err := w.egressProxy()
		if err != nil {
			return nil, err
		}
		proxy = p
	}
	gw, err := w.gateway()
	if err != nil {
		return nil, err
	}
	orphan := w.orphan
	if orphan <= 0 {
		orphan = agentcmd.DefaultOrphanAfter
	}
	return local.New(local.Options{
		Gateway:      gw,
		Egress:       proxy,
		Root:         root,
		AgentCommand: agentArgv,
		ServeArgs:    serve,
		OrphanAfter:  orphan,
		// The agent runs on one processor (agentcmd's serve): it starts
		// so.
		AgentGOMAXPROCS: 1,
		// Jailed, the work ends with the agent (see package jail).
		CommandsEndWithAgent: w.isolation == agentcmd.IsolationNamespaces,
		// And so an agent that finished a sandbox serves the next one
		// with the same environment: one start of an agent for a run
		// of short units, not one per unit.
		ReuseAgents: w.isolation == agentcmd.IsolationNamespaces,
	})
}

// defaultScope is this host's name, cut to what a scope may hold.
func defaultScope() string {
	host, err := os.Hostname()
	if err != nil {
		return docker.DefaultScope
	}
	return docker.HostScope(host)
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// agentCommand is the agent that local sandboxes run: $FLEETLIFT_AGENT_BINARY,
// else fleetlift-agent beside this executable, else this executable's
// hidden agent command. The slim fleetlift-agent starts in a tenth of the
// time and memory: this binary links the Temporal server.
func agentCommand() ([]string, error) {
	if p := os.Getenv("FLEETLIFT_AGENT_BINARY"); p != "" {
		return []string{p}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the agent: %w", err)
	}
	slim := filepath.Join(filepath.Dir(exe), "fleetlift-agent")
	if fi, err := os.Stat(slim); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return []string{slim}, nil
	}
	return []string{exe, "agent"}, nil
}

// ownJailProgram is the fleetlift-jail beside this executable when it
// speaks this build's jail protocol (jail.Program), "" otherwise
// or when FLEETLIFT_AGENT_BINARY names an agent of another build, which
// finds its own.
func ownJailProgram() string {
	if os.Getenv("FLEETLIFT_AGENT_BINARY") != "" {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return jail.Program(filepath.Dir(exe))
}

// workerForge is the forge a standalone worker's sandboxes open pull
// requests on: the one forge the operator allows it, or none (the local
// forge only). Tasks name the forge by type, so a worker serves one.
func workerForge(forges *forgeFlags) (*forgeSetup, error) {
	allowed, err := forges.allowed()
	if err != nil {
		return nil, err
	}
	switch len(allowed) {
	case 0:
		return nil, nil
	case 1:
	default:
		return nil, fmt.Errorf("a worker opens pull requests on one forge, and %d are allowed: run a worker per forge", len(allowed))
	}
	of := allowed[0]
	fs := &forgeSetup{Name: of.Name, Type: string(of.Type), URL: of.URL, TokenEnv: of.TokenEnv, Token: os.Getenv(of.TokenEnv)}
	if fs.Token == "" {
		return nil, fmt.Errorf("forge %s needs a token in $%s", of.Forge, of.TokenEnv)
	}
	return fs, nil
}

func newWorkerCmd() *cobra.Command {
	var f temporalFlags
	var wf workerFlags
	var ff forgeFlags
	var mf metricsFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker: executes Task and Campaign workflows in sandboxes (--sandbox local|docker|kubernetes|kubernetes-jobs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			o, err := observe(cmd, &mf, &f)
			if err != nil {
				return err
			}
			defer o.stop()
			wf.metrics = o.metrics
			c, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			fs, err := workerForge(&ff)
			if err != nil {
				return err
			}
			wf.forge = fs
			w, err := newWorker(ctx, cmd.ErrOrStderr(), c, &f, &wf)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "worker polling task queue %q on %s\n", workflow.TaskQueue, f.address)
			return w.Run(interruptCh(ctx))
		},
	}
	f.register(cmd)
	wf.register(cmd)
	ff.register(cmd)
	mf.register(cmd)
	return cmd
}

// interruptCh closes when ctx is done, for worker.Run.
func interruptCh(ctx context.Context) <-chan any {
	ch := make(chan any)
	go func() {
		<-ctx.Done()
		close(ch)
	}()
	return ch
}

// registerHostTimeout adds --sandbox-host-timeout to a command that starts
// runs.
func registerHostTimeout(cmd *cobra.Command, d *time.Duration) {
	cmd.Flags().DurationVar(d, "sandbox-host-timeout", workflow.DefaultHostTimeout,
		"how long a task waits for the worker host that holds its sandbox (one that stopped, say) before it runs the work again in a sandbox elsewhere")
}
