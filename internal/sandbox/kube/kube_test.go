package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/controller/controllertest"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git/gittest"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
	"github.com/fleetlift/fleetlift/internal/sandbox/sandboxtest"
)

var cp kubetest.Shared

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	// agent-sandbox's CRDs, for TestClaimsConformance.
	dir, err := kubetest.ModuleDir("sigs.k8s.io/agent-sandbox")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cp.Options = kubetest.Options{
		CRDPaths:    []string{filepath.Join(dir, "k8s", "crds")},
		AddToScheme: []func(*runtime.Scheme) error{agentsv1beta1.AddToScheme, extv1beta1.AddToScheme},
	}
	os.Exit(cp.Main(m))
}

// refs give the conformance suite's secret from a Secret.
var refs = map[string]kube.SecretRef{
	"FLEETLIFT_FORGE_TOKEN": {Secret: "github-credentials", Key: "token"},
	"FLEETLIFT_TEST_TOKEN":  {Secret: "claude-credentials", Key: "test-token"},
}

// agents counts the agents running in sandbox sb's pod.
func agents(c *controllertest.Cluster) func(t *testing.T, sb *sandbox.Sandbox) int {
	return func(t *testing.T, sb *sandbox.Sandbox) int {
		n := 0
		for _, p := range c.Kubelet.Processes(c.Pod(t, sb.ID), jobspec.ContainerSandbox) {
			if strings.Contains(p, "fleetlift-agent serve") {
				n++
			}
		}
		return n
	}
}

func options(t *testing.T, id string) sandbox.ProvisionOptions {
	return sandbox.ProvisionOptions{Image: controllertest.Image}
}

// The kubernetes provider, as the worker's service account (the
// sandboxrequests Role alone), against the controller (as its service
// account) and a kubelet that runs the pods on this machine: the whole
// conformance suite.
func TestRequestsConformance(t *testing.T) {
	c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true})
	worker := c.Worker(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			return &kube.Requests{Client: worker, Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs}
		},
		Options: options,
		Agents:  agents(c),
	})
}

// The kubernetes-jobs provider, as the worker's service account with the
// shipped worker-jobs Role, execing through the kubelet.
func TestJobsConformance(t *testing.T) {
	c := controllertest.New(t, cp.Env(t), controllertest.Options{})
	c.Env.Apply(t, map[string]string{"fleetlift-system": c.System, "sandbox-isolated": c.Sandbox}, "deploy/base/kubernetes/rbac/worker-jobs.yaml")
	worker := c.Worker(t)
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			return &kube.Jobs{Client: worker, Executor: c.Kubelet, Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs,
				Pod: controllertest.PodConfig(), Defaults: controllertest.Defaults(), Poll: 20e6}
		},
		Options: options,
		Agents:  agents(c),
	})
}

