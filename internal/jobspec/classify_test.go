package jobspec

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
)

func running(name string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func exited(name string, code int32, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}
}

func waitingFor(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

func pod(phase corev1.PodPhase, init []corev1.ContainerStatus, main ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: main}}
}

func TestClassify(t *testing.T) {
	deadline := &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded}}}}
	sidecar := []corev1.ContainerStatus{exited(ContainerInstall, 0, "Completed")}
	deleting := pod(corev1.PodRunning, sidecar, running(ContainerSandbox), running(ContainerExec))
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, c := range []struct {
		name   string
		job    *batchv1.Job
		pod    *corev1.Pod
		phase  v1alpha1.Phase
		reason string
		code   *int32
	}{
		{"no pod yet", &batchv1.Job{}, nil, v1alpha1.PhaseProvisioning, v1alpha1.ReasonProvisioning, nil},
		{"pending", nil, pod(corev1.PodPending, nil), v1alpha1.PhaseProvisioning, v1alpha1.ReasonProvisioning, nil},
		{"initializing", nil, pod(corev1.PodPending, []corev1.ContainerStatus{running(ContainerInstall)}, waitingFor(ContainerSandbox, "PodInitializing")), v1alpha1.PhaseProvisioning, v1alpha1.ReasonProvisioning, nil},
		{"running", nil, pod(corev1.PodRunning, sidecar, running(ContainerSandbox), running(ContainerExec)), v1alpha1.PhaseRunning, v1alpha1.ReasonRunning, nil},
		{"running without the exec container", nil, pod(corev1.PodRunning, sidecar, running(ContainerSandbox), waitingFor(ContainerExec, "ContainerCreating")), v1alpha1.PhaseProvisioning, v1alpha1.ReasonProvisioning, nil},
		{"succeeded", nil, pod(corev1.PodRunning, sidecar, exited(ContainerSandbox, 0, "Completed"), running(ContainerExec)), v1alpha1.PhaseSucceeded, v1alpha1.ReasonSucceeded, ptr(int32(0))},
		{"oom", nil, pod(corev1.PodFailed, sidecar, exited(ContainerSandbox, 137, "OOMKilled")), v1alpha1.PhaseFailed, v1alpha1.ReasonOOMKilled, ptr(int32(137))},
		{"killed, not oom", nil, pod(corev1.PodFailed, sidecar, exited(ContainerSandbox, 137, "Error")), v1alpha1.PhaseFailed, v1alpha1.ReasonApplicationError, ptr(int32(137))},
		{"application error", nil, pod(corev1.PodFailed, sidecar, exited(ContainerSandbox, 2, "Error")), v1alpha1.PhaseFailed, v1alpha1.ReasonApplicationError, ptr(int32(2))},
		{"job deadline", deadline, pod(corev1.PodRunning, sidecar, running(ContainerSandbox), running(ContainerExec)), v1alpha1.PhaseFailed, v1alpha1.ReasonDeadlineExceeded, nil},
		{"job deadline, pod gone", deadline, nil, v1alpha1.PhaseFailed, v1alpha1.ReasonDeadlineExceeded, nil},
		// As a real Job controller says it first (seen on the real node):
		// a failure target while it deletes the pod.
		// Read before the Job controller's word, after its deletion.
		{"pod being deleted, the Job silent", &batchv1.Job{}, deleting, v1alpha1.PhaseRunning, v1alpha1.ReasonRunning, nil},
		{"pod being deleted, killed, the Job silent", &batchv1.Job{}, func() *corev1.Pod {
			p := pod(corev1.PodRunning, sidecar, exited(ContainerSandbox, 143, "Error"), running(ContainerExec))
			p.DeletionTimestamp = &metav1.Time{}
			return p
		}(), v1alpha1.PhaseRunning, v1alpha1.ReasonRunning, nil},
		{"job deadline, pod being deleted", &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded}}}},
			deleting, v1alpha1.PhaseFailed, v1alpha1.ReasonDeadlineExceeded, nil},
		{"pod deadline", nil, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "DeadlineExceeded"}}, v1alpha1.PhaseFailed, v1alpha1.ReasonDeadlineExceeded, nil},
		{"image pull", nil, pod(corev1.PodPending, []corev1.ContainerStatus{exited(ContainerInstall, 0, "")}, waitingFor(ContainerSandbox, "ImagePullBackOff"), waitingFor(ContainerExec, "ImagePullBackOff")), v1alpha1.PhaseFailed, v1alpha1.ReasonImagePullFailed, nil},
		{"agent image pull", nil, pod(corev1.PodPending, []corev1.ContainerStatus{waitingFor(ContainerInstall, "ErrImagePull")}), v1alpha1.PhaseFailed, v1alpha1.ReasonImagePullFailed, nil},
		{"missing secret", nil, pod(corev1.PodPending, sidecar, waitingFor(ContainerSandbox, "CreateContainerConfigError")), v1alpha1.PhaseFailed, v1alpha1.ReasonPodFailed, nil},
		{"install failed", nil, pod(corev1.PodFailed, []corev1.ContainerStatus{exited(ContainerInstall, 1, "Error")}), v1alpha1.PhaseFailed, v1alpha1.ReasonPodFailed, nil},
		{"evicted", nil, &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}}, v1alpha1.PhaseFailed, v1alpha1.ReasonPodLost, nil},
		{"deleted while running", nil, deleting, v1alpha1.PhaseFailed, v1alpha1.ReasonPodLost, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Classify(c.job, c.pod)
			if got.Phase != c.phase || got.Reason != c.reason || (c.code == nil) != (got.ExitCode == nil) || c.code != nil && *c.code != *got.ExitCode {
				t.Errorf("Classify = %+v; want phase %s, reason %s, exit code %v", got, c.phase, c.reason, c.code)
			}
			if got.Message == "" {
				t.Error("no message")
			}
			if want := c.name == "running" || c.name == "succeeded"; got.ExecReady != want {
				t.Errorf("ExecReady = %v; want %v", got.ExecReady, want)
			}
		})
	}
}

