package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
)

// summarize sets the kstatus fields from the phase: observedGeneration,
// and Ready, Reconciling and Stalled. A failed request's Ready and Stalled
// carry the reason fail gave them.
func summarize(obj *v1alpha1.SandboxRequest) {
	s := &obj.Status
	s.ObservedGeneration = obj.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		apimeta.SetStatusCondition(&s.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: obj.Generation,
		})
	}
	switch s.Phase {
	case v1alpha1.PhasePending, v1alpha1.PhaseProvisioning, "":
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProvisioning, s.Message)
		set(v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonProvisioning, s.Message)
		apimeta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionStalled)
	case v1alpha1.PhaseRunning:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRunning, s.Message)
		apimeta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReconciling)
		apimeta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionStalled)
	case v1alpha1.PhaseSucceeded:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, s.Message)
		apimeta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReconciling)
		apimeta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionStalled)
	case v1alpha1.PhaseFailed:
		reason := v1alpha1.ReasonPodFailed
		if c := apimeta.FindStatusCondition(s.Conditions, v1alpha1.ConditionStalled); c != nil {
			reason = c.Reason
		}
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, reason, s.Message)
		set(v1alpha1.ConditionStalled, metav1.ConditionTrue, reason, s.Message)
		apimeta.RemoveStatusCondition(&s.Conditions, v1alpha1.ConditionReconciling)
	}
}

// writeStatus is the one place the status is written: summarized, and
// patched when it differs from orig's, on the condition that orig is what
// the API server has (the cache may lag behind the last write). stale
// reports a conflict: the reconcile runs again on fresh data.
func (r *Reconciler) writeStatus(ctx context.Context, orig, obj *v1alpha1.SandboxRequest) (stale bool, err error) {
	summarize(obj)
	if equality.Semantic.DeepEqual(orig.Status, obj.Status) {
		return false, nil
	}
	err = r.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	switch {
	case apierrors.IsConflict(err):
		return true, nil
	case client.IgnoreNotFound(err) != nil:
		return false, fmt.Errorf("write the status: %w", err)
	}
	return false, nil
}

// fail finishes obj as Failed for reason.
func (r *Reconciler) fail(obj *v1alpha1.SandboxRequest, reason, msg string, exitCode *int32) {
	obj.Status.Phase = v1alpha1.PhaseFailed
	obj.Status.Message = msg
	obj.Status.ExitCode = exitCode
	now := metav1.NewTime(r.now())
	obj.Status.CompletionTime = &now
	apimeta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
		Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: obj.Generation,
	})
	r.Recorder.Eventf(obj, nil, "Warning", "Failed", "Fail", "%s: %s", reason, msg)
}
