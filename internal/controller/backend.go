package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// Backend makes and reads what runs a request's pod.
type Backend interface {
	// Ensure makes the workload for sbr, its sandbox container given
	// resources, unless it exists, and records its name in sbr's status;
	// created says whether this call made it.
	Ensure(ctx context.Context, sbr *v1alpha1.SandboxRequest, resources v1alpha1.Resources) (created bool, err error)
	// Observe reads the workload's state. A missing workload is Failed
	// (PodLost).
	Observe(ctx context.Context, sbr *v1alpha1.SandboxRequest) (pod *corev1.Pod, o jobspec.Outcome, err error)
	// Delete deletes the workload; gone says it no longer exists or is
	// being deleted with its pods.
	Delete(ctx context.Context, sbr *v1alpha1.SandboxRequest) (gone bool, err error)
	// Watch adds what the controller must watch for the workload.
	Watch(b *builder.Builder) *builder.Builder
}

// Unservable is a request a backend cannot serve, for good: Ensure's
// error that fails the request (BackendFailed).
type Unservable struct{ Reason string }

func (u *Unservable) Error() string { return u.Reason }

// Jobs is the Backend of Jobs built by jobspec (seed 001).
type Jobs struct {
	Client client.Client
	// Live reads past the cache: a Job the cache does not have yet is
	// not a deleted one.
	Live client.Reader
	// Pod is the operator's part of every pod.
	Pod jobspec.Config
	// DeadlineSeconds is every Job's activeDeadlineSeconds; zero means
	// none.
	DeadlineSeconds int64
}

// JobName is the Job of sbr: its name and the first eight characters of
// its uid, so that a request deleted and made again under the same name
// never meets the old Job while that is still going.
func JobName(sbr *v1alpha1.SandboxRequest) string {
	name := sbr.Name
	if len(name) > 54 {
		name = strings.TrimRight(name[:54], "-.")
	}
	uid := strings.ReplaceAll(string(sbr.UID), "-", "")
	if len(uid) > 8 {
		uid = uid[:8]
	}
	return name + "-" + uid
}

// Sandbox is jobspec's description of sbr, with resources the effective
// ones.
func Sandbox(sbr *v1alpha1.SandboxRequest, resources v1alpha1.Resources) jobspec.Sandbox {
	yes := true
	return jobspec.Sandbox{
		Name:                    JobName(sbr),
		Namespace:               sbr.Namespace,
		ID:                      sbr.Name,
		TaskID:                  sbr.Spec.TaskID,
		Image:                   sbr.Spec.Image,
		WorkingDir:              sbr.Spec.WorkingDir,
		Env:                     sbr.Spec.Env,
		Credentials:             sbr.Spec.Credentials,
		Resources:               resources,
		RuntimeClassName:        sbr.Spec.RuntimeClassName,
		NodeSelector:            sbr.Spec.NodeSelector,
		TTLSecondsAfterFinished: sbr.Spec.TTLSecondsAfterFinished,
		Owner: &metav1.OwnerReference{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "SandboxRequest",
			Name: sbr.Name, UID: sbr.UID, Controller: &yes, BlockOwnerDeletion: &yes,
		},
	}
}

// Ensure implements Backend.
func (j *Jobs) Ensure(ctx context.Context, sbr *v1alpha1.SandboxRequest, resources v1alpha1.Resources) (bool, error) {
	s := Sandbox(sbr, resources)
	if j.DeadlineSeconds > 0 {
		s.ActiveDeadlineSeconds = &j.DeadlineSeconds
	}
	job := j.Pod.Job(s)
	sbr.Status.JobName = job.Name
	err := j.Client.Create(ctx, job)
	if apierrors.IsAlreadyExists(err) {
		var existing batchv1.Job
		if err := j.Client.Get(ctx, client.ObjectKeyFromObject(job), &existing); err != nil {
			return false, fmt.Errorf("get Job %s: %w", job.Name, err)
		}
		if !metav1.IsControlledBy(&existing, sbr) {
			return false, fmt.Errorf("job %s exists and is not this request's", job.Name)
		}
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create Job %s: %w", job.Name, err)
	}
	return true, nil
}