// A sandbox whose pod does not start says why: the scheduler's word, or
// the container that waits.
func TestClassifyNamesWhatAPendingPodWaitsFor(t *testing.T) {
	unschedulable := pod(corev1.PodPending, nil)
	unschedulable.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient cpu."}}
	creating := pod(corev1.PodPending, []corev1.ContainerStatus{exited(ContainerInstall, 0, "Completed")}, waitingFor(ContainerSandbox, "ContainerCreating"))
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{unschedulable, "the pod is Pending, not scheduled (Unschedulable): 0/1 nodes are available: 1 Insufficient cpu."},
		{creating, "the pod is Pending, container sandbox ContainerCreating"},
		{pod(corev1.PodPending, nil), "the pod is Pending"},
	} {
		if got := Classify(nil, c.pod); got.Phase != v1alpha1.PhaseProvisioning || got.Message != c.want {
			t.Errorf("Classify = %s %q; want %s %q", got.Phase, got.Message, v1alpha1.PhaseProvisioning, c.want)
		}
	}
}

func TestExecArgv(t *testing.T) {
	got := ExecArgv("/workspace", map[string]string{"B": "2", "A": "1"}, "sub", 1500*1000*1000, []string{"sh", "-c", "x"})
	want := []string{Agent, "exec", "--workspace", "/workspace", "--clear-env", "--hangup-on-eof", "--env", "A=1", "--env", "B=2", "--dir", "sub", "--timeout", "1500ms", "--", "sh", "-c", "x"}
	if len(got) != len(want) {
		t.Fatalf("ExecArgv = %q; want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("ExecArgv = %q; want %q", got, want)
		}
	}
}

// Only a Pod Security refusal of this Job's pod fails it, with the newest
// such event's message: a quota, which may pass, or another Job's event
// of the same name does not.
func TestAdmissionRefusal(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(1_800_000_000+int64(s), 0)) }
	ev := func(uid types.UID, reason, msg string, s int) corev1.Event {
		return corev1.Event{InvolvedObject: corev1.ObjectReference{Kind: "Job", UID: uid}, Reason: reason, Message: msg, LastTimestamp: at(s)}
	}
	const psa = `pods "sb-x" is forbidden: violates PodSecurity "restricted:latest": procMount (container "sandbox" must not set securityContext.procMount to "Unmasked")`
	for _, c := range []struct {
		name   string
		events []corev1.Event
		want   string
	}{
		{"none", nil, ""},
		{"a quota", []corev1.Event{ev("job", "FailedCreate", `pods "sb-x" is forbidden: exceeded quota: sandboxes`, 1)}, ""},
		{"another Job's", []corev1.Event{ev("old", "FailedCreate", psa, 1)}, ""},
		{"not a failure to create", []corev1.Event{ev("job", "SuccessfulCreate", psa, 1)}, ""},
		{"Pod Security", []corev1.Event{ev("job", "FailedCreate", `pods "sb-x" is forbidden: exceeded quota: sandboxes`, 5), ev("job", "FailedCreate", psa+" (older)", 1), ev("job", "FailedCreate", psa, 3)}, psa},
	} {
		if got := AdmissionRefusal("job", c.events); got != c.want {
			t.Errorf("%s: AdmissionRefusal = %q; want %q", c.name, got, c.want)
		}
	}
}
