package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// The Job made for a request is seed 001's, as the golden file shows:
// owned by the request, no retries, the request's TTL, labels, the
// sandbox service account without a token, restricted security, the
// agent installed by an init container, credentials by reference.
func TestJobGolden(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	mem := resource.MustParse("2Gi")
	sbr := f.request("golden", func(s *v1alpha1.SandboxRequest) {
		s.Spec.RuntimeClassName = "gvisor"
		s.Spec.NodeSelector = map[string]string{"workload-type": "sandbox"}
		s.Spec.Resources.Limits.Memory = &mem
		s.Spec.Credentials = append(s.Spec.Credentials, v1alpha1.Credential{Name: "claude-credentials", EnvVar: "ANTHROPIC_API_KEY", SecretKey: "api-key"})
	})
	got := f.phase(sbr.Name, v1alpha1.PhaseProvisioning)
	job := f.job(got)

	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.UID != got.UID || ref.Kind != "SandboxRequest" || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Errorf("the Job's controller = %+v; want the request %s", ref, got.UID)
	}
	// Normalize what differs between runs.
	job.ObjectMeta = metav1.ObjectMeta{Name: "golden-UID", Namespace: "NAMESPACE", Labels: job.Labels, OwnerReferences: job.OwnerReferences}
	job.OwnerReferences[0].UID = "UID"
	job.Status = batchv1.JobStatus{}
	delete(job.Spec.Template.Labels, batchv1.ControllerUidLabel)
	delete(job.Spec.Template.Labels, "controller-uid")
	job.Spec.Selector = nil
	b, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(f.ns), []byte("NAMESPACE"))
	b = bytes.ReplaceAll(b, []byte(got.Status.JobName), []byte("golden-UID"))
	golden := filepath.Join("testdata", "job.golden.yaml")
	if *update {
		os.MkdirAll("testdata", 0o755)
		os.WriteFile(golden, b, 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(b, want) {
		t.Errorf("the Job differs from %s (go test -update rewrites it):\n%s", golden, b)
	}
	f.waitEvent(sbr.Name, "JobCreated")
}

func TestPolicyRefusals(t *testing.T) {
	policy := defaultPolicy()
	policy.RuntimeClass = ""
	f := newFixture(t, policy)
	big, many := resource.MustParse("16Gi"), resource.MustParse("8")
	for _, c := range []struct {
		name, rule, want string
		mutate           func(*v1alpha1.SandboxRequest)
	}{
		{"image", "image", "image evil.example.com/miner:latest is not allowed", func(s *v1alpha1.SandboxRequest) { s.Spec.Image = "evil.example.com/miner:latest" }},
		{"memory", "memory", "memory limit 16Gi exceeds the maximum 8Gi", func(s *v1alpha1.SandboxRequest) { s.Spec.Resources.Limits.Memory = &big }},
		{"cpu", "cpu", "cpu request 8 exceeds the maximum 4", func(s *v1alpha1.SandboxRequest) {
			s.Spec.Resources.Limits.CPU, s.Spec.Resources.Requests.CPU = &many, &many
		}},
		{"secret", "secret", "names Secret fleetlift-controller-token, which requests may not use (the controller's --allowed-secret; allowed: claude-credentials, github-credentials)", func(s *v1alpha1.SandboxRequest) {
			s.Spec.Credentials[0].Name = "fleetlift-controller-token"
		}},
		{"env", "env", "env may not set AGENT_USER", func(s *v1alpha1.SandboxRequest) { s.Spec.Env["AGENT_USER"] = "root" }},
		{"env clash", "env", "env sets FLEETLIFT_GIT_TOKEN, which a credential sets", func(s *v1alpha1.SandboxRequest) { s.Spec.Env["FLEETLIFT_GIT_TOKEN"] = "x" }},
		{"env steers the agent", "env", "env may not set GIT_SSH_COMMAND", func(s *v1alpha1.SandboxRequest) { s.Spec.Env["GIT_SSH_COMMAND"] = "ssh -o ProxyCommand=evil" }},
		{"node selector", "node-selector", "nodeSelector may not name node label node-role.kubernetes.io/control-plane", func(s *v1alpha1.SandboxRequest) {
			s.Spec.NodeSelector = map[string]string{"node-role.kubernetes.io/control-plane": ""}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := name("refused")
			f.request(n, c.mutate)
			got := f.phase(n, v1alpha1.PhaseFailed)
			stalled := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
			ready := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			if stalled == nil || stalled.Status != metav1.ConditionTrue || stalled.Reason != v1alpha1.ReasonPolicyRefused ||
				ready == nil || ready.Status != metav1.ConditionFalse {
				t.Errorf("conditions %+v; want Stalled True and Ready False, reason PolicyRefused", got.Status.Conditions)
			}
			if !strings.Contains(got.Status.Message, c.want) || got.Status.CompletionTime == nil {
				t.Errorf("message %q, completion %v; want it to say %q", got.Status.Message, got.Status.CompletionTime, c.want)
			}
			if got.Status.JobName != "" {
				t.Errorf("a refused request has the Job %s", got.Status.JobName)
			}
			var jobs batchv1.JobList
			f.c.List(context.Background(), &jobs, client.InNamespace(f.ns), client.MatchingLabels{jobspec.LabelSandbox: n})
			if len(jobs.Items) != 0 {
				t.Errorf("%d Jobs made for a refused request", len(jobs.Items))
			}
			f.waitEvent(n, "Failed")
			if v := counter(t, f, "fleetlift_sandbox_policy_refusals_total", c.rule); v < 1 {
				t.Errorf("refusals{rule=%s} = %v", c.rule, v)
			}
		})
	}
	// A required runtime class.
	policy.RuntimeClass = "gvisor"
	g := newFixture(t, policy)
	g.request("no-gvisor")
	if got := g.phase("no-gvisor", v1alpha1.PhaseFailed); !strings.Contains(got.Status.Message, `runtime class "gvisor" is required`) {
		t.Errorf("message %q; want the runtime class required", got.Status.Message)
	}
	g.request("gvisor", func(s *v1alpha1.SandboxRequest) { s.Spec.RuntimeClassName = "gvisor" })
	g.phase("gvisor", v1alpha1.PhaseProvisioning)
}

// A credential whose Secret or key is missing fails the request before
// a pod would wait for it.
func TestCredentialMissing(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	f.request("no-key", func(s *v1alpha1.SandboxRequest) { s.Spec.Credentials[0].SecretKey = "nope" })
	got := f.phase("no-key", v1alpha1.PhaseFailed)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Reason != v1alpha1.ReasonCredentialMissing || !strings.Contains(c.Message, "has no key nope") {
		t.Errorf("Stalled = %+v; want CredentialMissing, naming the key", c)
	}
	if err := f.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "claude-credentials", Namespace: f.ns}}); err != nil {
		t.Fatal(err)
	}
	f.request("no-secret", func(s *v1alpha1.SandboxRequest) {
		s.Spec.Credentials = append(s.Spec.Credentials, v1alpha1.Credential{Name: "claude-credentials", EnvVar: "ANTHROPIC_API_KEY", SecretKey: "api-key"})
	})
	if got := f.phase("no-secret", v1alpha1.PhaseFailed); !strings.Contains(got.Status.Message, "Secret claude-credentials does not exist") || got.Status.JobName != "" {
		t.Errorf("message %q, Job %q; want the missing Secret named and no Job", got.Status.Message, got.Status.JobName)
	}
}

