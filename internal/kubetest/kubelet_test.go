package kubetest_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// The kubelet runs a sandbox Job's pod (admitted under the restricted
// Pod Security Standard) as the pod says, serves exec in its containers,
// and takes the pod away with the Job.
func TestKubeletRunsASandbox(t *testing.T) {
	env := cp.Env(t)
	ctx := context.Background()
	ns := env.Namespace(t, "kubelet", kubetest.RestrictedLabels)
	agent, err := kubetest.Agent()
	if err != nil {
		t.Fatal(err)
	}
	k := &kubetest.Kubelet{Client: env.Client, Namespace: ns, Root: t.TempDir(), Agent: agent, AgentImage: jobspec.DefaultAgentImage}
	if err := k.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Stop()
		if err := k.Err(); err != nil {
			t.Errorf("kubelet: %v", err)
		}
	})
	env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns},
		Data:       map[string][]byte{"token": []byte("s3cret")},
	})
	job := jobspec.Config{ServeArgs: []string{"--isolation", "none"}}.Job(jobspec.Sandbox{
		Name: "sb1", Namespace: ns, ID: "sb1", TaskID: "t1", Image: "fleetlift/sandbox:dev",
		Env:         map[string]string{"DECLARED": "yes"},
		Credentials: []v1alpha1.Credential{{Name: "creds", EnvVar: "TOKEN", SecretKey: "token"}},
	})
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatalf("create job: %v", err)
	}
	var pod corev1.Pod
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pods corev1.PodList
		env.Client.List(ctx, &pods, client.InNamespace(ns))
		if len(pods.Items) == 1 {
			pod = pods.Items[0]
			if o := jobspec.Classify(nil, &pod); o.Phase == v1alpha1.PhaseRunning {
				break
			} else if o.Phase == v1alpha1.PhaseFailed {
				t.Fatalf("the pod failed: %+v", o)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running pod: %+v, kubelet: %v", pod.Status, k.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	key := types.NamespacedName{Namespace: ns, Name: pod.Name}
	run := func(argv ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code, err := k.Exec(ctx, key, jobspec.ContainerExec, jobspec.ExecArgv("/workspace", map[string]string{"DECLARED": "yes"}, "", 0, argv), &out, &errb)
		if err != nil {
			t.Fatalf("exec %q: %v", argv, err)
		}
		return code, out.String(), errb.String()
	}
	if code, out, errOut := run("sh", "-c", "pwd; id -u; id -g; touch f && ls -ld /workspace"); code != 0 || !strings.HasPrefix(out, "/workspace\n1000\n1000\n") {
		t.Errorf("exec = %d, %q, %q; want /workspace as uid and gid 1000", code, out, errOut)
	}
	if _, out, _ := run("env"); strings.Contains(out, "s3cret") || !strings.Contains(out, "DECLARED=yes") {
		t.Errorf("exec's environment: %q; want DECLARED and no credential", out)
	}
	if _, out, _ := run("sh", "-c", "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"); strings.Contains(out, "s3cret") {
		t.Error("the exec container sees the agent's credential")
	}
	if code, _, _ := run("sh", "-c", "touch /usr/x || touch /x"); code == 0 {
		t.Error("the exec container's root file system is writable")
	}
	// In the agent's own container, as its user (the work the agent runs
	// unjailed, with --isolation none), its environment is out of reach.
	var out, errb bytes.Buffer
	if _, err := k.Exec(ctx, key, jobspec.ContainerSandbox, []string{"sh", "-c", "id -u; cat /proc/1/environ"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "1000\n") || strings.Contains(out.String(), "s3cret") {
		t.Errorf("a process of the agent's user in its container reads its environment: %q %q", out.String(), errb.String())
	}
	procs := k.Processes(key, jobspec.ContainerSandbox)
	if len(procs) != 1 || !strings.Contains(procs[0], "fleetlift-agent serve --workspace /workspace") {
		t.Errorf("sandbox container processes = %q; want the agent alone", procs)
	}

	// Foreground deletion of the Job takes the pod.
	if err := env.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		errJob := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		errPod := env.Client.Get(ctx, key, &corev1.Pod{})
		if apierrors.IsNotFound(errJob) && apierrors.IsNotFound(errPod) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting the Job: job %v, pod %v", errJob, errPod)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if procs := k.Processes(key, jobspec.ContainerSandbox); len(procs) != 0 {
		t.Errorf("processes left: %q", procs)
	}
}
