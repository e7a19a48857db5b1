package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/metrics"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// workerFlags configure the worker and its sandboxes.
type workerFlags struct {
	// slot is this worker's among those sharing its state directory
	// (claimSlot): set while newWorker makes it.
	slot *workerSlot
	// scratch is where its scratch repositories go: its slot's, removed
	// with it; empty for the system's temporary directory.
	scratch string
	// localForge is the local forge deliverer made, closed with the
	// workers.
	localForge io.Closer
	// providerName is the sandbox provider: local, docker, kubernetes,
	// kubernetes-jobs, or empty to choose (local or docker).
	providerName string
	// followEvery is how often runs' pull requests are read.
	followEvery time.Duration
	docker      dockerFlags
	kube        kubeFlags
	agentCLI    string
	agentEnv    []string
	passEnv     []string
	fileRoots   []string
	isolation   string
	egress      []string
	limits      localLimits
	// modelAPI and modelKeyEnv are --model-gateway and --model-key-env;
	// gatewayKey is set once a local provider's gateway holds the key,
	// which then goes to no sandbox.
	modelAPI    string
	modelKeyEnv string
	gatewayKey  string
	// openAIAPI and openAIKeyEnv are --openai-gateway and
	// --openai-key-env; openAIKey is set once the gateway holds that key.
	openAIAPI, openAIKeyEnv, openAIKey string
	// prices, maxCostPerTask and tokensPerMinute are --model-prices,
	// --max-cost-per-task and --tokens-per-minute: what the gateway
	// prices calls at and bounds them by.
	prices          string
	maxCostPerTask  float64
	tokensPerMinute int64
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
	// notify is --notify: the notification services, NAME=KIND,….
	notify []string
	// writesPerMinute and writesPerHour are --forge-writes-per-minute
	// and --forge-writes-per-hour: the forge account's shared budget of
	// writes; -1 is the forge's default (GitHub's secondary limits, none
	// for Gitea).
	writesPerMinute, writesPerHour int
	// requestsPerHour and parallelClones are --forge-requests-per-hour
	// and --forge-parallel-clones: the account's shared budget of every
	// request, and its bound on git transfers at once; 0: none.
	requestsPerHour, parallelClones int
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
	unitStarted func(workflowID string, u status.UnitRef)
	unitEnded   func(workflowID string, u status.UnitOutcome)
}

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
		"docker: this worker's name among the workers sharing an engine; it sees and re-attaches to its scope's sandboxes only (default: the host name; a second worker on the same state directory at once adds -1)")
	cmd.Flags().BoolVar(&w.docker.readOnly, "sandbox-read-only", false,
		"docker: mount task images read-only; /workspace, HOME and /tmp stay writable")
	w.kube.register(cmd)
	cmd.Flags().StringVar(&w.agentCLI, "agent-cli", "",
		`agent CLI for agentic tasks, as a JSON argv (default: Claude Code, "claude -p")`)
	cmd.Flags().StringSliceVar(&w.agentEnv, "agent-env", []string{envAnthropicAPIKey},
		"names of this process's environment variables that only the agent CLI sees in sandboxes, such as its model's API key (only when set)")
	cmd.Flags().StringSliceVar(&w.passEnv, "sandbox-env", nil,
		"names of this process's environment variables every command in sandboxes sees (only when set; never a token)")
	cmd.Flags().StringArrayVar(&w.notify, "notify", nil,
		"a notification service the campaigns repository's notifications may send to, by NAME (repeatable): NAME=slack,url-env=VAR (a Slack incoming webhook, its URL in $VAR) or NAME=webhook,url=URL,secret-env=VAR (a JSON POST signed with HMAC-SHA256 under the key in $VAR)")
	cmd.Flags().StringSliceVar(&w.fileRoots, "allow-file-root", nil,
		"a directory local repositories (file:// URLs and absolute paths) may be cloned from and pushed to (repeatable); by default none may")
	cmd.Flags().StringVar(&w.isolation, "sandbox-isolation", protocol.IsolationNamespaces,
		"how the agent isolates the work it runs: "+protocol.IsolationNamespaces+" (Linux user, mount and PID namespaces), or "+protocol.IsolationNone+" (none: the work can read tokens, approve itself and outlive its commands)")
	cmd.Flags().DurationVar(&w.followEvery, "pull-requests-every", activity.DefaultFollowEvery,
		"how often the pull requests runs opened are read from their forges (state, reviews, checks, mergeability), within the forge's request budget; fleetlift prs --refresh reads them at once")
	cmd.Flags().DurationVar(&w.orphan, "sandbox-orphan-after", agent.DefaultOrphanAfter,
		"a sandbox no worker has watched for this long ends itself (a worker that never came back)")
	cmd.Flags().StringVar(&w.queue, "sandbox-queue", "",
		"the task queue for the steps on this worker's sandboxes, which only this host can reach (default: named after the host and the state directory; a second worker on the same state directory at once adds -1, a third -2)")
	cmd.Flags().StringSliceVar(&w.egress, "sandbox-egress", nil,
		"a host the work in sandboxes may reach through the worker's egress proxy, as registry.npmjs.org, proxy.golang.org:443 or *.pythonhosted.org (repeatable; without a port, 80 and 443; kubernetes sandboxes reach the proxy at --gateway-listen); by default the work reaches no network, and never loopback or a private address")
	cmd.Flags().StringVar(&w.limits.memory, "sandbox-memory", "4Gi",
		"local: the most memory each command in a sandbox and what it starts may use (a cgroup's, where this host lets the worker make one: cgroup v1 as root); 0: no bound")
	cmd.Flags().IntVar(&w.maxSandboxes, "max-sandboxes", 4*runtime.NumCPU(),
		"local and docker: the most sandboxes this worker runs at once (a task waiting for approval keeps its own); a task beyond them waits, and runs here or on another worker once there is room; 0: no bound")
	cmd.Flags().IntVar(&w.limits.processes, "sandbox-processes", 4096,
		"local and kubernetes-jobs: the most processes and threads each command in a sandbox may run at once (a cgroup's, else an rlimit, which does not bind a worker run as root); 0: no bound (local), the default (kubernetes-jobs); with kubernetes, fleetlift-controller's --sandbox-processes decides")
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
	cmd.Flags().IntVar(&w.writesPerMinute, "forge-writes-per-minute", -1,
		"the most content-creating requests (pull requests, comments, labels, reviewers) every worker and reconciler together send a minute with the forge account, counted in one budget on Temporal; -1: the forge's own limit (GitHub: 80; Gitea: none); 0: none")
	cmd.Flags().IntVar(&w.writesPerHour, "forge-writes-per-hour", -1,
		"the most content-creating requests every worker and reconciler together send an hour with the forge account; -1: the forge's own limit (GitHub: 500; Gitea: none); 0: none")
	cmd.Flags().IntVar(&w.requestsPerHour, "forge-requests-per-hour", 0,
		"the most requests of any kind (reads and writes) every worker and reconciler together send an hour with the forge account, counted in one budget on Temporal, to leave the account headroom below the forge's own limit (which is obeyed anyway, from its answers); 0: none")
	cmd.Flags().IntVar(&w.parallelClones, "forge-parallel-clones", 0,
		"the most git transfers with the forge account (the clones workers make for their sandboxes, the branches they push) every worker together runs at once, counted on Temporal; 0: none")
	cmd.Flags().StringVar(&w.prices, "model-prices", "",
		"a YAML or JSON file of model prices in US dollars per million tokens (model: {input: 3, output: 15, cache_write: 3.75, cache_read: 0.3}): the gateway prices each call by the model that answered it, for each task's cost in its result, status and fleetlift_cost_usd_total, and limits.max_cost_per_task and max_cost_per_campaign; a name also prices its dated versions (claude-sonnet-4-5 prices claude-sonnet-4-5-20250929)")
	cmd.Flags().Float64Var(&w.maxCostPerTask, "max-cost-per-task", 0,
		"the most one task's model calls may cost, in US dollars at --model-prices: a definition's limits.max_cost_per_task can ask for less, never more; 0: only the definition's bound")
	cmd.Flags().Int64Var(&w.tokensPerMinute, "tokens-per-minute", 0,
		"hold the agents' model calls while the tokens counted in the last minute reach this (the model account's rate limit): every sandbox's of every worker calling as the account together, counted on the account's budget on Temporal (this worker's own count while that cannot be reached); 0: no pace")
	cmd.Flags().StringSliceVar(&w.hide, "sandbox-hide", nil,
		"a directory or file the work in sandboxes must not see (repeatable), besides the state directory and the usual credential files")
}