func counter(t *testing.T, f *fixture, metric, label string) float64 {
	t.Helper()
	families, err := f.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.Metric {
			if label == "" || slices.ContainsFunc(m.Label, func(l *dto.LabelPair) bool { return l.GetValue() == label }) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

// The pod's status, which the test writes as a kubelet would, drives the
// phases; every status names the generation it describes.
func TestTransitions(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	sbr := f.request("life")
	got := f.phase(sbr.Name, v1alpha1.PhaseProvisioning)
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonProvisioning {
		t.Errorf("Provisioning: Ready = %+v; want False, Provisioning", c)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReconciling); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Provisioning: Reconciling = %+v; want True", c)
	}
	pod := f.pod(sbr.Name)
	f.setPod(pod, corev1.PodPending, []corev1.ContainerStatus{running(jobspec.ContainerInstall)}, status(jobspec.ContainerSandbox, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}))
	f.wait(sbr.Name, "naming its pod", func(s *v1alpha1.SandboxRequest) bool { return s.Status.PodName == pod.Name })
	if got := f.get(sbr.Name); got.Status.Phase != v1alpha1.PhaseProvisioning {
		t.Errorf("an initializing pod: phase %s; want Provisioning", got.Status.Phase)
	}
	f.running(pod)
	got = f.phase(sbr.Name, v1alpha1.PhaseRunning)
	if got.Status.StartTime == nil || got.Status.PodName != pod.Name {
		t.Errorf("Running: start %v, pod %q; want a start time and %s", got.Status.StartTime, got.Status.PodName, pod.Name)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Running: Ready = %+v; want True", c)
	}
	if apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReconciling) != nil {
		t.Error("Running: still Reconciling")
	}
	f.waitEvent(sbr.Name, "PodRunning")

	// A spec change (an exec request) is a new generation, observed.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.ExecRequests = append(got.Spec.ExecRequests, v1alpha1.ExecRequest{ID: "gen", Command: []string{"true"}})
	if err := f.c.Patch(context.Background(), got, patch); err != nil {
		t.Fatal(err)
	}
	f.wait(sbr.Name, "observing its generation", func(s *v1alpha1.SandboxRequest) bool {
		c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionReady)
		return s.Generation > 1 && s.Status.ObservedGeneration == s.Generation && c != nil && c.ObservedGeneration == s.Generation
	})

	f.setPod(pod, corev1.PodSucceeded, []corev1.ContainerStatus{exited(jobspec.ContainerInstall, 0, "Completed")}, exited(jobspec.ContainerSandbox, 0, "Completed"), exited(jobspec.ContainerExec, 0, "Completed"))
	got = f.phase(sbr.Name, v1alpha1.PhaseSucceeded)
	if got.Status.ExitCode == nil || *got.Status.ExitCode != 0 || got.Status.CompletionTime == nil {
		t.Errorf("Succeeded: exit code %v, completion %v", got.Status.ExitCode, got.Status.CompletionTime)
	}
	if c := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonSucceeded {
		t.Errorf("Succeeded: Ready = %+v; want True, Succeeded", c)
	}
	f.waitEvent(sbr.Name, "Succeeded")
}

