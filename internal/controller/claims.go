package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
)

// Claims is the Backend of kubernetes-sigs/agent-sandbox (seed 004): a
// request is backed by a SandboxClaim on the warm pool that serves its
// image, so that a pod already running the template is handed over in
// well under a second. The template is the cluster administrator's, made
// with `fleetlift-controller template`: the pod jobspec builds, with the
// credentials the administrator allows; a claim can only add plain
// variables to it.
type Claims struct {
	Client client.Client
	// Live reads past the cache: pools, templates, sandboxes and pods
	// are read by name, never watched.
	Live client.Reader
	// Pools names the SandboxWarmPool that serves each image.
	Pools map[string]string
	// LifetimeSeconds is every claim's shutdown time from its creation;
	// zero means none.
	LifetimeSeconds int64
	// Now is the clock (time.Now).
	Now func() time.Time
}

var _ Backend = (*Claims)(nil)

// Ensure implements Backend.
func (c *Claims) Ensure(ctx context.Context, sbr *v1alpha1.SandboxRequest, _ v1alpha1.Resources) (bool, error) {
	name := JobName(sbr)
	sbr.Status.ClaimName = name
	var existing extv1beta1.SandboxClaim
	err := c.Client.Get(ctx, types.NamespacedName{Namespace: sbr.Namespace, Name: name}, &existing)
	if err == nil {
		if !metav1.IsControlledBy(&existing, sbr) {
			return false, fmt.Errorf("SandboxClaim %s exists and is not this request's", name)
		}
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("get SandboxClaim %s: %w", name, err)
	}
	pool := c.Pools[sbr.Spec.Image]
	if pool == "" {
		return false, &Unservable{fmt.Sprintf("no warm pool serves image %s (the controller's --warm-pool)", sbr.Spec.Image)}
	}
	if err := c.checkTemplate(ctx, sbr, pool); err != nil {
		return false, err
	}
	yes := true
	claim := &extv1beta1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: sbr.Namespace,
			Labels: map[string]string{
				jobspec.LabelSandbox: jobspec.LabelValue(sbr.Name), jobspec.LabelTaskID: jobspec.LabelValue(sbr.Spec.TaskID),
				jobspec.LabelManagedBy: "fleetlift-controller",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.GroupVersion.String(), Kind: "SandboxRequest",
				Name: sbr.Name, UID: sbr.UID, Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: extv1beta1.SandboxClaimSpec{
			WarmPoolRef: extv1beta1.SandboxWarmPoolRef{Name: pool},
			Lifecycle:   &extv1beta1.Lifecycle{ShutdownPolicy: extv1beta1.ShutdownPolicyDelete},
			// No additionalPodMetadata: agent-sandbox allows it in
			// domains its operator lists and never over the
			// template's; the pod carries the claim's uid anyway.
		},
	}
	if c.LifetimeSeconds > 0 {
		at := metav1.NewTime(c.now().Add(time.Duration(c.LifetimeSeconds) * time.Second))
		claim.Spec.Lifecycle.ShutdownTime = &at
	}
	for _, k := range slices.Sorted(maps.Keys(sbr.Spec.Env)) {
		claim.Spec.Env = append(claim.Spec.Env, extv1beta1.EnvVar{Name: k, Value: sbr.Spec.Env[k], ContainerName: jobspec.ContainerSandbox})
	}
	if err := c.Client.Create(ctx, claim); err != nil {
		return false, fmt.Errorf("create SandboxClaim %s: %w", name, err)
	}
	return true, nil
}

