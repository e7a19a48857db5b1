package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
	gitx "github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/podexec"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
)

// The Kubernetes sandbox providers --sandbox names.
const (
	sandboxKubernetes     = "kubernetes"
	sandboxKubernetesJobs = "kubernetes-jobs"
)

// kubeFlags configure the Kubernetes sandbox providers; the images are
// --sandbox-image and --sandbox-agent-image (dockerFlags).
type kubeFlags struct {
	kubeconfig, namespace string
	secrets               []string
	serviceAccount        string
	nodeLabels, runtimes  []string
	// gatewayListen and gatewayURL are --gateway-listen and --gateway-url.
	gatewayListen, gatewayURL string
}

func (k *kubeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&k.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubernetes sandboxes: a kubeconfig file; empty means this pod's service account")
	f.StringVar(&k.namespace, "sandbox-namespace", "sandbox-isolated",
		"kubernetes sandboxes: the namespace of SandboxRequests (kubernetes) or Jobs (kubernetes-jobs)")
	f.StringSliceVar(&k.secrets, "sandbox-secret-ref", nil,
		"kubernetes sandboxes: VARIABLE=SECRET/KEY, a secret variable of the agent (a forge token, --agent-env's API key) and the key of the Secret in the sandbox namespace that holds its value (repeatable); values never leave the cluster's Secrets")
	f.StringVar(&k.serviceAccount, "sandbox-service-account", jobspec.DefaultServiceAccount,
		"kubernetes-jobs: the sandbox pods' service account, which must have no bindings")
	f.StringVar(&k.gatewayListen, "gateway-listen", "",
		"kubernetes sandboxes: where this worker serves its gateway to the sandbox pods (such as :8090): their agents clone through it, and the forge's token stays with this worker; needs --gateway-url")
	f.StringVar(&k.gatewayURL, "gateway-url", "",
		"kubernetes sandboxes: http://HOST:PORT, where sandbox pods reach this worker's --gateway-listen (its pod's address, such as http://$(POD_IP):8090), which the sandbox NetworkPolicy must allow")
	f.StringSliceVar(&k.nodeLabels, "sandbox-allowed-node-label", nil,
		"kubernetes-jobs: a node label a definition's sandbox.node_selector may name (repeatable; none by default: the definition's author would choose the nodes that hold the sandboxes' credentials); with kubernetes, fleetlift-controller's --allowed-node-label decides")
	f.StringSliceVar(&k.runtimes, "sandbox-allowed-runtime-class", nil,
		"kubernetes-jobs: a runtime class a definition's sandbox.runtime_class may name (repeatable; none by default); with kubernetes, fleetlift-controller's --required-runtime-class decides")
}

// refs parses --sandbox-secret-ref.
func (k *kubeFlags) refs() (map[string]kube.SecretRef, error) {
	refs := map[string]kube.SecretRef{}
	for _, s := range k.secrets {
		name, ref, err := kube.ParseSecretRef(s)
		if err != nil {
			return nil, usageErrorf("--sandbox-secret-ref %w", err)
		}
		refs[name] = ref
	}
	return refs, nil
}

// restConfig is --kubeconfig's cluster, else this pod's.
func (k *kubeFlags) restConfig() (*rest.Config, error) {
	if k.kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", k.kubeconfig)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandboxes: no --kubeconfig and not in a cluster: %w", err)
	}
	return cfg, nil
}