// A definition's credentials (opts.SecretRefs) say, for its sandboxes
// alone, which Secret key gives the agent's forge token and its CLI's key:
// over the worker's references, by reference in the pod (secretKeyRef),
// and no value anywhere in what the worker writes.
func TestDefinitionSecretRefs(t *testing.T) {
	const workerValue = "the worker's own value, never sent"
	opts := func(id string) sandbox.ProvisionOptions {
		return sandbox.ProvisionOptions{
			ID: id, Image: controllertest.Image,
			Secrets: map[string]string{"FLEETLIFT_FORGE_TOKEN": workerValue, "FLEETLIFT_TEST_TOKEN": workerValue},
			SecretRefs: map[string]sandbox.SecretRef{
				"FLEETLIFT_FORGE_TOKEN": {Secret: "claude-credentials", Key: "test-token"},
				"ANTHROPIC_API_KEY":     {Secret: "github-credentials", Key: "token"},
			},
		}
	}
	want := map[string]corev1.SecretKeySelector{
		"FLEETLIFT_FORGE_TOKEN": {LocalObjectReference: corev1.LocalObjectReference{Name: "claude-credentials"}, Key: "test-token"},
		"ANTHROPIC_API_KEY":     {LocalObjectReference: corev1.LocalObjectReference{Name: "github-credentials"}, Key: "token"},
		"FLEETLIFT_TEST_TOKEN":  {LocalObjectReference: corev1.LocalObjectReference{Name: "claude-credentials"}, Key: "test-token"},
	}
	// checkPod finds want in the sandbox container's env, as references.
	checkPod := func(t *testing.T, spec corev1.PodSpec) {
		t.Helper()
		got := map[string]corev1.SecretKeySelector{}
		for _, c := range spec.Containers {
			if c.Name != jobspec.ContainerSandbox {
				continue
			}
			for _, e := range c.Env {
				if strings.Contains(e.Value, workerValue) {
					t.Errorf("%s holds the worker's value", e.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					got[e.Name] = *e.ValueFrom.SecretKeyRef
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("secretKeyRef env = %+v; want %+v", got, want)
		}
	}
	noValue := func(t *testing.T, obj any) {
		t.Helper()
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), workerValue) || strings.Contains(string(b), "value of ") {
			t.Errorf("a secret's value is in %T: %s", obj, b)
		}
	}

	t.Run("kubernetes", func(t *testing.T) {
		c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true})
		p := &kube.Requests{Client: c.Worker(t), Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		sb, err := p.Provision(ctx, opts("definition-refs"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
		if sb.IgnoredSecretRefs != nil {
			t.Errorf("IgnoredSecretRefs = %q; the provider applies them", sb.IgnoredSecretRefs)
		}
		var sbr v1alpha1.SandboxRequest
		if err := c.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.Sandbox, Name: jobspec.Name(sb.ID)}, &sbr); err != nil {
			t.Fatal(err)
		}
		noValue(t, &sbr)
		var pod corev1.Pod
		if err := c.Env.Client.Get(ctx, c.Pod(t, sb.ID), &pod); err != nil {
			t.Fatal(err)
		}
		checkPod(t, pod.Spec)
		noValue(t, &pod)
	})

	// The controller's policy still decides: a definition cannot name a
	// Secret the operator did not allow.
	t.Run("kubernetes refused", func(t *testing.T) {
		c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true})
		p := &kube.Requests{Client: c.Worker(t), Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		o := opts("definition-refused")
		o.SecretRefs["FLEETLIFT_FORGE_TOKEN"] = sandbox.SecretRef{Secret: "fleetlift-reconciler-token", Key: "token"}
		sb, err := p.Provision(ctx, o)
		if err == nil {
			_ = p.Cleanup(context.Background(), sb.ID)
			t.Fatal("provisioned a sandbox with a Secret the controller does not allow")
		}
		t.Cleanup(func() { _ = p.Cleanup(context.Background(), o.ID) })
		for _, s := range []string{"(PolicyRefused)", "Secret fleetlift-reconciler-token", "allowed: claude-credentials, github-credentials"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not say %q", err, s)
			}
		}
		// Asked again the same, it is refused the same: the task
		// fails at once rather than provisioning it again.
		if !errors.Is(err, sandbox.ErrRefused) {
			t.Errorf("error %q is not a refusal (sandbox.ErrRefused)", err)
		}
	})

	t.Run("kubernetes-jobs", func(t *testing.T) {
		c := controllertest.New(t, cp.Env(t), controllertest.Options{})
		c.Env.Apply(t, map[string]string{"fleetlift-system": c.System, "sandbox-isolated": c.Sandbox}, "deploy/base/kubernetes/rbac/worker-jobs.yaml")
		p := &kube.Jobs{Client: c.Worker(t), Executor: c.Kubelet, Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs,
			Pod: controllertest.PodConfig(), Defaults: controllertest.Defaults(), Poll: 20e6}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		sb, err := p.Provision(ctx, opts("definition-refs-jobs"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })
		var jobs batchv1.JobList
		if err := c.Env.Client.List(ctx, &jobs, client.InNamespace(c.Sandbox), client.MatchingLabels{jobspec.LabelSandbox: jobspec.LabelValue(sb.ID)}); err != nil || len(jobs.Items) != 1 {
			t.Fatalf("jobs of %s: %d (%v); want one", sb.ID, len(jobs.Items), err)
		}
		noValue(t, &jobs.Items[0])
		checkPod(t, jobs.Items[0].Spec.Template.Spec)
	})
}

