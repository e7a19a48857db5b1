package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/kubetest/node"
)

// agentSandboxP50 is agent-sandbox's own published figure for a claim on
// a warm pool to a ready sandbox, p50 (the issue quotes it).
const agentSandboxP50 = 92 * time.Millisecond

// warmPoolSize is how many ready pods the pool keeps: two fit the node's
// 2 CPUs beside the control plane.
const warmPoolSize = 2

// runWarmPool measures, on a real node, the agent-sandbox backend: the
// real agent-sandbox controller (bin/node/agent-sandbox-controller, its
// extensions on) keeps a SandboxWarmPool of fleetlift's sandbox pod
// (controller.Template, as `fleetlift-controller template` prints it)
// ready, and fleetlift's controller, in this process with the Claims
// backend, serves each SandboxRequest with a SandboxClaim on it: from the
// request's create to its status Running (the claimed pod's agent runs,
// its exec container too), p50 and p95. In the same run, the same
// requests on the Jobs backend, which start a pod each, are the baseline;
// agent-sandbox's published p50 is printed beside them. Each request is
// deleted, and the pool full again, before the next, so that every claim
// finds a ready pod.
func runWarmPool(n int, out io.Writer) error {
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	crds, err := kubetest.ModuleDir("sigs.k8s.io/agent-sandbox")
	if err != nil {
		return err
	}
	start := time.Now()
	nd, err := node.Start(node.Options{
		Images: []string{"fleetlift/sandbox:dev", jobspec.DefaultAgentImage},
		Control: kubetest.Options{
			CRDPaths:    []string{filepath.Join(crds, "k8s", "crds")},
			AddToScheme: []func(*runtime.Scheme) error{agentsv1beta1.AddToScheme, extv1beta1.AddToScheme},
		},
	})
	if err != nil {
		return err
	}
	defer nd.Stop()
	ready := time.Since(start)
	env := nd.Env
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	bin := filepath.Join(env.Root, "bin", "node", "agent-sandbox-controller")
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("%s is missing: run `make bin/node` (tools/agentsandbox/build.sh builds it): %w", bin, err)
	}
	tmp, err := os.MkdirTemp("", "bench-warmpool-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := kubetest.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		return err
	}
	// Its conversion webhook is off: every object here is v1beta1.
	agents := exec.Command(bin, "--kubeconfig", kubeconfig, "--extensions", "--enable-webhook=false", "--manage-webhook-certs=false",
		"--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	logFile, err := os.Create(filepath.Join(tmp, "agent-sandbox-controller.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	agents.Stdout, agents.Stderr = logFile, logFile
	agents.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := agents.Start(); err != nil {
		return err
	}
	defer func() { agents.Process.Kill(); agents.Wait() }()
	failed := func(err error) error {
		b, _ := os.ReadFile(logFile.Name())
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		return fmt.Errorf("%w\nagent-sandbox-controller's log ends:\n%s", err, b)
	}

	ns := "bench"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: kubetest.RestrictedLabels}}); err != nil {
		return err
	}
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: jobspec.DefaultServiceAccount, Namespace: ns},
		AutomountServiceAccountToken: new(bool)}); err != nil {
		return err
	}
	// Unjailed (the node has no seccomp profile installed here), small
	// enough that the pool and a Job's pod fit.
	const image = "fleetlift/sandbox:dev"
	pod := jobspec.Config{ImagePullPolicy: corev1.PullNever, ServeArgs: []string{"--isolation", protocol.IsolationNone}, ManagedBy: "fleetlift-controller"}
	mem, cpu := resource.MustParse("256Mi"), resource.MustParse("200m")
	res := v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &cpu}}
	tpl, pool := controller.Template(pod, ns, "bench-pool", image, nil, res, warmPoolSize)
	if err := env.Client.Create(ctx, tpl); err != nil {
		return err
	}
	if err := env.Client.Create(ctx, pool); err != nil {
		return err
	}
	policy := controller.Policy{Images: []string{"fleetlift/sandbox:*"}}
	poolFull := func() (bool, error) {
		var p extv1beta1.SandboxWarmPool
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), &p); err != nil {
			return false, err
		}
		return p.Status.ReadyReplicas >= warmPoolSize, nil
	}
	t0 := time.Now()
	if err := pollEvery(5*time.Millisecond, 3*time.Minute, "the warm pool full", poolFull); err != nil {
		return failed(err)
	}
	filled := time.Since(t0)

	measure := func(backend func(ctrl.Manager) controller.Backend, between func() (bool, error)) ([]time.Duration, error) {
		cctx, stop := context.WithCancel(ctx)
		defer stop()
		if err := startBackend(cctx, env, ns, policy, 1, backend); err != nil {
			return nil, err
		}
		var ds []time.Duration
		for i := -1; i < n; i++ {
			if between != nil {
				if err := pollEvery(5*time.Millisecond, 3*time.Minute, "the warm pool full again", between); err != nil {
					return nil, err
				}
			}
			name := fmt.Sprintf("sbr-%d-%03d", time.Now().UnixNano()%1e6, i+1)
			d, err := requestRunning(ctx, env, ns, name, image, 5*time.Millisecond)
			if err != nil {
				return nil, err
			}
			if i >= 0 {
				ds = append(ds, d)
			}
		}
		return ds, nil
	}
	claims, err := measure(func(mgr ctrl.Manager) controller.Backend {
		return &controller.Claims{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pools: map[string]string{image: pool.Name}}
	}, poolFull)
	if err != nil {
		return failed(err)
	}
	// The Jobs backend starts a pod per request; the pool's pods stay,
	// as they would in a cluster serving both.
	jobs, err := measure(func(mgr ctrl.Manager) controller.Backend {
		return &controller.Jobs{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pod: pod}
	}, nil)
	if err != nil {
		return err
	}

	fmt.Fprintf(out, "bench/kube -node -warm-pool: %d sandboxes one at a time on a real node (kubelet v1.37.2, containerd; node ready in %s), agent-sandbox's controller (bin/node) keeping a pool of %d ready (filled in %s), fleetlift's controller in process\n\n",
		n, ready.Round(time.Second), warmPoolSize, filled.Round(time.Millisecond))
	fmt.Fprintf(out, "%-58s %9s %9s %9s\n", "", "p50", "p95", "max")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"SandboxRequest -> Running, Jobs backend (a pod each)", jobs},
		{"SandboxRequest -> Running, warm-pool claim (agent-sandbox)", claims},
	} {
		fmt.Fprintf(out, "%-58s %9s %9s %9s\n", r.name, ms(pct(r.d, 50)), ms(pct(r.d, 95)), ms(pct(r.d, 100)))
	}
	fmt.Fprintf(out, "\nratio of p50s: warm-pool claim / Jobs backend %.2fx; agent-sandbox's published claim p50: %s (warm-pool claim / that %.2fx)\n",
		float64(pct(claims, 50))/float64(pct(jobs, 50)), ms(agentSandboxP50), float64(pct(claims, 50))/float64(agentSandboxP50))
	return nil
}