// Failures are classified from the container's status and the Job's
// conditions (seed 004).
func TestFailureClassification(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	init := []corev1.ContainerStatus{exited(jobspec.ContainerInstall, 0, "Completed")}
	for _, c := range []struct {
		name, reason string
		code         *int32
		fail         func(pod *corev1.Pod, job *batchv1.Job)
	}{
		{"oom", v1alpha1.ReasonOOMKilled, ptr(int32(137)), func(pod *corev1.Pod, _ *batchv1.Job) {
			f.setPod(pod, corev1.PodFailed, init, exited(jobspec.ContainerSandbox, 137, "OOMKilled"))
		}},
		{"exit", v1alpha1.ReasonApplicationError, ptr(int32(3)), func(pod *corev1.Pod, _ *batchv1.Job) {
			f.setPod(pod, corev1.PodFailed, init, exited(jobspec.ContainerSandbox, 3, "Error"))
		}},
		{"deadline", v1alpha1.ReasonDeadlineExceeded, nil, func(_ *corev1.Pod, job *batchv1.Job) {
			// As the Job controller reports an active deadline.
			now := metav1.Now()
			job.Status.StartTime = &now
			job.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline", LastTransitionTime: now},
			}
			if err := f.c.Status().Update(context.Background(), job); err != nil {
				t.Fatalf("write the Job's status: %v", err)
			}
			job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: "Job was active longer than specified deadline", LastTransitionTime: now})
			job.Status.Failed = 1
			if err := f.c.Status().Update(context.Background(), job); err != nil {
				t.Fatalf("write the Job's status: %v", err)
			}
		}},
		{"image pull", v1alpha1.ReasonImagePullFailed, nil, func(pod *corev1.Pod, _ *batchv1.Job) {
			f.setPod(pod, corev1.PodPending, []corev1.ContainerStatus{exited(jobspec.ContainerInstall, 0, "Completed")},
				status(jobspec.ContainerSandbox, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}),
				status(jobspec.ContainerExec, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := name("fail")
			f.request(n)
			_, pod := f.run(n)
			c.fail(pod, f.job(f.get(n)))
			got := f.phase(n, v1alpha1.PhaseFailed)
			stalled := apimeta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionStalled)
			if stalled == nil || stalled.Reason != c.reason || stalled.Status != metav1.ConditionTrue {
				t.Errorf("Stalled = %+v; want True, %s (message %q)", stalled, c.reason, got.Status.Message)
			}
			if (c.code == nil) != (got.Status.ExitCode == nil) || c.code != nil && *c.code != *got.Status.ExitCode {
				t.Errorf("exit code %v; want %v", got.Status.ExitCode, c.code)
			}
			f.waitEvent(n, "Failed")
		})
	}
}