// kubeProvider makes the Kubernetes provider kind names, and checks that
// the worker can reach what it needs.
func (w *workerFlags) kubeProvider(ctx context.Context, logw io.Writer, kind string) (sandbox.Provider, error) {
	k, image, isolation := &w.kube, w.docker.image, w.isolation
	// controller-runtime's client logs through its own logger, and
	// prints a stack trace half a minute on when none was set: its errors
	// go with the worker's log.
	ctrllog.SetLogger(zap.New(zap.WriteTo(logw), zap.Level(zapcore.ErrorLevel)))
	refs, err := k.refs()
	if err != nil {
		return nil, err
	}
	cfg, err := k.restConfig()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := ctrlclient.NewWithWatch(cfg, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("kubernetes sandboxes: %w", err)
	}
	check, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	gw, err := w.kubeGateway(logw)
	if err != nil {
		return nil, err
	}
	if kind == sandboxKubernetes {
		if err := c.List(check, &v1alpha1.SandboxRequestList{}, ctrlclient.InNamespace(k.namespace), ctrlclient.Limit(1)); err != nil {
			return nil, fmt.Errorf("--sandbox kubernetes: list SandboxRequests in %s: %w (install deploy/crds and deploy/base/kubernetes and run fleetlift-controller; see docs/kubernetes.md)", k.namespace, err)
		}
		return &kube.Requests{Client: c, Namespace: k.namespace, Image: image, SecretRefs: refs, Gateway: gw}, nil
	}
	var serve []string
	switch isolation {
	case protocol.IsolationNamespaces:
	case protocol.IsolationNone:
		serve = []string{"--isolation", protocol.IsolationNone}
	default:
		return nil, usageErrorf("--sandbox-isolation %q: want %s or %s", isolation, protocol.IsolationNamespaces, protocol.IsolationNone)
	}
	exec, err := podexec.NewRemote(cfg)
	if err != nil {
		return nil, err
	}
	mem, cpu := resource.MustParse("4Gi"), resource.MustParse("2")
	return &kube.Jobs{
		Client: c, Executor: exec, Namespace: k.namespace, Image: image, SecretRefs: refs,
		Pod:        jobspec.Config{AgentImage: w.docker.agentImage, ServiceAccount: k.serviceAccount, ManagedBy: "fleetlift-worker", ServeArgs: serve, Processes: w.limits.processes},
		Defaults:   v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &cpu}},
		NodeLabels: k.nodeLabels, RuntimeClasses: k.runtimes, Gateway: gw,
	}, nil
}

// kubeGateway is the gateway Kubernetes sandboxes reach over the pod
// network (--gateway-listen, --gateway-url), nil without those flags or
// with nothing to serve: what gateway serves local and Docker sandboxes,
// the agents' clones from the operator's forge with this worker's token
// and the model with its key, which then go to no sandbox pod.
func (w *workerFlags) kubeGateway(logw io.Writer) (*kube.Gateway, error) {
	k := &w.kube
	if k.gatewayListen == "" && k.gatewayURL == "" {
		if len(w.egress) > 0 {
			return nil, usageErrorf("--sandbox-egress with kubernetes sandboxes needs --gateway-listen and --gateway-url: the pods reach the egress proxy through this worker's gateway")
		}
		if fs := w.forge; fs != nil && fs.Type != "local" {
			fmt.Fprintf(logw, "clones: sandbox pods clone from %s with a token of their own (--sandbox-secret-ref %s); with --gateway-listen and --gateway-url they clone through this worker and hold none\n", fs.URL, gitx.DefaultTokenEnv)
		}
		return nil, nil
	}
	if k.gatewayListen == "" || k.gatewayURL == "" {
		return nil, usageErrorf("--gateway-listen and --gateway-url go together: where this worker serves the gateway, and where sandbox pods reach it")
	}
	if _, err := agent.ParseGatewayURL(k.gatewayURL); err != nil {
		return nil, usageErrorf("--gateway-url: %w", err)
	}
	gw, err := w.gateway()
	if err != nil {
		return nil, err
	}
	if err := w.localReads(&gw); err != nil {
		return nil, err
	}
	if len(w.egress) > 0 {
		proxy, err := w.egressProxy()
		if err != nil {
			return nil, err
		}
		if gw == nil {
			gw = &gateway.Gateway{}
		}
		// Served on the gateway's port, to the sandboxes' keys: the
		// sandbox NetworkPolicy allows that one port of the workers.
		gw.Egress = proxy
	}
	if gw == nil {
		fmt.Fprintf(logw, "gateway: nothing to serve sandbox pods: no forge with a token (--forge-type, --forge-url), no model key ($%s) and no --sandbox-egress\n", w.modelKeyEnv)
		return nil, nil
	}
	ln, err := listen.TCP("gateway-listen", k.gatewayListen)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Fprintf(logw, "gateway: sandbox pods reach this worker's gateway at %s (served on %s)\n", k.gatewayURL, ln.Addr())
	w.sayGateway(logw)
	if gw.Egress != nil {
		fmt.Fprintf(logw, "egress: the work in sandbox pods reaches %s through this worker's egress proxy, at its gateway; nothing else\n", strings.Join(w.egress, ", "))
	}
	return &kube.Gateway{Gateway: gw, URL: k.gatewayURL}, nil
}

