package jobspec

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
)

// Outcome is what a sandbox's pod (and Job) say about it.
type Outcome struct {
	// Phase is Provisioning, Running, Succeeded or Failed.
	Phase v1alpha1.Phase
	// Reason is one of v1alpha1's Reason* constants.
	Reason  string
	Message string
	// ExitCode is the agent's, once it exited.
	ExitCode *int32
	// StartedAt is when the agent's container started running.
	StartedAt *metav1.Time
	// ExecReady says the exec container runs: commands can run in the
	// sandbox, the agent's files can be read, even after the agent exited.
	ExecReady bool
}

// Classify reads the state of a sandbox from its Job (nil for the
// agent-sandbox backend) and its pod (nil while there is none), with seed
// 004's failure classification: OOMKilled, DeadlineExceeded (the Job's or
// the pod's deadline), ImagePullFailed, ApplicationError (the agent exited
// with another status), PodFailed (the pod could not start, or failed
// without a container's word), PodLost (evicted or deleted under a
// running sandbox).
func Classify(job *batchv1.Job, pod *corev1.Pod) Outcome {
	if job != nil {
		for _, c := range job.Status.Conditions {
			// The Job controller says FailureTarget first, while it
			// deletes the pod, and Failed once the pod is gone: the
			// pod being deleted meanwhile is the deadline's doing.
			if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
				return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonDeadlineExceeded, Message: "the sandbox ran past its deadline: " + c.Message}
			}
		}
	}
	if pod == nil {
		if job != nil {
			for _, c := range job.Status.Conditions {
				if (c.Type == batchv1.JobFailed || c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
					return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodFailed, Message: fmt.Sprintf("the Job failed (%s): %s", c.Reason, c.Message)}
				}
			}
		}
		return Outcome{Phase: v1alpha1.PhaseProvisioning, Reason: v1alpha1.ReasonProvisioning, Message: "waiting for the pod"}
	}
	if pod.Status.Reason == "DeadlineExceeded" {
		return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonDeadlineExceeded, Message: "the pod ran past its deadline: " + pod.Status.Message}
	}
	if pod.Status.Reason == "Evicted" {
		return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodLost, Message: "the pod was evicted: " + pod.Status.Message}
	}
	if pod.DeletionTimestamp != nil && job != nil && !decided(job) {
		// The Job controller deletes a pod past the Job's deadline as
		// it says so, and the Job and the pod are read apart: a pod
		// being deleted (or killed by it) under a Job that has not
		// said why is not an outcome yet.
		return Outcome{Phase: v1alpha1.PhaseRunning, Reason: v1alpha1.ReasonRunning, Message: "the pod is being deleted: waiting for the Job to say why"}
	}
	sandbox := containerStatus(pod.Status.ContainerStatuses, ContainerSandbox)
	exec := containerStatus(pod.Status.ContainerStatuses, ContainerExec)
	execReady := pod.DeletionTimestamp == nil && exec != nil && exec.State.Running != nil
	if sandbox != nil && sandbox.State.Terminated != nil {
		o := terminated(sandbox.State.Terminated)
		o.ExecReady = execReady
		return o
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull":
				return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonImagePullFailed, Message: fmt.Sprintf("container %s cannot pull %s: %s", cs.Name, cs.Image, w.Message)}
			case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
				return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodFailed, Message: fmt.Sprintf("container %s cannot start (%s): %s", cs.Name, w.Reason, w.Message)}
			}
		}
	}
	if install := containerStatus(pod.Status.InitContainerStatuses, ContainerInstall); install != nil {
		if t := install.State.Terminated; t != nil && t.ExitCode != 0 {
			return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodFailed, Message: fmt.Sprintf("the agent could not be installed (exit status %d, %s): %s", t.ExitCode, t.Reason, t.Message)}
		}
	}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodFailed, Message: fmt.Sprintf("the pod failed (%s): %s", pod.Status.Reason, pod.Status.Message)}
	case corev1.PodSucceeded:
		// Succeeded without a terminated sandbox status: take the
		// pod's word.
		return Outcome{Phase: v1alpha1.PhaseSucceeded, Reason: v1alpha1.ReasonSucceeded, Message: "the agent finished"}
	}
	if pod.DeletionTimestamp != nil {
		return Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodLost, Message: "the pod is being deleted"}
	}
	if pod.Status.Phase == corev1.PodRunning && sandbox != nil && sandbox.State.Running != nil && execReady {
		started := sandbox.State.Running.StartedAt
		return Outcome{Phase: v1alpha1.PhaseRunning, Reason: v1alpha1.ReasonRunning, Message: "the agent runs", StartedAt: &started, ExecReady: true}
	}
	return Outcome{Phase: v1alpha1.PhaseProvisioning, Reason: v1alpha1.ReasonProvisioning, Message: waiting(pod)}
}