// execRequest appends exec requests to a request, as the worker does.
func (f *fixture) execRequest(name string, reqs ...v1alpha1.ExecRequest) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sbr := f.get(name)
		patch := client.MergeFromWithOptions(sbr.DeepCopy(), client.MergeFromWithOptimisticLock{})
		sbr.Spec.ExecRequests = append(sbr.Spec.ExecRequests, reqs...)
		return f.c.Patch(context.Background(), sbr, patch)
	})
	if err != nil {
		f.t.Fatalf("append exec requests: %v", err)
	}
}

// consume removes exec requests, as the worker does once it read them.
func (f *fixture) consume(name string, ids ...string) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sbr := f.get(name)
		patch := client.MergeFromWithOptions(sbr.DeepCopy(), client.MergeFromWithOptimisticLock{})
		sbr.Spec.ExecRequests = slices.DeleteFunc(sbr.Spec.ExecRequests, func(q v1alpha1.ExecRequest) bool { return slices.Contains(ids, q.ID) })
		return f.c.Patch(context.Background(), sbr, patch)
	})
	if err != nil {
		f.t.Fatalf("remove exec requests: %v", err)
	}
}

func result(s *v1alpha1.SandboxRequest, id string) *v1alpha1.ExecResult {
	for i := range s.Status.ExecResults {
		if s.Status.ExecResults[i].ID == id {
			return &s.Status.ExecResults[i]
		}
	}
	return nil
}

func (f *fixture) result(name, id string) v1alpha1.ExecResult {
	f.t.Helper()
	got := f.wait(name, "finishing exec "+id, func(s *v1alpha1.SandboxRequest) bool {
		r := result(s, id)
		return r != nil && r.Done()
	})
	return *result(got, id)
}

func TestExecRequests(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	f.exec.set(func(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
		switch argv[0] {
		case "echo":
			io.WriteString(stdout, strings.Join(argv[1:], " "))
			io.WriteString(stderr, "to stderr")
			return 0
		case "big":
			io.WriteString(stdout, strings.Repeat("x", 3<<20))
			io.WriteString(stderr, strings.Repeat("e", 200<<10))
			return 0
		case "quotes":
			// Characters JSON escapes: the cap is on the encoding.
			io.WriteString(stdout, strings.Repeat("\"\x01", 1<<20))
			return 0
		case "fail":
			return 7
		case "block":
			<-ctx.Done()
			return 1
		}
		return 127
	})
	sbr := f.request("exec")
	// Before the pod runs, requests wait.
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "early", Command: []string{"echo", "early"}})
	f.run(sbr.Name)
	if r := f.result(sbr.Name, "early"); r.Stdout != "early" || r.Stderr != "to stderr" || r.ExitCode != 0 || r.Error != "" || r.StartedAt == nil {
		t.Errorf("early = %+v", r)
	}
	f.execRequest(sbr.Name,
		v1alpha1.ExecRequest{ID: "fail", Command: []string{"fail"}},
		v1alpha1.ExecRequest{ID: "big", Command: []string{"big"}, WorkingDir: "sub", TimeoutSeconds: 5},
	)
	if r := f.result(sbr.Name, "fail"); r.ExitCode != 7 || r.Error != "" {
		t.Errorf("fail = %+v; want exit code 7", r)
	}
	r := f.result(sbr.Name, "big")
	if !strings.HasSuffix(r.Stdout, "... [truncated]") || len(r.Stdout) > 1<<20 || !strings.HasSuffix(r.Stderr, "... [truncated]") || len(r.Stderr) > 64<<10 {
		t.Errorf("big: stdout %d bytes, stderr %d bytes; want both cut, with the marker, within 1 MiB and 64 KiB", len(r.Stdout), len(r.Stderr))
	}
	// The command ran through the shim, in the exec container, confined
	// to the workspace, with the request's variables and timeout.
	var argv []string
	for _, a := range f.exec.argvs() {
		if a[1] == jobspec.ContainerExec && slices.Contains(a, "big") {
			argv = a[2:]
		}
	}
	want := jobspec.ExecArgv("/workspace", map[string]string{"GOPROXY": "off"}, "sub", 5e9, []string{"big"})
	if !slices.Equal(argv, want) {
		t.Errorf("the exec ran %q; want %q", argv, want)
	}
	got := f.get(sbr.Name)
	if got.Status.LastExecProcessedIndex != 3 {
		t.Errorf("lastExecProcessedIndex = %d; want 3", got.Status.LastExecProcessedIndex)
	}

	// Output JSON escapes counts towards the cap.
	f.consume(sbr.Name, "early", "fail", "big")
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "quotes", Command: []string{"quotes"}})
	if r := f.result(sbr.Name, "quotes"); !strings.HasSuffix(r.Stdout, "... [truncated]") || jsonSize(r.Stdout) > 1<<20 {
		t.Errorf("quotes: %d bytes of JSON; want at most 1 MiB", jsonSize(r.Stdout))
	}

	// A withdrawn request is cancelled.
	f.consume(sbr.Name, "quotes")
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "block", Command: []string{"block"}})
	f.wait(sbr.Name, "starting block", func(s *v1alpha1.SandboxRequest) bool { return result(s, "block") != nil })
	f.consume(sbr.Name, "block")
	f.wait(sbr.Name, "cancelling block", func(s *v1alpha1.SandboxRequest) bool {
		r := result(s, "block")
		return r == nil || r.Done() && strings.Contains(r.Error, "cancelled")
	})
	if v := counter(t, f, "fleetlift_sandbox_exec_duration_seconds", ""); v < 4 {
		t.Errorf("exec duration samples = %v; want one per request", v)
	}
}