// localReads makes the gateway serve the local repositories under
// --allow-file-root (file:// URLs and absolute paths), which sandbox pods
// cannot see: their agents clone those through it too, and the worker
// proposes their changes from its copies.
func (w *workerFlags) localReads(gw **gateway.Gateway) error {
	roots, err := w.roots()
	if err != nil || len(roots) == 0 {
		return err
	}
	if *gw == nil {
		*gw = &gateway.Gateway{}
	}
	if (*gw).Git == nil {
		(*gw).Git = &gateway.GitReads{Git: &gitx.Git{}}
	}
	(*gw).Git.FileRoots = roots
	return nil
}

// newKubeWorker is the worker with Kubernetes sandboxes: every worker
// reaches every sandbox, so all the activities go to the shared queue
// (no host queue).
func newKubeWorker(c client.Client, wf *workerFlags, provider sandbox.Provider) (*workers, error) {
	env, secrets, err := wf.kubeSandbox()
	if err != nil {
		return nil, err
	}
	if provider.Name() == sandboxKubernetes {
		// The controller decides where the clone token goes and what
		// gets the agent CLI's key (its --git-token-origin, --agent-cli):
		// a request that says so is refused.
		for _, k := range []string{protocol.EnvGitTokenOrigins, protocol.EnvAgentCLI, protocol.EnvAgentCLIEnv} {
			delete(env, k)
		}
	}
	vars := credentialVariables()
	if wf.gitReads {
		// The pods clone through the worker's gateway: a definition's
		// credentials.github is not applied (the sandbox's notes say so).
		vars.Forge = nil
	}
	if wf.gatewayKey == vars.AgentCLI {
		// The gateway holds the model's key: so is credentials.anthropic.
		vars.AgentCLI = ""
	}
	acts := &activity.Activities{Sandbox: wf.observed(provider), SandboxEnv: env, SandboxSecrets: secrets,
		CredentialVariables: vars}
	if err := wf.deliverer(acts); err != nil {
		return nil, err
	}
	if err := wf.shareBudgets(c, io.Discard); err != nil {
		return nil, err
	}
	return newWorkers(provider, wf.localForge, sharedWorker(c, acts, wf.options())), nil
}

// kubeSandbox is what Kubernetes sandboxes get: the variables of local
// ones, and as secrets every --sandbox-secret-ref, by name only (the
// provider sends each name's reference; values stay in the cluster's
// Secrets and this process), whatever this process's environment holds.
// The --agent-env names among them are the agent CLI's alone.
func (w *workerFlags) kubeSandbox() (env, secrets map[string]string, _ error) {
	env, secrets, err := w.sandbox()
	if err != nil {
		return nil, nil, err
	}
	refs, err := w.kube.refs()
	if err != nil {
		return nil, nil, err
	}
	for name := range refs {
		switch {
		case w.gitReads && name == gitx.DefaultTokenEnv:
			continue // the gateway clones with the worker's token
		case name == w.gatewayKey || name == w.openAIKey:
			continue // the gateway holds the model's key
		}
		secrets[name] = ""
	}
	for name := range secrets {
		secrets[name] = ""
	}
	var cliOnly []string
	for _, name := range w.agentEnv {
		if _, ok := secrets[name]; ok {
			cliOnly = append(cliOnly, name)
		}
	}
	delete(env, protocol.EnvAgentCLIEnv)
	if len(cliOnly) > 0 {
		slices.Sort(cliOnly)
		env[protocol.EnvAgentCLIEnv] = strings.Join(cliOnly, ",")
	}
	return env, secrets, nil
}