// requestRunning creates SandboxRequest name for image in ns and returns
// how long it took to reach status Running, checked every interval; then
// deletes it and waits until its pods are gone.
func requestRunning(ctx context.Context, env *kubetest.Env, ns, name, image string, interval time.Duration) (time.Duration, error) {
	sbr := &v1alpha1.SandboxRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       v1alpha1.SandboxRequestSpec{TaskID: name, Image: image},
	}
	t := time.Now()
	if err := env.Client.Create(ctx, sbr); err != nil {
		return 0, err
	}
	var last string
	if err := pollEvery(interval, 3*time.Minute, name+" Running", func() (bool, error) {
		var cur v1alpha1.SandboxRequest
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sbr), &cur); err != nil {
			return false, err
		}
		if cur.Status.Phase == v1alpha1.PhaseFailed {
			return false, fmt.Errorf("%s failed: %s", name, cur.Status.Message)
		}
		last = fmt.Sprintf("%s: %s", cur.Status.Phase, cur.Status.Message)
		return cur.Status.Phase == v1alpha1.PhaseRunning, nil
	}); err != nil {
		return 0, fmt.Errorf("%w (last: %s)", err, last)
	}
	d := time.Since(t)
	if err := env.Client.Delete(ctx, sbr); err != nil {
		return 0, err
	}
	err := pollEvery(20*time.Millisecond, 3*time.Minute, name+" gone", func() (bool, error) {
		var pods corev1.PodList
		err := env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{jobspec.LabelSandbox: name})
		return err == nil && len(pods.Items) == 0, err
	})
	return d, err
}

// pollEvery waits until cond holds, checking every interval, for at most
// limit.
func pollEvery(interval, limit time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, limit)
		}
		time.Sleep(interval)
	}
}

// startBackend runs fleetlift's controller for ns with the backend
// backend and workers workers until ctx ends.
func startBackend(ctx context.Context, env *kubetest.Env, ns string, policy controller.Policy, workers int, backend func(ctrl.Manager) controller.Backend) error {
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		// One process runs one controller after another (runWarmPool).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if _, err := controller.Setup(mgr, controller.Options{
		Policy:     policy,
		Backend:    backend(mgr),
		Registerer: prometheus.NewRegistry(),
		Workers:    workers,
	}); err != nil {
		return err
	}
	go mgr.Start(ctx)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return fmt.Errorf("the controller's cache did not sync")
	}
	return nil
}