func (c *Claims) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// checkTemplate checks that pool's template runs fleetlift's pod and
// gives the request's credentials as it asks: a claim cannot add them.
func (c *Claims) checkTemplate(ctx context.Context, sbr *v1alpha1.SandboxRequest, pool string) error {
	var wp extv1beta1.SandboxWarmPool
	if err := c.Live.Get(ctx, types.NamespacedName{Namespace: sbr.Namespace, Name: pool}, &wp); err != nil {
		if apierrors.IsNotFound(err) {
			return &Unservable{fmt.Sprintf("the warm pool %s does not exist", pool)}
		}
		return fmt.Errorf("get SandboxWarmPool %s: %w", pool, err)
	}
	var tpl extv1beta1.SandboxTemplate
	if err := c.Live.Get(ctx, types.NamespacedName{Namespace: sbr.Namespace, Name: wp.Spec.TemplateRef.Name}, &tpl); err != nil {
		if apierrors.IsNotFound(err) {
			return &Unservable{fmt.Sprintf("the warm pool %s's template %s does not exist", pool, wp.Spec.TemplateRef.Name)}
		}
		return fmt.Errorf("get SandboxTemplate %s: %w", wp.Spec.TemplateRef.Name, err)
	}
	spec := tpl.Spec.PodTemplate.Spec
	var problems []string
	container := func(list []corev1.Container, name string) *corev1.Container {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
		return nil
	}
	sandbox, exec := container(spec.Containers, jobspec.ContainerSandbox), container(spec.Containers, jobspec.ContainerExec)
	switch {
	case sandbox == nil || exec == nil:
		problems = append(problems, "it does not run fleetlift's pod (containers sandbox and exec): make it with `fleetlift-controller template`")
	case sandbox.Image != sbr.Spec.Image:
		problems = append(problems, fmt.Sprintf("its sandbox container runs %s, not %s", sandbox.Image, sbr.Spec.Image))
	}
	if sandbox != nil {
		for _, cr := range sbr.Spec.Credentials {
			ok := slices.ContainsFunc(sandbox.Env, func(e corev1.EnvVar) bool {
				ref := e.ValueFrom
				return e.Name == cr.EnvVar && ref != nil && ref.SecretKeyRef != nil && ref.SecretKeyRef.Name == cr.Name && ref.SecretKeyRef.Key == cr.SecretKey
			})
			if !ok {
				problems = append(problems, fmt.Sprintf("it does not give %s from Secret %s key %s", cr.EnvVar, cr.Name, cr.SecretKey))
			}
		}
	}
	if len(sbr.Spec.Env) > 0 && tpl.Spec.EnvVarsInjectionPolicy != extv1beta1.EnvVarsInjectionPolicyAllowed && tpl.Spec.EnvVarsInjectionPolicy != extv1beta1.EnvVarsInjectionPolicyOverrides {
		problems = append(problems, "it does not let claims set variables (envVarsInjectionPolicy Allowed)")
	}
	if len(problems) > 0 {
		return &Unservable{fmt.Sprintf("the warm pool %s's template %s cannot serve this request: %s", pool, tpl.Name, joinSemi(problems))}
	}
	return nil
}

func joinSemi(s []string) string { return strings.Join(s, "; ") }

