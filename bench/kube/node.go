package main

import (
	"context"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetlift/fleetlift/internal/controller"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/kubetest/node"
)

// runNode measures, on a real node (package node: kubelet, containerd,
// kube-controller-manager and kube-scheduler against envtest), what the
// worker waits for: a SandboxRequest created to the controller's status
// Running (the agent's pod runs, its exec container too), against the
// same Job created with client-go to its pod's two containers running.
// Each sandbox is deleted before the next, so that one node holds them.
func runNode(n int, out io.Writer) error {
	log.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	images := []string{"fleetlift/sandbox:dev", jobspec.DefaultAgentImage}
	start := time.Now()
	nd, err := node.Start(node.Options{Images: images})
	if err != nil {
		return err
	}
	defer nd.Stop()
	ready := time.Since(start)
	env := nd.Env
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := "bench"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: kubetest.RestrictedLabels}}); err != nil {
		return err
	}
	// The sandboxes' service account, which has no binding (as
	// deploy/base/kubernetes makes it).
	if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: jobspec.DefaultServiceAccount, Namespace: ns},
		AutomountServiceAccountToken: new(bool)}); err != nil {
		return err
	}
	pod := jobspec.Config{ImagePullPolicy: corev1.PullNever}
	if err := startController(ctx, env, ns, controller.Policy{Images: []string{"fleetlift/sandbox:*"}}, pod, 1); err != nil {
		return err
	}
	cs := kubernetes.NewForConfigOrDie(env.Config)

	// poll waits until cond holds, checking every 20 ms, for two minutes.
	poll := func(what string, cond func() (bool, error)) error {
		return pollEvery(20*time.Millisecond, 2*time.Minute, what, cond)
	}
	running := func(job string) func() (bool, error) {
		return func() (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
			if err != nil || len(pods.Items) == 0 {
				return false, err
			}
			up := 0
			for _, s := range pods.Items[0].Status.ContainerStatuses {
				if s.State.Running != nil && (s.Name == jobspec.ContainerSandbox || s.Name == jobspec.ContainerExec) {
					up++
				}
				if t := s.State.Terminated; t != nil {
					return false, fmt.Errorf("pod of %s: container %s exited %d (%s)", job, s.Name, t.ExitCode, t.Reason)
				}
			}
			return up == 2, nil
		}
	}
	gone := func(sel string) func() (bool, error) {
		return func() (bool, error) {
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			return err == nil && len(pods.Items) == 0, err
		}
	}
	background := metav1.DeletePropagationBackground

	var viaRequest, plain []time.Duration
	for i := -1; i < n; i++ {
		name := fmt.Sprintf("sbr-%03d", i+1)
		d0, err := requestRunning(ctx, env, ns, name, "fleetlift/sandbox:dev", 20*time.Millisecond)
		if err != nil {
			return err
		}

		job := pod.Job(jobspec.Sandbox{Name: "job-" + name, Namespace: ns, ID: "job-" + name, TaskID: name, Image: "fleetlift/sandbox:dev"})
		t1 := time.Now()
		if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return err
		}
		if err := poll(job.Name+" running", running(job.Name)); err != nil {
			return err
		}
		d1 := time.Since(t1)
		if err := cs.BatchV1().Jobs(ns).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
			return err
		}
		if err := poll(job.Name+" gone", gone("job-name="+job.Name)); err != nil {
			return err
		}
		if i >= 0 {
			viaRequest, plain = append(viaRequest, d0), append(plain, d1)
		}
	}

	fmt.Fprintf(out, "bench/kube -node: %d sandboxes one at a time on a real node (kubelet v1.37.2, containerd, envtest control plane; node ready in %s), controller in process\n\n",
		n, ready.Round(time.Second))
	fmt.Fprintf(out, "%-52s %9s %9s %9s\n", "", "p50", "p90", "max")
	for _, r := range []struct {
		name string
		d    []time.Duration
	}{
		{"client-go Job create -> its pod's containers run", plain},
		{"SandboxRequest create -> status Running", viaRequest},
	} {
		fmt.Fprintf(out, "%-52s %9s %9s %9s\n", r.name, ms(pct(r.d, 50)), ms(pct(r.d, 90)), ms(pct(r.d, 100)))
	}
	fmt.Fprintf(out, "\nratio of p50s: SandboxRequest / plain Job %.2fx (goal <= 1.5x)\n", float64(pct(viaRequest, 50))/float64(pct(plain, 50)))
	return nil
}