// Observe implements Backend.
func (j *Jobs) Observe(ctx context.Context, sbr *v1alpha1.SandboxRequest) (*corev1.Pod, jobspec.Outcome, error) {
	var job batchv1.Job
	key := types.NamespacedName{Namespace: sbr.Namespace, Name: sbr.Status.JobName}
	err := j.Client.Get(ctx, key, &job)
	if apierrors.IsNotFound(err) && j.Live != nil {
		err = j.Live.Get(ctx, key, &job)
	}
	if apierrors.IsNotFound(err) {
		return nil, jobspec.Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodLost, Message: "the Job " + sbr.Status.JobName + " was deleted"}, nil
	}
	if err != nil {
		return nil, jobspec.Outcome{}, fmt.Errorf("get Job %s: %w", sbr.Status.JobName, err)
	}
	if job.DeletionTimestamp != nil {
		return nil, jobspec.Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodLost, Message: "the Job " + job.Name + " is being deleted"}, nil
	}
	var pods corev1.PodList
	if err := j.Client.List(ctx, &pods, client.InNamespace(sbr.Namespace), client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, jobspec.Outcome{}, fmt.Errorf("list the pods of Job %s: %w", job.Name, err)
	}
	pod := newestPod(pods.Items)
	o := jobspec.Classify(&job, pod)
	if pod == nil && o.Phase == v1alpha1.PhaseProvisioning && j.Live != nil {
		// No pod yet: the cluster may refuse to make it, which the Job
		// controller says only in an event, and retries for good.
		var events corev1.EventList
		if err := j.Live.List(ctx, &events, client.InNamespace(job.Namespace), client.MatchingFields{
			"involvedObject.kind": "Job", "involvedObject.name": job.Name, "reason": "FailedCreate",
		}); err != nil {
			return nil, jobspec.Outcome{}, fmt.Errorf("list the events of Job %s: %w", job.Name, err)
		}
		if msg := jobspec.AdmissionRefusal(job.UID, events.Items); msg != "" {
			o = jobspec.Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPolicyRefused, Message: "the cluster refused the sandbox's pod: " + msg}
		}
	}
	return pod, o, nil
}

// newestPod is the most recently created pod (backoffLimit 0 makes one).
func newestPod(pods []corev1.Pod) *corev1.Pod {
	if len(pods) == 0 {
		return nil
	}
	p := slices.MaxFunc(pods, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return &p
}

// Delete implements Backend.
func (j *Jobs) Delete(ctx context.Context, sbr *v1alpha1.SandboxRequest) (bool, error) {
	name := sbr.Status.JobName
	if name == "" {
		name = JobName(sbr)
	}
	var job batchv1.Job
	err := j.Client.Get(ctx, types.NamespacedName{Namespace: sbr.Namespace, Name: name}, &job)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get Job %s: %w", name, err)
	}
	if !metav1.IsControlledBy(&job, sbr) {
		return true, nil
	}
	if job.DeletionTimestamp != nil {
		return true, nil
	}
	if err := j.Client.Delete(ctx, &job, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete Job %s: %w", name, err)
	}
	return true, nil
}

// Watch implements Backend: the request's Jobs, and its pods by label.
func (j *Jobs) Watch(b *builder.Builder) *builder.Builder {
	return b.Owns(&batchv1.Job{})
}

var _ Backend = (*Jobs)(nil)

// podsOf maps a sandbox pod to its request, by annotation.
func podsOf(_ context.Context, obj client.Object) []reconcile.Request {
	id := obj.GetAnnotations()[jobspec.AnnotationSandbox]
	if id == "" || obj.GetLabels()[jobspec.LabelComponent] != jobspec.ComponentValue {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: id}}}
}
