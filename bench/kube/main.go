// Command kube measures what the SandboxRequest controller adds to making
// a sandbox's Job, on the envtest control plane (bin/envtest: etcd and
// kube-apiserver, RBAC on), with the controller running in this process:
//
//   - create → Job: from just before the worker's SandboxRequest create
//     to the moment a watch on Jobs sees the controller's Job;
//   - create → status: to the moment a watch on SandboxRequests sees the
//     status the controller wrote for it (Provisioning, with jobName);
//
// against, in the same run, a plain client-go create of the same Job
// (what the kubernetes-jobs provider does), measured both to the return
// of the call and to the watch event. Requests go one at a time, as
// latencies; two untimed ones warm up each path. There is no kubelet, so
// nothing runs: this is the control-plane cost only.
//
// It prints p50, p90 and max, and the ratios of the p50s, and asserts no
// time. With -node it runs on a real node instead (see runNode): to the
// sandbox's pod running; with -warm-pool too, the agent-sandbox backend's
// claims on a warm pool there (see runWarmPool).
//
//	make bench-kube            # go run ./bench/kube -n 100
//	make bench-kube-node       # go run ./bench/kube -node -n 20
//	make bench-kube-warm-pool  # go run ./bench/kube -node -warm-pool -n 20
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
)

func main() {
	n := flag.Int("n", 100, "requests per path")
	onNode := flag.Bool("node", false, "on a real node (as root, with containerd, bin/node and the images): to the sandbox's pod running")
	warmPool := flag.Bool("warm-pool", false, "with -node: the agent-sandbox backend's warm-pool claims, against the Jobs backend (bin/node/agent-sandbox-controller)")
	flag.Parse()
	run := run
	switch {
	case *onNode && *warmPool:
		run = runWarmPool
	case *onNode:
		run = runNode
	case *warmPool:
		fmt.Fprintln(os.Stderr, "bench/kube: -warm-pool needs -node")
		os.Exit(2)
	}
	if err := run(*n, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench/kube:", err)
		os.Exit(1)
	}
}

// seen records when a watch first saw each name.
type seen struct {
	mu    sync.Mutex
	at    map[string]time.Time
	ready map[string]chan struct{}
}

func newSeen() *seen { return &seen{at: map[string]time.Time{}, ready: map[string]chan struct{}{}} }

func (s *seen) wait(name string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready[name] == nil {
		s.ready[name] = make(chan struct{})
	}
	return s.ready[name]
}

func (s *seen) mark(name string, t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[name]; ok {
		return
	}
	s.at[name] = t
	if s.ready[name] == nil {
		s.ready[name] = make(chan struct{})
	}
	close(s.ready[name])
}

func (s *seen) when(name string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at[name]
}

