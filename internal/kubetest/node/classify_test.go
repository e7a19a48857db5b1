package node_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
	"github.com/fleetlift/fleetlift/internal/kubetest/node"
)

// classified runs sandbox-like Jobs (their agent's container named as a
// sandbox's is) that fail the ways a sandbox can, and reads each with
// the controller's classifier from what the real kubelet, containerd and
// the Job controller report: a memory hog is OOMKilled (or a SIGKILL not
// reported as out of memory, when containerd says so), a Job past its
// deadline DeadlineExceeded (which the Job controller first says as a
// failure target while it deletes the pod), an image the node lacks
// ImagePullFailed, a command's failure an ApplicationError.
func classified(t *testing.T, n *node.Node) {
	ctx := context.Background()
	ns := n.Env.Namespace(t, "classify", kubetest.RestrictedLabels)
	for _, c := range []struct {
		name     string
		image    string
		command  []string
		memory   string
		deadline int64
	}{
		{"oom", sandboxImage, []string{"tail", "/dev/zero"}, "32Mi", 0},
		{"deadline", sandboxImage, []string{"sleep", "600"}, "", 3},
		{"missing-image", "fleetlift/no-such-image:dev", []string{"true"}, "", 0},
		{"exit", sandboxImage, []string{"sh", "-c", "exit 4"}, "", 0},
	} {
		ctr := corev1.Container{Name: jobspec.ContainerSandbox, Image: c.image, ImagePullPolicy: corev1.PullNever, Command: c.command}
		if c.memory != "" {
			ctr.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(c.memory)}
		}
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ns},
			Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](0),
				Template:     corev1.PodTemplateSpec{Spec: restricted(ctr)},
			},
		}
		if c.deadline > 0 {
			job.Spec.ActiveDeadlineSeconds = ptr.To(c.deadline)
		}
		if err := n.Env.Client.Create(ctx, job); err != nil {
			t.Fatalf("create Job %s: %v", c.name, err)
		}
	}
	for _, name := range []string{"oom", "deadline", "missing-image", "exit"} {
		want := map[string]string{"oom": v1alpha1.ReasonOOMKilled, "deadline": v1alpha1.ReasonDeadlineExceeded,
			"missing-image": v1alpha1.ReasonImagePullFailed, "exit": v1alpha1.ReasonApplicationError}[name]
		got := waitClassified(t, n, ns, name)
		t.Logf("Job %s: %s %s: %s", name, got.Phase, got.Reason, got.Message)
		// containerd on cgroup v1 sometimes reports the kernel's
		// kill before its OOM event: exit 137 with reason Error. The
		// classifier cannot tell that from another SIGKILL and says
		// so rather than guess.
		if name == "oom" && got.Reason == v1alpha1.ReasonApplicationError && got.ExitCode != nil && *got.ExitCode == 137 &&
			strings.Contains(got.Message, "not reported out of memory") {
			continue
		}
		if got.Phase != v1alpha1.PhaseFailed || got.Reason != want {
			t.Errorf("Job %s: classified %s %s (%s); want Failed %s", name, got.Phase, got.Reason, got.Message, want)
		}
	}
}

// waitClassified classifies Job name and its pod until the outcome is
// final, for at most two minutes.
func waitClassified(t *testing.T, n *node.Node, ns, name string) jobspec.Outcome {
	t.Helper()
	ctx := context.Background()
	var last jobspec.Outcome
	waitFor(t, "final outcome of Job "+name, 2*time.Minute, func() (bool, string) {
		var job batchv1.Job
		if err := n.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &job); err != nil {
			return false, err.Error()
		}
		var pods corev1.PodList
		var pod *corev1.Pod
		if err := n.Env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"job-name": name}); err == nil && len(pods.Items) > 0 {
			pod = &pods.Items[0]
		}
		last = jobspec.Classify(&job, pod)
		return last.Phase == v1alpha1.PhaseFailed || last.Phase == v1alpha1.PhaseSucceeded,
			fmt.Sprintf("last %s %s (%s)", last.Phase, last.Reason, last.Message)
	})
	return last
}