// The kubernetes provider, as the worker's service account, against the
// controller with the agent-sandbox backend and agent-sandbox's own
// controllers: each request is a SandboxClaim on a warm pool whose
// template gives the suite's secrets, its pod run by the kubelet.
func TestClaimsConformance(t *testing.T) {
	var creds []v1alpha1.Credential
	for env, ref := range refs {
		creds = append(creds, v1alpha1.Credential{Name: ref.Secret, EnvVar: env, SecretKey: ref.Key})
	}
	c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true, AgentSandbox: true, PoolCredentials: creds})
	worker := c.Worker(t)
	count := agents(c)
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T) sandbox.Provider {
			return &kube.Requests{Client: worker, Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs}
		},
		Options: options,
		Agents: func(t *testing.T, sb *sandbox.Sandbox) int {
			claimed(t, c, sb.ID)
			return count(t, sb)
		},
	})
}

// claimed fails t unless request id runs in the pod agent-sandbox made
// for its claim: the pod of a Sandbox the claim controls.
func claimed(t *testing.T, c *controllertest.Cluster, id string) {
	t.Helper()
	ctx := context.Background()
	var sbr v1alpha1.SandboxRequest
	if err := c.Env.Client.Get(ctx, types.NamespacedName{Namespace: c.Sandbox, Name: id}, &sbr); err != nil {
		t.Fatal(err)
	}
	if sbr.Status.ClaimName == "" || sbr.Status.JobName != "" {
		t.Fatalf("request %s: claim %q, Job %q; want a claim only", id, sbr.Status.ClaimName, sbr.Status.JobName)
	}
	var claim extv1beta1.SandboxClaim
	if err := c.Env.Client.Get(ctx, types.NamespacedName{Namespace: c.Sandbox, Name: sbr.Status.ClaimName}, &claim); err != nil {
		t.Fatal(err)
	}
	var sb agentsv1beta1.Sandbox
	if err := c.Env.Client.Get(ctx, types.NamespacedName{Namespace: c.Sandbox, Name: claim.Status.SandboxStatus.Name}, &sb); err != nil {
		t.Fatalf("the Sandbox of claim %s: %v", claim.Name, err)
	}
	if !metav1.IsControlledBy(&sb, &claim) {
		t.Errorf("Sandbox %s is not controlled by claim %s", sb.Name, claim.Name)
	}
	var pod corev1.Pod
	if err := c.Env.Client.Get(ctx, types.NamespacedName{Namespace: c.Sandbox, Name: sbr.Status.PodName}, &pod); err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(&pod, &sb) {
		t.Errorf("pod %s is not Sandbox %s's, of claim %s", pod.Name, sb.Name, claim.Name)
	}
}