// waiting says what a pod not yet running its agent waits for: the
// scheduler's word when it has not placed the pod (no node has room, none
// matches), else the first container that waits with a reason, so that a
// sandbox that never starts says why.
func waiting(pod *corev1.Pod) string {
	msg := fmt.Sprintf("the pod is %s", pod.Status.Phase)
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf("%s, not scheduled (%s): %s", msg, c.Reason, c.Message)
		}
	}
	for _, cs := range append(append([]corev1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			msg = fmt.Sprintf("%s, container %s %s", msg, cs.Name, w.Reason)
			if w.Message != "" {
				msg += ": " + w.Message
			}
			return msg
		}
	}
	return msg
}

// decided reports whether the Job controller has said how job ends:
// failed, about to fail, or complete.
func decided(job *batchv1.Job) bool {
	for _, c := range job.Status.Conditions {
		switch c.Type {
		case batchv1.JobFailed, batchv1.JobFailureTarget, batchv1.JobComplete, batchv1.JobSuccessCriteriaMet:
			if c.Status == corev1.ConditionTrue {
				return true
			}
		}
	}
	return false
}

func terminated(t *corev1.ContainerStateTerminated) Outcome {
	code := t.ExitCode
	o := Outcome{ExitCode: &code}
	switch {
	case t.ExitCode == 0:
		o.Phase, o.Reason, o.Message = v1alpha1.PhaseSucceeded, v1alpha1.ReasonSucceeded, "the agent finished"
	case t.Reason == "OOMKilled":
		o.Phase, o.Reason, o.Message = v1alpha1.PhaseFailed, v1alpha1.ReasonOOMKilled, fmt.Sprintf("the sandbox ran out of memory (exit status %d)", t.ExitCode)
	case t.Reason == "DeadlineExceeded":
		o.Phase, o.Reason, o.Message = v1alpha1.PhaseFailed, v1alpha1.ReasonDeadlineExceeded, "the sandbox ran past its deadline"
	default:
		o.Phase, o.Reason = v1alpha1.PhaseFailed, v1alpha1.ReasonApplicationError
		o.Message = fmt.Sprintf("the agent exited with status %d", t.ExitCode)
		if t.ExitCode == 137 {
			o.Message += " (killed by SIGKILL, but not reported out of memory)"
		}
		if t.Message != "" {
			o.Message += ": " + t.Message
		}
	}
	return o
}

func containerStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// AdmissionRefusal is the message of the newest of events (a Job's
// FailedCreate events) that says the cluster's admission refused its pod
// for good: Pod Security, which the pod's spec and its namespace decide,
// neither of which changes while the Job waits. Refusals that can pass
// later (a quota, a webhook that was down) are not: "" then, and the Job
// controller keeps trying. Events of another Job of the same name (uid)
// are not this one's.
func AdmissionRefusal(uid types.UID, events []corev1.Event) string {
	var newest *corev1.Event
	for i := range events {
		e := &events[i]
		if e.Reason != "FailedCreate" || e.InvolvedObject.UID != uid || !strings.Contains(e.Message, "violates PodSecurity") {
			continue
		}
		if newest == nil || eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	if newest == nil {
		return ""
	}
	return newest.Message
}

// eventTime is when e last happened.
func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