// newWorker registers fleetlift's workflows and activities, with the
// sandbox provider --sandbox names (or the one chosen for this machine,
// see chooseSandbox), and says which on logw.
func newWorker(ctx context.Context, logw io.Writer, c client.Client, tf *temporalFlags, wf *workerFlags) (_ *workers, err error) {
	slot, err := claimSlot(tf.stateDir)
	if err != nil {
		return nil, err
	}
	wf.slot = slot
	defer func() {
		if err != nil {
			slot.release()
		}
	}()
	provider, kind, err := wf.provider(ctx, logw, tf)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			if p, ok := provider.(io.Closer); ok {
				_ = p.Close()
			}
			if wf.localForge != nil {
				_ = wf.localForge.Close()
				wf.localForge = nil
			}
		}
	}()
	// Its scratch repositories go with its slot, where the next worker
	// to take the slot clears what a worker that died left. The gateway
	// makes its copies when sandboxes ask, after the workers start.
	wf.scratch = slot.scratchDir()
	if wf.gw != nil && wf.gw.Git != nil {
		wf.gw.Git.Git.ScratchDir = wf.scratch
	}
	if kind == sandboxKubernetes || kind == sandboxKubernetesJobs {
		// Its sandboxes are pods, on no host of its own: it keeps the
		// slot for its scratch repositories alone.
		wf.slot = nil
		ws, err := newKubeWorker(c, wf, provider)
		if err != nil {
			return nil, err
		}
		ws.slot = slot
		return ws, nil
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
	if err := wf.shareBudgets(c, logw); err != nil {
		return nil, err
	}
	// This host's queue: the steps on the sandboxes it provisions, which
	// only it can reach.
	hw := worker.New(c, queue, wf.options())
	hw.RegisterActivity(acts)
	ws := newWorkers(provider, wf.localForge, sharedWorker(c, acts, wf.options()), hw)
	ws.slot = slot
	return ws, nil
}

// sharedWorker is the worker of the shared task queue: the workflows, and
// the activities any worker may run.
func sharedWorker(c client.Client, acts *activity.Activities, opts worker.Options) worker.Worker {
	w := worker.New(c, workflow.TaskQueue, opts)
	w.RegisterWorkflow(workflow.Task)
	w.RegisterWorkflow(workflow.Campaign)
	w.RegisterWorkflow(workflow.CampaignPage)
	// The latch the reconciler keeps watch.require_reviewed_merge in.
	w.RegisterWorkflow(workflow.Latch)
	// The messages the reconciler's notifications hand over.
	w.RegisterWorkflow(workflow.Notify)
	// The forge account's shared budget of writes.
	w.RegisterWorkflow(workflow.ForgeBudget)
	// Its bound on git transfers at once.
	w.RegisterWorkflow(workflow.ForgeSlots)
	// What became of the pull requests runs opened.
	w.RegisterWorkflow(workflow.PullRequests)
	w.RegisterActivity(acts)
	// keep_current's: a campaign runs units again.
	w.RegisterActivityWithOptions(dispatch.RegenerateUnits, sdkactivity.RegisterOptions{Name: workflow.RegenerateActivity})
	// max_pending_checks': a campaign counts its pull requests' checks.
	w.RegisterActivityWithOptions(dispatch.PendingChecks, sdkactivity.RegisterOptions{Name: workflow.PendingChecksActivity})
	return w
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
			// The forge flags first: a wrong one needs no Temporal to tell.
			fs, err := workerForge(&ff)
			if err != nil {
				return err
			}
			wf.forge = fs
			c, err := f.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
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
