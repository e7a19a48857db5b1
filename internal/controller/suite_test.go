package controller_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
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
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

var (
	cp     kubetest.Shared
	update = flag.Bool("update", false, "rewrite the golden files")
)

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	// agent-sandbox's CRDs, for the Claims backend.
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

// fixture is a controller running on the test control plane for one
// namespace.
type fixture struct {
	t        *testing.T
	env      *kubetest.Env
	ns       string
	c        client.Client
	exec     *scripted
	registry *prometheus.Registry
	stop     context.CancelFunc
	done     chan struct{}
	backend  func(ctrl.Manager) controller.Backend
	// log is what the controller logged, shown when a wait fails.
	log syncbuf.Buffer
}

func defaultPolicy() controller.Policy {
	mem, cpu := resource.MustParse("8Gi"), resource.MustParse("4")
	return controller.Policy{
		Images:    []string{"fleetlift/sandbox:*", "registry.example.com/tools/*"},
		MaxMemory: &mem, MaxCPU: &cpu,
		Secrets:         []string{"github-credentials", "claude-credentials"},
		GitTokenOrigins: []string{"https://git.example.com"},
		NodeSelector:    map[string]string{"fleetlift.io/sandbox-pool": "default"},
		NodeLabels:      []string{"workload-type"},
	}
}

func defaults() v1alpha1.Resources {
	mem, cpu := resource.MustParse("4Gi"), resource.MustParse("2")
	return v1alpha1.Resources{Limits: v1alpha1.ResourceList{Memory: &mem, CPU: &cpu}}
}

func newFixture(t *testing.T, policy controller.Policy) *fixture {
	t.Helper()
	return newFixtureWith(t, policy, nil)
}

// newFixtureWith runs the controller with the backend backend makes
// (nil: Jobs).
func newFixtureWith(t *testing.T, policy controller.Policy, backend func(ctrl.Manager) controller.Backend) *fixture {
	t.Helper()
	env := cp.Env(t)
	f := &fixture{t: t, env: env, c: env.Client, exec: &scripted{}, backend: backend}
	f.ns = env.Namespace(t, "ctrl", kubetest.RestrictedLabels)
	for name, key := range map[string]string{"github-credentials": "token", "claude-credentials": "api-key"} {
		if err := f.c.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
			Data:       map[string][]byte{key: []byte("secret value of " + name)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	f.start(policy)
	t.Cleanup(f.shutdown)
	return f
}

// start runs a manager and the controller.
func (f *fixture) start(policy controller.Policy) {
	f.t.Helper()
	mgr, err := ctrl.NewManager(f.env.Config, ctrl.Options{
		Scheme:                 f.env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{f.ns: {}}},
		Controller:             ctrlConfigSkipNameValidation(),
		Logger:                 zap.New(zap.WriteTo(&f.log)),
	})
	if err != nil {
		f.t.Fatalf("manager: %v", err)
	}
	f.registry = prometheus.NewRegistry()
	var backend controller.Backend = &controller.Jobs{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pod: jobspec.Config{ManagedBy: "fleetlift-controller"}}
	if f.backend != nil {
		backend = f.backend(mgr)
	}
	if _, err := controller.Setup(mgr, controller.Options{
		Policy:     policy,
		Backend:    backend,
		Executor:   f.exec,
		Defaults:   defaults(),
		Registerer: f.registry,
		Workers:    4,
	}); err != nil {
		f.t.Fatalf("setup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop, f.done = cancel, make(chan struct{})
	go func() {
		defer close(f.done)
		if err := mgr.Start(ctx); err != nil {
			f.t.Errorf("manager: %v", err)
		}
	}()
}

func (f *fixture) shutdown() {
	f.stop()
	<-f.done
}

func (f *fixture) request(name string, mutate ...func(*v1alpha1.SandboxRequest)) *v1alpha1.SandboxRequest {
	f.t.Helper()
	sbr := &v1alpha1.SandboxRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: v1alpha1.SandboxRequestSpec{
			TaskID: "task-" + name,
			Image:  "fleetlift/sandbox:dev",
			Env:    map[string]string{"GOPROXY": "off"},
			Credentials: []v1alpha1.Credential{
				{Name: "github-credentials", EnvVar: "FLEETLIFT_GIT_TOKEN", SecretKey: "token"},
			},
		},
	}
	for _, m := range mutate {
		m(sbr)
	}
	if err := f.c.Create(context.Background(), sbr); err != nil {
		f.t.Fatalf("create request %s: %v", name, err)
	}
	return sbr
}

// get reads a request.
func (f *fixture) get(name string) *v1alpha1.SandboxRequest {
	f.t.Helper()
	var sbr v1alpha1.SandboxRequest
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, &sbr); err != nil {
		f.t.Fatalf("get request %s: %v", name, err)
	}
	return &sbr
}

// wait polls until cond holds for the request, failing after a minute:
// a bound on a hang, not a timed assertion.
func (f *fixture) wait(name, what string, cond func(*v1alpha1.SandboxRequest) bool) *v1alpha1.SandboxRequest {
	f.t.Helper()
	var last *v1alpha1.SandboxRequest
	if !eventually(func() bool {
		var sbr v1alpha1.SandboxRequest
		if f.c.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: name}, &sbr) != nil {
			return false
		}
		last = &sbr
		return cond(&sbr)
	}) {
		f.t.Fatalf("request %s: never %s; last status %+v\n%s", name, what, last.Status, f.explain(name))
	}
	return last
}