func run(n int, out io.Writer) error {
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	env, err := kubetest.Start(kubetest.Options{})
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "bench"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: kubetest.RestrictedLabels}}); err != nil {
		return err
	}
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-credentials", Namespace: ns},
		Data: map[string][]byte{"token": []byte("t")}}); err != nil {
		return err
	}

	if err := startController(ctx, env, ns, controller.Policy{Images: []string{"fleetlift/sandbox:*"}, Secrets: []string{"github-credentials"}},
		jobspec.Config{}, 8); err != nil {
		return err
	}

	// Watches that time what the worker would see.
	cs := kubernetes.NewForConfigOrDie(env.Config)
	jobs, statuses := newSeen(), newSeen()
	jw, err := cs.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer jw.Stop()
	go func() {
		for ev := range jw.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				jobs.mark(j.Labels[jobspec.LabelSandbox], time.Now())
			}
		}
	}()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	sw, err := wc.Watch(ctx, &v1alpha1.SandboxRequestList{}, client.InNamespace(ns))
	if err != nil {
		return err
	}
	defer sw.Stop()
	go func() {
		for ev := range sw.ResultChan() {
			if s, ok := ev.Object.(*v1alpha1.SandboxRequest); ok && s.Status.Phase == v1alpha1.PhaseProvisioning && s.Status.JobName != "" {
				statuses.mark(s.Name, time.Now())
			}
		}
	}()
	wait := func(ch <-chan struct{}) error {
		select {
		case <-ch:
			return nil
		case <-time.After(time.Minute):
			return fmt.Errorf("nothing seen within a minute")
		}
	}

	var toJob, toStatus, plainCall, plainSeen []time.Duration
	for i := -2; i < n; i++ {
		// Through the controller.
		name := fmt.Sprintf("sbr-%03d", i+2)
		sbr := &v1alpha1.SandboxRequest{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			// No FLEETLIFT_FORGE_URL in its env: the controller refuses
			// a request that names the forge (it is the controller's).
			Spec: v1alpha1.SandboxRequestSpec{TaskID: name, Image: "fleetlift/sandbox:dev",
				Credentials: []v1alpha1.Credential{{Name: "github-credentials", EnvVar: "FLEETLIFT_FORGE_TOKEN", SecretKey: "token"}}},
		}
		jobSeen, statusSeen := jobs.wait(name), statuses.wait(name)
		t0 := time.Now()
		if err := env.Client.Create(ctx, sbr); err != nil {
			return err
		}
		if err := wait(jobSeen); err != nil {
			var cur v1alpha1.SandboxRequest
			_ = env.Client.Get(ctx, client.ObjectKeyFromObject(sbr), &cur)
			return fmt.Errorf("%s: Job: %w (the request: %s: %s)", name, err, cur.Status.Phase, cur.Status.Message)
		}
		if err := wait(statusSeen); err != nil {
			return fmt.Errorf("%s: status: %w", name, err)
		}
		// The same Job, made directly.
		plain := "job-" + name
		job := jobspec.Config{}.Job(jobspec.Sandbox{Name: plain, Namespace: ns, ID: plain, TaskID: plain, Image: "fleetlift/sandbox:dev",
			Env: sbr.Spec.Env, Credentials: sbr.Spec.Credentials})
		plainSeenCh := jobs.wait(plain)
		t1 := time.Now()
		if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return err
		}
		called := time.Since(t1)
		if err := wait(plainSeenCh); err != nil {
			return fmt.Errorf("%s: %w", plain, err)
		}
		if i < 0 {
			continue
		}
		toJob = append(toJob, jobs.when(name).Sub(t0))
		toStatus = append(toStatus, statuses.when(name).Sub(t0))
		plainCall = append(plainCall, called)
		plainSeen = append(plainSeen, jobs.when(plain).Sub(t1))
	}

	fmt.Fprintf(out, "bench/kube: %d requests one at a time, envtest (kube-apiserver v1.37.2, etcd v3.7.0), controller in process\n\n", n)
	fmt.Fprintf(out, "%-44s %9s %9s %9s\n", "", "p50", "p90", "max")
	rows := []struct {
		name string
		d    []time.Duration
	}{
		{"client-go Job create (call returns)", plainCall},
		{"client-go Job create -> Job watched", plainSeen},
		{"SandboxRequest create -> Job watched", toJob},
		{"SandboxRequest create -> status watched", toStatus},
	}
	for _, r := range rows {
		fmt.Fprintf(out, "%-44s %9s %9s %9s\n", r.name, ms(pct(r.d, 50)), ms(pct(r.d, 90)), ms(pct(r.d, 100)))
	}
	fmt.Fprintln(out)
	base := pct(plainSeen, 50)
	fmt.Fprintf(out, "ratios of p50s to client-go Job create -> Job watched (%s):\n", ms(base))
	fmt.Fprintf(out, "  SandboxRequest -> Job     %.1fx\n", float64(pct(toJob, 50))/float64(base))
	fmt.Fprintf(out, "  SandboxRequest -> status  %.1fx\n", float64(pct(toStatus, 50))/float64(base))
	fmt.Fprintf(out, "  controller's own share of create -> status, p50: %s\n", ms(pct(toStatus, 50)-base))
	return nil
}

// startController runs the SandboxRequest controller in this process
// until ctx is done, as fleetlift-controller runs it, on ns alone, with
// the Jobs backend making pods as pod says.
func startController(ctx context.Context, env *kubetest.Env, ns string, policy controller.Policy, pod jobspec.Config, workers int) error {
	return startBackend(ctx, env, ns, policy, workers, func(mgr ctrl.Manager) controller.Backend {
		return &controller.Jobs{Client: mgr.GetClient(), Live: mgr.GetAPIReader(), Pod: pod}
	})
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(min(i, len(s))-1, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }
