package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/gcpace"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/podexec"
)

// options are the controller's flags.
type options struct {
	kubeconfig, namespace                 string
	leaderElect                           bool
	leaderNamespace, leaderID             string
	metricsAddr, probeAddr                string
	images, secrets, tokenOrigins         []string
	nodeSelector                          map[string]string
	nodeLabels                            []string
	agentCLI                              string
	runtimeClass, maxMemory, maxCPU       string
	defaultMemory, defaultCPU             string
	agentImage, serviceAccount, isolation string
	seccompProfile, pullPolicy            string
	userNamespaces                        bool
	processes                             int
	maxLifetime, execTimeout              time.Duration
	workers                               int
	logLevel                              string
	backend                               string
	warmPools                             []string
}

// Backends --backend names.
const (
	backendJobs         = "jobs"
	backendAgentSandbox = "agent-sandbox"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envList(key string, def []string) []string {
	if v := os.Getenv(key); v != "" {
		return strings.Split(v, ",")
	}
	return def
}

func (o *options) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "a kubeconfig file; empty means the in-cluster service account")
	f.StringVar(&o.namespace, "namespace", envOr("FLEETLIFT_SANDBOX_NAMESPACE", "sandbox-isolated"), "the namespace of SandboxRequests and their sandboxes")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader among replicas (a Lease in --leader-election-namespace)")
	f.StringVar(&o.leaderNamespace, "leader-election-namespace", envOr("POD_NAMESPACE", "fleetlift-system"), "the namespace of the leader election Lease")
	f.StringVar(&o.leaderID, "leader-election-id", "fleetlift-controller.fleetlift.io", "the leader election Lease's name")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "where /metrics is served; 0 turns it off")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "where /healthz and /readyz are served; 0 turns them off")
	f.StringSliceVar(&o.images, "allowed-image", envList("FLEETLIFT_ALLOWED_IMAGES", []string{"fleetlift/sandbox:*"}), "an image requests may use: a path.Match pattern, a trailing * matching any rest (repeatable)")
	f.StringSliceVar(&o.secrets, "allowed-secret", envList("FLEETLIFT_ALLOWED_SECRETS", []string{"github-credentials", "claude-credentials"}), "a Secret credentials may name (repeatable); the controller's Role must let it get these")
	f.StringSliceVar(&o.tokenOrigins, "git-token-origin", envList("FLEETLIFT_GIT_TOKEN_ORIGINS", nil), "an origin (https://github.com) the agent's git may send its clone token to (repeatable); requests cannot say where it goes")
	f.StringVar(&o.agentCLI, "agent-cli", os.Getenv("FLEETLIFT_AGENT_CLI"), `the agent CLI's argv as a JSON array, such as ["claude","-p"] (empty: the agent's default); requests cannot choose what runs with its key`)
	f.StringToStringVar(&o.nodeSelector, "node-selector", nil, "a node label KEY=VALUE every sandbox pod must run on (repeatable); requests may not contradict it")
	f.StringSliceVar(&o.nodeLabels, "allowed-node-label", nil, "a node label a request's nodeSelector may name besides --node-selector's (repeatable; default none)")
	f.StringVar(&o.runtimeClass, "required-runtime-class", "", "a runtime class every request must name, such as gvisor")
	f.StringVar(&o.maxMemory, "max-memory", "8Gi", "the most memory a sandbox may have (limit or request); empty means no maximum")
	f.StringVar(&o.maxCPU, "max-cpu", "4", "the most CPU a sandbox may have; empty means no maximum")
	f.StringVar(&o.defaultMemory, "default-memory", "4Gi", "the sandbox's memory limit where a request names none")
	f.StringVar(&o.defaultCPU, "default-cpu", "2", "the sandbox's CPU limit where a request names none")
	f.StringVar(&o.agentImage, "agent-image", envOr("FLEETLIFT_AGENT_IMAGE", jobspec.DefaultAgentImage), "the image the agent is installed from (FROM scratch, /usr/local/bin/fleetlift-agent)")
	f.StringVar(&o.serviceAccount, "sandbox-service-account", jobspec.DefaultServiceAccount, "the sandbox pods' service account, which must have no bindings")
	f.StringVar(&o.isolation, "sandbox-isolation", protocol.IsolationNamespaces, "how the agent isolates the work it runs in the pod: "+protocol.IsolationNamespaces+" (user, mount and PID namespaces: the pod's seccomp profile must allow them, see --seccomp-localhost-profile) or "+protocol.IsolationNone+" (rely on the pod alone, e.g. with --required-runtime-class gvisor)")
	f.StringVar(&o.seccompProfile, "seccomp-localhost-profile", "", "a Localhost seccomp profile for sandbox pods instead of RuntimeDefault (one that allows the system calls the agent's jail needs)")
	f.BoolVar(&o.userNamespaces, "user-namespaces", false, "run sandbox pods in user namespaces of their own (hostUsers: false) with the agent's /proc unmasked, which the jail (--sandbox-isolation "+protocol.IsolationNamespaces+") needs in a pod; the nodes must run user-namespaced pods (containerd 2.0 or CRI-O, runc 1.2 or crun 1.9, Linux 6.3)")
	f.IntVar(&o.processes, "sandbox-processes", jobspec.DefaultProcesses, "the most processes and threads each command the agent jails in a sandbox pod may run at once (a pod has no such bound but its node's podPidsLimit); a fork bomb stops there")
	f.StringVar(&o.pullPolicy, "image-pull-policy", "", "Always, IfNotPresent or Never for sandbox containers; empty means the Kubernetes default")
	f.DurationVar(&o.maxLifetime, "max-lifetime", 72*time.Hour, "every sandbox Job's activeDeadlineSeconds; 0 means none")
	f.DurationVar(&o.execTimeout, "exec-timeout", controller.DefaultExecTimeout, "the timeout of exec requests that name none")
	f.IntVar(&o.workers, "workers", 8, "how many requests to reconcile at once")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info or error")
	f.StringVar(&o.backend, "backend", envOr("FLEETLIFT_SANDBOX_BACKEND", backendJobs), "what runs sandbox pods: "+backendJobs+" (a Job per request) or "+backendAgentSandbox+" (a SandboxClaim on a kubernetes-sigs/agent-sandbox warm pool per request; see the template command)")
	f.StringSliceVar(&o.warmPools, "warm-pool", envList("FLEETLIFT_WARM_POOLS", nil), "agent-sandbox: IMAGE=POOL, the SandboxWarmPool that serves requests for IMAGE (repeatable)")
}