// explain says what a wait that failed could not see: the request's
// pods as the API server has them, its events, and the controller's
// last log lines.
func (f *fixture) explain(name string) string {
	var b strings.Builder
	var pods corev1.PodList
	if err := f.c.List(context.Background(), &pods, client.InNamespace(f.ns)); err != nil {
		fmt.Fprintf(&b, "list pods: %v\n", err)
	}
	for _, p := range pods.Items {
		if p.Annotations[jobspec.AnnotationSandbox] != name {
			continue
		}
		fmt.Fprintf(&b, "pod %s (resource version %s): phase %s, containers %+v\n", p.Name, p.ResourceVersion, p.Status.Phase, p.Status.ContainerStatuses)
	}
	fmt.Fprintf(&b, "events: %v\n", f.events(name))
	fmt.Fprintf(&b, "the controller's last log lines:\n%s", f.log.Tail(40))
	return b.String()
}

func (f *fixture) phase(name string, p v1alpha1.Phase) *v1alpha1.SandboxRequest {
	f.t.Helper()
	return f.wait(name, "in phase "+string(p), func(s *v1alpha1.SandboxRequest) bool { return s.Status.Phase == p })
}

func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// job reads a request's Job.
func (f *fixture) job(sbr *v1alpha1.SandboxRequest) *batchv1.Job {
	f.t.Helper()
	var job batchv1.Job
	if err := f.c.Get(context.Background(), types.NamespacedName{Namespace: f.ns, Name: sbr.Status.JobName}, &job); err != nil {
		f.t.Fatalf("get Job %s: %v", sbr.Status.JobName, err)
	}
	return &job
}

// pod plays the Job controller: the pod of the request's Job, which the
// API server admits only if it passes the restricted Pod Security
// Standard.
func (f *fixture) pod(name string) *corev1.Pod {
	f.t.Helper()
	sbr := f.phase(name, v1alpha1.PhaseProvisioning)
	pod := kubetest.PodForJob(f.job(sbr))
	if err := f.c.Create(context.Background(), pod); err != nil {
		f.t.Fatalf("create the pod: %v", err)
	}
	return pod
}

// setPod plays the kubelet: it writes the pod's status.
func (f *fixture) setPod(pod *corev1.Pod, phase corev1.PodPhase, init []corev1.ContainerStatus, main ...corev1.ContainerStatus) {
	f.t.Helper()
	var cur corev1.Pod
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(pod), &cur); err != nil {
		f.t.Fatal(err)
	}
	cur.Status = corev1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: main}
	if err := f.c.Status().Update(context.Background(), &cur); err != nil {
		f.t.Fatalf("write the pod's status: %v", err)
	}
}

func status(name string, st corev1.ContainerState) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: "img", ImageID: "img", State: st}
}

func running(name string) corev1.ContainerStatus {
	return status(name, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
}

func exited(name string, code int32, reason string) corev1.ContainerStatus {
	return status(name, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}})
}

// run brings a request's pod to running.
func (f *fixture) run(name string) (*v1alpha1.SandboxRequest, *corev1.Pod) {
	f.t.Helper()
	pod := f.pod(name)
	f.running(pod)
	return f.phase(name, v1alpha1.PhaseRunning), pod
}

// running writes the status of a running sandbox pod.
func (f *fixture) running(pod *corev1.Pod) {
	f.t.Helper()
	f.setPod(pod, corev1.PodRunning, []corev1.ContainerStatus{exited(jobspec.ContainerInstall, 0, "Completed")}, running(jobspec.ContainerSandbox), running(jobspec.ContainerExec))
}

// events are the reasons of the events about a request.
func (f *fixture) events(name string) []string {
	f.t.Helper()
	var list eventsv1.EventList
	if err := f.c.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "SandboxRequest" && e.Regarding.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func (f *fixture) waitEvent(name, reason string) {
	f.t.Helper()
	if !eventually(func() bool { return slices.Contains(f.events(name), reason) }) {
		f.t.Errorf("no %s event about %s; events: %v", reason, name, f.events(name))
	}
}

// scripted is an Executor that runs the user's command (what follows the
// shim's "--") through fn, as a test says.
type scripted struct {
	mu    sync.Mutex
	fn    func(ctx context.Context, argv []string, stdout, stderr io.Writer) int
	calls [][]string
}

func (s *scripted) Exec(ctx context.Context, pod types.NamespacedName, container string, argv []string, stdout, stderr io.Writer) (int, error) {
	s.mu.Lock()
	s.calls = append(s.calls, append([]string{pod.Name, container}, argv...))
	fn := s.fn
	s.mu.Unlock()
	if container != jobspec.ContainerExec {
		return 0, nil
	}
	user := argv[slices.Index(argv, "--")+1:]
	if fn == nil {
		io.WriteString(stdout, strings.Join(user, " "))
		return 0, nil
	}
	code := fn(ctx, user, stdout, stderr)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return code, nil
}

func (s *scripted) set(fn func(ctx context.Context, argv []string, stdout, stderr io.Writer) int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn = fn
}

func (s *scripted) argvs() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func name(prefix string) string { return prefix + "-" + rand.String(5) }

// ctrlConfigSkipNameValidation lets every test run its own controller
// named sandboxrequest in one process.
func ctrlConfigSkipNameValidation() config.Controller {
	yes := true
	return config.Controller{SkipNameValidation: &yes}
}