func jsonSize(s string) int {
	b, _ := yamlJSON(s)
	return len(b) - 2
}

// Results stay within their limits however many the worker leaves: the
// ones it consumed go first; the object stays small.
func TestExecRetention(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	f.exec.set(func(_ context.Context, argv []string, stdout, _ io.Writer) int {
		if argv[0] == "half" {
			io.WriteString(stdout, strings.Repeat("h", 600<<10))
		} else {
			io.WriteString(stdout, argv[0])
		}
		return 0
	})
	sbr := f.request("retain")
	f.run(sbr.Name)
	for i := range 120 {
		id := fmt.Sprint("r", i)
		f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: id, Command: []string{id}})
		f.result(sbr.Name, id)
		f.consume(sbr.Name, id)
	}
	got := f.wait(sbr.Name, "evicting", func(s *v1alpha1.SandboxRequest) bool { return len(s.Status.ExecResults) <= 100 })
	if result(got, "r119") == nil || result(got, "r0") != nil {
		t.Errorf("kept %d results, newest r119 %v, oldest r0 %v; want the newest kept and the oldest evicted", len(got.Status.ExecResults), result(got, "r119") != nil, result(got, "r0") != nil)
	}
	// Two large unconsumed results: the second is cut to fit the budget.
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "h1", Command: []string{"half"}}, v1alpha1.ExecRequest{ID: "h2", Command: []string{"half"}})
	f.result(sbr.Name, "h1")
	f.result(sbr.Name, "h2")
	got = f.get(sbr.Name)
	total := 0
	for _, r := range got.Status.ExecResults {
		total += len(r.Stdout) + len(r.Stderr)
	}
	if total > (1<<20)+(64<<10) {
		t.Errorf("results hold %d bytes of output; want at most the budget", total)
	}
	h1, h2 := result(got, "h1"), result(got, "h2")
	if !strings.HasSuffix(h1.Stdout, "... [truncated]") && !strings.HasSuffix(h2.Stdout, "... [truncated]") {
		t.Error("neither large result was cut")
	}
	b, _ := yamlJSON(got)
	if len(b) > 1536<<10 {
		t.Errorf("the request is %d bytes; etcd's limit is 1.5 MiB", len(b))
	}
}

// After the agent exits, its exec container still runs: the worker reads
// what the agent left.
func TestExecAfterTheAgent(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	sbr := f.request("after")
	_, pod := f.run(sbr.Name)
	f.setPod(pod, corev1.PodRunning, []corev1.ContainerStatus{exited(jobspec.ContainerInstall, 0, "Completed")},
		exited(jobspec.ContainerSandbox, 0, "Completed"), running(jobspec.ContainerExec))
	f.phase(sbr.Name, v1alpha1.PhaseSucceeded)
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "read", Command: []string{"cat", ".fleetlift/result.json"}})
	if r := f.result(sbr.Name, "read"); r.Error != "" || r.Stdout != "cat .fleetlift/result.json" {
		t.Errorf("read = %+v; want it run", r)
	}
}