// pools parses --warm-pool.
func (o *options) pools() (map[string]string, error) {
	out := map[string]string{}
	for _, p := range o.warmPools {
		image, pool, ok := strings.Cut(p, "=")
		if !ok || image == "" || pool == "" {
			return nil, fmt.Errorf("--warm-pool %q: want IMAGE=POOL", p)
		}
		out[image] = pool
	}
	return out, nil
}

// restConfig is the cluster's configuration: --kubeconfig, else in the
// cluster.
func (o *options) restConfig() (*rest.Config, error) {
	if o.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
	}
	return cfg, nil
}

func quantity(flag, v string) (*resource.Quantity, error) {
	if v == "" {
		return nil, nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return nil, fmt.Errorf("--%s %q: %w", flag, v, err)
	}
	return &q, nil
}

func (o *options) run(ctx context.Context, logw io.Writer) error {
	level := map[string]int{"debug": -1, "info": 0, "error": 2}
	lv, ok := level[o.logLevel]
	if !ok {
		return fmt.Errorf("--log-level %q: want debug, info or error", o.logLevel)
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(logw), zap.JSONEncoder(), zap.Level(zapcore.Level(lv))))
	log := ctrl.Log.WithName("fleetlift-controller")
	switch {
	case memory.err != nil:
		log.V(1).Info("no Go memory limit from the cgroup", "error", memory.err.Error())
	case memory.limited:
		log.V(1).Info("Go memory limit", "bytes", memory.limit, "of_cgroup_limit", gcpace.MemoryRatio)
	}

	var serve []string
	switch o.isolation {
	case protocol.IsolationNamespaces:
	case protocol.IsolationNone:
		serve = []string{"--isolation", protocol.IsolationNone}
	default:
		return fmt.Errorf("--sandbox-isolation %q: want %s or %s", o.isolation, protocol.IsolationNamespaces, protocol.IsolationNone)
	}
	switch corev1.PullPolicy(o.pullPolicy) {
	case "", corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return fmt.Errorf("--image-pull-policy %q: want Always, IfNotPresent or Never", o.pullPolicy)
	}
	if o.processes < 1 {
		return fmt.Errorf("--sandbox-processes %d: want 1 or more", o.processes)
	}
	maxMem, err := quantity("max-memory", o.maxMemory)
	if err != nil {
		return err
	}
	maxCPU, err := quantity("max-cpu", o.maxCPU)
	if err != nil {
		return err
	}
	defMem, err := quantity("default-memory", o.defaultMemory)
	if err != nil {
		return err
	}
	defCPU, err := quantity("default-cpu", o.defaultCPU)
	if err != nil {
		return err
	}
	if len(o.images) == 0 {
		return errors.New("--allowed-image: name at least one image pattern")
	}

	cfg, err := o.restConfig()
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, agentsv1beta1.AddToScheme, extv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	sandboxPods, err := labels.Parse(jobspec.LabelComponent + "=" + jobspec.ComponentValue)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        o.leaderID,
		LeaderElectionNamespace: o.leaderNamespace,
		// The controller's Role is the sandbox namespace's: it watches
		// nothing else, and of pods only the sandboxes'.
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{o.namespace: {}},
			ByObject:          map[client.Object]cache.ByObject{&corev1.Pod{}: {Label: sandboxPods}},
		},
	})
	if err != nil {
		return fmt.Errorf("make the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return errors.New("the cache has not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	executor, err := podexec.NewRemote(cfg)
	if err != nil {
		return err
	}
	defaults := v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: defMem, CPU: defCPU}}
	pod := jobspec.Config{
		AgentImage:              o.agentImage,
		ServiceAccount:          o.serviceAccount,
		ManagedBy:               "fleetlift-controller",
		ServeArgs:               serve,
		ImagePullPolicy:         corev1.PullPolicy(o.pullPolicy),
		SeccompLocalhostProfile: o.seccompProfile,
		UserNamespaces:          o.userNamespaces,
		Processes:               o.processes,
	}
	if o.agentCLI != "" {
		var argv []string
		if err := json.Unmarshal([]byte(o.agentCLI), &argv); err != nil || len(argv) == 0 {
			return fmt.Errorf(`--agent-cli %q: want a JSON array such as ["claude","-p"]`, o.agentCLI)
		}
	}
	var backend controller.Backend
	switch o.backend {
	case backendJobs:
		backend = &controller.Jobs{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pod: pod,
			DeadlineSeconds: int64(o.maxLifetime / time.Second),
		}
	case backendAgentSandbox:
		pools, err := o.pools()
		if err != nil {
			return err
		}
		backend = &controller.Claims{
			Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pools: pools,
			LifetimeSeconds: int64(o.maxLifetime / time.Second),
		}
	default:
		return fmt.Errorf("--backend %q: want %s or %s", o.backend, backendJobs, backendAgentSandbox)
	}
	_, err = controller.Setup(mgr, controller.Options{
		Policy: controller.Policy{
			Images: o.images, RuntimeClass: o.runtimeClass, MaxMemory: maxMem, MaxCPU: maxCPU, Secrets: o.secrets,
			GitTokenOrigins: o.tokenOrigins, AgentCLI: o.agentCLI,
			NodeSelector: o.nodeSelector, NodeLabels: o.nodeLabels,
		},
		Backend:     backend,
		Executor:    executor,
		Defaults:    defaults,
		ExecTimeout: o.execTimeout,
		Workers:     o.workers,
	})
	if err != nil {
		return err
	}
	log.Info("starting", "namespace", o.namespace, "leaderElection", o.leaderElect, "metrics", o.metricsAddr, "probes", o.probeAddr,
		"backend", o.backend, "allowedImages", o.images, "allowedSecrets", o.secrets, "requiredRuntimeClass", o.runtimeClass, "isolation", o.isolation)
	return mgr.Start(ctx)
}