// Observe implements Backend: the claim, then its sandbox, then the
// sandbox's pod.
func (c *Claims) Observe(ctx context.Context, sbr *v1alpha1.SandboxRequest) (*corev1.Pod, jobspec.Outcome, error) {
	var claim extv1beta1.SandboxClaim
	key := types.NamespacedName{Namespace: sbr.Namespace, Name: sbr.Status.ClaimName}
	err := c.Client.Get(ctx, key, &claim)
	if apierrors.IsNotFound(err) {
		err = c.Live.Get(ctx, key, &claim)
	}
	if apierrors.IsNotFound(err) {
		return nil, jobspec.Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodLost, Message: "the SandboxClaim " + key.Name + " was deleted"}, nil
	}
	if err != nil {
		return nil, jobspec.Outcome{}, fmt.Errorf("get SandboxClaim %s: %w", key.Name, err)
	}
	ready := apimeta.FindStatusCondition(claim.Status.Conditions, string(agentsv1beta1.SandboxConditionReady))
	if ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == extv1beta1.ClaimExpiredReason {
		return nil, jobspec.Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonDeadlineExceeded, Message: "the claim expired: " + ready.Message}, nil
	}
	name := claim.Status.SandboxStatus.Name
	if name == "" {
		name = claim.Annotations[extv1beta1.AssignedSandboxNameAnnotation]
	}
	if name == "" {
		msg := "waiting for a sandbox from the warm pool"
		if ready != nil && ready.Message != "" {
			msg += ": " + ready.Message
		}
		return nil, jobspec.Outcome{Phase: v1alpha1.PhaseProvisioning, Reason: v1alpha1.ReasonProvisioning, Message: msg}, nil
	}
	var sb agentsv1beta1.Sandbox
	if err := c.Live.Get(ctx, types.NamespacedName{Namespace: sbr.Namespace, Name: name}, &sb); err != nil {
		if apierrors.IsNotFound(err) {
			if sbr.Status.PodName != "" {
				return nil, jobspec.Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodLost, Message: "the Sandbox " + name + " is gone"}, nil
			}
			return nil, jobspec.Outcome{Phase: v1alpha1.PhaseProvisioning, Reason: v1alpha1.ReasonProvisioning, Message: "waiting for the Sandbox " + name}, nil
		}
		return nil, jobspec.Outcome{}, fmt.Errorf("get Sandbox %s: %w", name, err)
	}
	podName := sb.Annotations[agentsv1beta1.SandboxPodNameAnnotation]
	if podName == "" {
		podName = sb.Name
	}
	var pod corev1.Pod
	if err := c.Live.Get(ctx, types.NamespacedName{Namespace: sbr.Namespace, Name: podName}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			if sbr.Status.PodName != "" {
				return nil, jobspec.Outcome{Phase: v1alpha1.PhaseFailed, Reason: v1alpha1.ReasonPodLost, Message: "the pod " + podName + " is gone"}, nil
			}
			return nil, jobspec.Outcome{Phase: v1alpha1.PhaseProvisioning, Reason: v1alpha1.ReasonProvisioning, Message: "waiting for the pod " + podName}, nil
		}
		return nil, jobspec.Outcome{}, fmt.Errorf("get pod %s: %w", podName, err)
	}
	return &pod, jobspec.Classify(nil, &pod), nil
}

// Delete implements Backend.
func (c *Claims) Delete(ctx context.Context, sbr *v1alpha1.SandboxRequest) (bool, error) {
	name := sbr.Status.ClaimName
	if name == "" {
		name = JobName(sbr)
	}
	var claim extv1beta1.SandboxClaim
	err := c.Live.Get(ctx, types.NamespacedName{Namespace: sbr.Namespace, Name: name}, &claim)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("get SandboxClaim %s: %w", name, err)
	}
	if !metav1.IsControlledBy(&claim, sbr) || claim.DeletionTimestamp != nil {
		return true, nil
	}
	if err := c.Client.Delete(ctx, &claim, client.PropagationPolicy(metav1.DeletePropagationForeground)); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("delete SandboxClaim %s: %w", name, err)
	}
	return true, nil
}

// Watch implements Backend: the requests' claims, and the pods of their
// sandboxes.
func (c *Claims) Watch(b *builder.Builder) *builder.Builder {
	return b.Owns(&extv1beta1.SandboxClaim{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(c.podToRequest))
}

// podToRequest maps a pod to the request whose claim it serves: the pod's
// controller is a Sandbox, the Sandbox the one the claim names. The pod
// carries no label of the claim: agent-sandbox's Sandbox controller keeps
// its own label prefixes (agents.x-k8s.io/) off the pods it makes, the
// claim's uid among them.
func (c *Claims) podToRequest(ctx context.Context, pod client.Object) []reconcile.Request {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Sandbox" || !strings.HasPrefix(owner.APIVersion, agentsv1beta1.GroupVersion.Group+"/") {
		return nil
	}
	var claims extv1beta1.SandboxClaimList
	if err := c.Client.List(ctx, &claims, client.InNamespace(pod.GetNamespace())); err != nil {
		return nil
	}
	for _, cl := range claims.Items {
		if cl.Status.SandboxStatus.Name != owner.Name && cl.Annotations[extv1beta1.AssignedSandboxNameAnnotation] != owner.Name {
			continue
		}
		if ref := metav1.GetControllerOf(&cl); ref != nil && ref.Kind == "SandboxRequest" {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: cl.Namespace, Name: ref.Name}}}
		}
	}
	return nil
}