// Exec requests to a sandbox that finished fail at once, with the reason.
func TestExecAfterTheEnd(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	sbr := f.request("ended")
	_, pod := f.run(sbr.Name)
	f.setPod(pod, corev1.PodFailed, []corev1.ContainerStatus{exited(jobspec.ContainerInstall, 0, "Completed")}, exited(jobspec.ContainerSandbox, 1, "Error"))
	f.phase(sbr.Name, v1alpha1.PhaseFailed)
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "late", Command: []string{"true"}})
	if r := f.result(sbr.Name, "late"); !strings.Contains(r.Error, "no longer running") {
		t.Errorf("late = %+v; want an error saying the sandbox ended", r)
	}
}

// A controller that restarts while a command runs cannot know its
// outcome, and says so rather than running it again.
func TestExecAcrossARestart(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	started := make(chan struct{}, 1)
	f.exec.set(func(ctx context.Context, _ []string, _, _ io.Writer) int {
		started <- struct{}{}
		<-ctx.Done()
		return 1
	})
	sbr := f.request("restart")
	f.run(sbr.Name)
	f.execRequest(sbr.Name, v1alpha1.ExecRequest{ID: "long", Command: []string{"sleep"}})
	<-started
	f.wait(sbr.Name, "recording long as running", func(s *v1alpha1.SandboxRequest) bool { r := result(s, "long"); return r != nil && !r.Done() })
	f.shutdown()
	f.exec.set(nil)
	f.start(defaultPolicy())
	if r := f.result(sbr.Name, "long"); !strings.Contains(r.Error, "outcome is unknown") {
		t.Errorf("long = %+v; want its outcome unknown", r)
	}
	runs := 0
	for _, a := range f.exec.argvs() {
		if a[len(a)-1] == "sleep" {
			runs++
		}
	}
	if runs != 1 {
		t.Errorf("the command ran %d times; want once", runs)
	}
}

// Deleting a request deletes its Job (foreground) before the request
// goes.
func TestCleanupOnDelete(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	sbr := f.request("bye")
	got, _ := f.run(sbr.Name)
	job := f.job(got)
	if err := f.c.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool {
		return apierrors.IsNotFound(f.c.Get(context.Background(), client.ObjectKeyFromObject(got), &v1alpha1.SandboxRequest{}))
	}) {
		t.Fatal("the request was never let go")
	}
	var after batchv1.Job
	err := f.c.Get(context.Background(), client.ObjectKeyFromObject(job), &after)
	// No garbage collector runs here: the Job is being deleted, its
	// dependents first.
	if err == nil && (after.DeletionTimestamp == nil || !slices.Contains(after.Finalizers, metav1.FinalizerDeleteDependents)) {
		t.Errorf("the Job %s is not being deleted in the foreground: deletion %v, finalizers %v", job.Name, after.DeletionTimestamp, after.Finalizers)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

// A finished request goes after ttlSecondsAfterFinished.
func TestTTL(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	sbr := f.request("ttl", func(s *v1alpha1.SandboxRequest) { s.Spec.TTLSecondsAfterFinished = ptr(int32(1)) })
	f.request("kept")
	for _, n := range []string{sbr.Name, "kept"} {
		_, pod := f.run(n)
		f.setPod(pod, corev1.PodSucceeded, nil, exited(jobspec.ContainerSandbox, 0, "Completed"))
		f.phase(n, v1alpha1.PhaseSucceeded)
	}
	if !eventually(func() bool {
		return apierrors.IsNotFound(f.c.Get(context.Background(), client.ObjectKeyFromObject(sbr), &v1alpha1.SandboxRequest{}))
	}) {
		t.Fatal("the request outlived its TTL")
	}
	if got := f.get("kept"); got.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("the request with the default TTL (an hour): %s", got.Status.Phase)
	}
}

func TestPhaseMetric(t *testing.T) {
	f := newFixture(t, defaultPolicy())
	f.request("m1")
	f.phase("m1", v1alpha1.PhaseProvisioning)
	// The collector counts from the manager's cache, which may see the
	// status a moment after the API server does.
	var v float64
	if !eventually(func() bool { v = counter(t, f, "fleetlift_sandboxrequests", "Provisioning"); return v == 1 }) {
		t.Errorf("fleetlift_sandboxrequests{phase=Provisioning} = %v; want 1", v)
	}
}

func ptr[T any](v T) *T { return &v }