// A definition's sandbox placement reaches the pods only as far as the
// operator allows: with kubernetes-jobs, node labels and runtime classes
// the worker was not told to allow are refused before anything is made,
// an allowed node label reaches the pod, and another namespace than the
// worker's is refused by both providers; with kubernetes, the
// controller's policy refuses the label.
func TestDefinitionPlacement(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true})
	c.Env.Apply(t, map[string]string{"fleetlift-system": c.System, "sandbox-isolated": c.Sandbox}, "deploy/base/kubernetes/rbac/worker-jobs.yaml")
	jobs := &kube.Jobs{Client: c.Worker(t), Executor: c.Kubelet, Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs,
		Pod: controllertest.PodConfig(), Defaults: controllertest.Defaults(), Poll: 20e6, NodeLabels: []string{"pool"}}
	requests := &kube.Requests{Client: c.Worker(t), Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs}

	// madeFor lists the Jobs of sandbox id.
	madeFor := func(id string) []batchv1.Job {
		var list batchv1.JobList
		if err := c.Env.Client.List(ctx, &list, client.InNamespace(c.Sandbox), client.MatchingLabels{jobspec.LabelSandbox: jobspec.LabelValue(id)}); err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	for _, tc := range []struct {
		name string
		p    sandbox.Provider
		opts sandbox.ProvisionOptions
		says []string
	}{
		{"jobs, a label not allowed", jobs, sandbox.ProvisionOptions{ID: "place-label", NodeSelector: map[string]string{"pool": "a", "kubernetes.io/hostname": "n1"}},
			[]string{"node label kubernetes.io/hostname", "--sandbox-allowed-node-label; allowed: pool"}},
		{"jobs, a runtime class not allowed", jobs, sandbox.ProvisionOptions{ID: "place-runtime", RuntimeClass: "runc-privileged"},
			[]string{"runtime class runc-privileged is not allowed", "allowed: none"}},
		{"jobs, another namespace", jobs, sandbox.ProvisionOptions{ID: "place-ns", Namespace: "team-b"},
			[]string{"namespace team-b", "sandboxes are in " + c.Sandbox}},
		{"requests, another namespace", requests, sandbox.ProvisionOptions{ID: "place-ns-req", Namespace: "team-b"},
			[]string{"namespace team-b", "sandboxes are in " + c.Sandbox}},
		{"requests, a label the controller does not allow", requests, sandbox.ProvisionOptions{ID: "place-label-req", NodeSelector: map[string]string{"pool": "a"}},
			[]string{"node label pool"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Image = controllertest.Image
			sb, err := tc.p.Provision(ctx, tc.opts)
			t.Cleanup(func() { _ = tc.p.Cleanup(context.Background(), tc.opts.ID) })
			if err == nil {
				t.Fatalf("provisioned %s", sb.ID)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if tc.p == jobs && len(madeFor(tc.opts.ID)) > 0 {
				t.Errorf("a refused sandbox's Job was made")
			}
		})
	}

	t.Run("jobs, an allowed label", func(t *testing.T) {
		sb, err := jobs.Provision(ctx, sandbox.ProvisionOptions{ID: "place-ok", Image: controllertest.Image, NodeSelector: map[string]string{"pool": "batch"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = jobs.Cleanup(context.Background(), sb.ID) })
		made := madeFor(sb.ID)
		if len(made) != 1 || !reflect.DeepEqual(made[0].Spec.Template.Spec.NodeSelector, map[string]string{"pool": "batch"}) {
			t.Errorf("jobs of %s: %+v; want one whose pods select pool=batch", sb.ID, made)
		}
	})
}

// The work the real agent runs in kubernetes-jobs sandboxes, jailed as
// the worker's pods jail it, cannot act against the control plane, and
// reaches the forge and the model through the worker's gateway alone.
func TestUntrustedWork(t *testing.T) {
	j := newJailed(t)
	newProvider := j.provider
	sandboxtest.RunUntrusted(t, sandboxtest.UntrustedHarness{
		Hidden:      t.TempDir(),
		SecretValue: controllertest.Secrets["github-credentials"]["token"],
		New:         func(t *testing.T) sandbox.Provider { return newProvider(nil) },
		// The worker's gateway, reached over the network as pods reach
		// it (here this machine's loopback, which the stand-in kubelet's
		// pods share).
		NewWithGateway: func(t *testing.T, gw *gateway.Gateway) sandbox.Provider {
			return newProvider(serveGateway(t, gw))
		},
		// The worker's egress proxy, which its gateway serves to the
		// sandboxes' keys.
		NewWithEgress: func(t *testing.T, h http.Handler) sandbox.Provider {
			return newProvider(serveGateway(t, &gateway.Gateway{Egress: h}))
		},
		// This machine's curl, as an agent CLI.
		ModelCLI:   sandboxtest.CurlModelCLI,
		Options:    j.options,
		Repository: j.repository,
	})
}

// jailed is a stand-in cluster whose kubernetes-jobs sandboxes run the
// real agent, jailing the work as the worker's pods jail it, with
// repositories in repos, which the pods read.
type jailed struct {
	c     *controllertest.Cluster
	repos string
	// provider is the worker's provider, with gw when not nil.
	provider func(gw *kube.Gateway) sandbox.Provider
}

func newJailed(t *testing.T) *jailed {
	// The pods' /tmp is their own: the repositories are elsewhere on
	// this machine, which the kubelet shares with the pods.
	repos, err := os.MkdirTemp("/var/tmp", "fleetlift-kube-repos-")
	if err != nil {
		t.Fatal(err)
	}
	// The pods' user reads them.
	if err := os.Chmod(repos, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(repos) })
	c := controllertest.New(t, cp.Env(t), controllertest.Options{HostPaths: []string{repos}})
	c.Env.Apply(t, map[string]string{"fleetlift-system": c.System, "sandbox-isolated": c.Sandbox}, "deploy/base/kubernetes/rbac/worker-jobs.yaml")
	worker := c.Worker(t)
	pod := controllertest.PodConfig()
	pod.ServeArgs = []string{"--isolation", "namespaces", "--manifest-poll", "20ms"}
	// Every token variable of the agent comes from github-credentials.
	token := kube.SecretRef{Secret: "github-credentials", Key: "token"}
	tokenRefs := map[string]kube.SecretRef{"FLEETLIFT_FORGE_TOKEN": token, "FLEETLIFT_GIT_TOKEN": token, "GITHUB_TOKEN": token}
	return &jailed{c: c, repos: repos, provider: func(gw *kube.Gateway) sandbox.Provider {
		return &kube.Jobs{Client: worker, Executor: c.Kubelet, Namespace: c.Sandbox, Image: controllertest.Image,
			Pod: pod, Defaults: controllertest.Defaults(), Poll: 20e6, Gateway: gw, SecretRefs: tokenRefs}
	}}
}

// options provision a sandbox whose agent clones from j's repositories.
func (j *jailed) options(t *testing.T, id string) sandbox.ProvisionOptions {
	return sandbox.ProvisionOptions{ID: id, Image: controllertest.Image, Env: map[string]string{
		"FLEETLIFT_ALLOW_FILE_ROOTS": j.repos, "GIT_CONFIG_GLOBAL": "/dev/null"}}
}

// repository makes a repository with a README.md on main in j.repos.
func (j *jailed) repository(t *testing.T) (string, func(branch, path string) string) {
	dir, err := os.MkdirTemp(j.repos, "repo-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	bare := gittest.NewRemote(t, dir, "svc", map[string]string{"README.md": "# svc\n"})
	return "file://" + bare, gittest.Show(bare)
}

// serveGateway serves gw as a worker does to its sandbox pods, on this
// machine's loopback, which the stand-in kubelet's pods share.
func serveGateway(t *testing.T, gw *gateway.Gateway) *kube.Gateway {
	t.Helper()
	g, _ := serveGatewayUntil(t, gw)
	return g
}

// serveGatewayUntil is serveGateway, until stop is called.
func serveGatewayUntil(t *testing.T, gw *gateway.Gateway) (_ *kube.Gateway, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return &kube.Gateway{Gateway: gw, URL: "http://" + ln.Addr().String()}, func() { srv.Close() }
}

// The kubernetes provider hands its sandboxes the worker's gateway: its
// address in the request, for the controller's pod; once the pod runs, a
// key of the sandbox's own in its protocol directory, which the gateway
// takes until the sandbox is cleaned up.
func TestRequestsGetTheGateway(t *testing.T) {
	c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true})
	gw := &gateway.Gateway{}
	p := &kube.Requests{Client: c.Worker(t), Namespace: c.Sandbox, Image: controllertest.Image, SecretRefs: refs,
		Gateway: &kube.Gateway{Gateway: gw, URL: "http://10.1.2.3:8090"}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "gateway-key", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	var sbr v1alpha1.SandboxRequest
	if err := c.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.Sandbox, Name: jobspec.Name(sb.ID)}, &sbr); err != nil {
		t.Fatal(err)
	}
	if got := sbr.Spec.Env["FLEETLIFT_GATEWAY_URL"]; got != "http://10.1.2.3:8090" {
		t.Errorf("the request's FLEETLIFT_GATEWAY_URL = %q; want the worker's address", got)
	}
	rc, err := p.CopyFrom(ctx, sb.ID, ".fleetlift/gateway-key")
	if err != nil {
		t.Fatalf("the sandbox has no key to the gateway: %v", err)
	}
	key, _ := io.ReadAll(rc)
	rc.Close()
	if _, ok := gw.Usage(strings.TrimSpace(string(key))); !ok {
		t.Errorf("the gateway does not take the sandbox's key %q", key)
	}
	if err := p.Cleanup(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := gw.Usage(strings.TrimSpace(string(key))); ok {
		t.Error("the gateway still takes the key of a sandbox cleaned up")
	}
}
