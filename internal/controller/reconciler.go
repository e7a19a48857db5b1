package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/podexec"
)

// Finalizer holds a request until its workload is deleted.
const Finalizer = "fleetlift.io/sandbox-cleanup"

// staleRetry is how soon a reconcile that read a stale request runs
// again.
const staleRetry = 20 * time.Millisecond

// provisioningPoll re-reads a request whose pod has not started, in case
// a pod event was missed.
const provisioningPoll = 10 * time.Second

// Reconciler reconciles SandboxRequests.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Policy   Policy
	Backend  Backend
	// Defaults are the sandbox container's resources where a request
	// names none.
	Defaults v1alpha1.Resources
	// Now is the clock (time.Now).
	Now func() time.Time
	// Secrets reads the credentials' Secrets, live: the controller may
	// get the Secrets its policy names and no others, so they are never
	// listed or watched.
	Secrets client.Reader

	execs   *execs
	metrics *metrics
}

// Options configure Setup.
type Options struct {
	Policy  Policy
	Backend Backend
	// Executor runs exec requests in pods.
	Executor podexec.Executor
	// Defaults are the sandbox container's resources where a request
	// names none.
	Defaults v1alpha1.Resources
	// ExecTimeout bounds exec requests that name no timeout
	// (DefaultExecTimeout).
	ExecTimeout time.Duration
	// Workers is how many requests are reconciled at once (1).
	Workers int
	// Registerer takes the controller's metrics (controller-runtime's
	// registry, served with controller_runtime_*, when nil).
	Registerer prometheus.Registerer
	// Name names the controller and its events' reporter
	// ("fleetlift-controller").
	Name string
}

// Setup makes the Reconciler and registers it with mgr.
func Setup(mgr ctrl.Manager, o Options) (*Reconciler, error) {
	if o.Name == "" {
		o.Name = "fleetlift-controller"
	}
	if o.Registerer == nil {
		o.Registerer = ctrlmetrics.Registry
	}
	m := newMetrics(mgr.GetClient())
	if err := m.register(o.Registerer); err != nil {
		return nil, fmt.Errorf("register the metrics: %w", err)
	}
	r := &Reconciler{
		Client:   mgr.GetClient(),
		Recorder: mgr.GetEventRecorder(o.Name),
		Policy:   o.Policy,
		Backend:  o.Backend,
		Defaults: o.Defaults,
		Now:      time.Now,
		Secrets:  mgr.GetAPIReader(),
		execs:    newExecs(o.Executor, m, o.ExecTimeout),
		metrics:  m,
	}
	b := ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.SandboxRequest{}).Named("sandboxrequest")
	b = o.Backend.Watch(b)
	b = b.Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(podsOf)).
		WatchesRawSource(source.Channel(r.execs.wake, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(o.Workers, 1)})
	if err := b.Complete(r); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// pass is what one reconcile learns in a step for the steps after it.
type pass struct {
	// execReady says the pod's exec container runs, the agent's or not.
	execReady bool
}

// step is one part of a reconcile.
type step func(ctx context.Context, obj *v1alpha1.SandboxRequest, p *pass) (ctrl.Result, error)

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	obj := &v1alpha1.SandboxRequest{}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, obj)
	}
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		patch := client.MergeFrom(obj.DeepCopy())
		controllerutil.AddFinalizer(obj, Finalizer)
		if err := r.Client.Patch(ctx, obj, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add the finalizer: %w", err)
		}
	}
	orig := obj.DeepCopy()
	defer func() {
		stale, err := r.writeStatus(ctx, orig, obj)
		if err != nil {
			retErr = errors.Join(retErr, err)
		}
		if stale {
			res = sooner(res, ctrl.Result{RequeueAfter: staleRetry})
		}
	}()
	p := &pass{}
	for _, s := range []step{r.reconcilePolicy, r.reconcileCredentials, r.reconcileWorkload, r.reconcilePod, r.reconcileExec, r.reconcileExpiry} {
		sres, err := s(ctx, obj, p)
		res = sooner(res, sres)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// sooner is the result that requeues sooner.
func sooner(a, b ctrl.Result) ctrl.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0:
		return a
	case b.RequeueAfter < a.RequeueAfter:
		return b
	}
	return a
}

// effective are the sandbox container's resources: the request's, with
// the defaults where it names none.
func (r *Reconciler) effective(res v1alpha1.Resources) v1alpha1.Resources {
	out := *res.DeepCopy()
	fill := func(dst *v1alpha1.ResourceList, def v1alpha1.ResourceList) {
		if dst.Memory == nil && def.Memory != nil {
			q := def.Memory.DeepCopy()
			dst.Memory = &q
		}
		if dst.CPU == nil && def.CPU != nil {
			q := def.CPU.DeepCopy()
			dst.CPU = &q
		}
	}
	fill(&out.Limits, r.Defaults.Limits)
	fill(&out.Requests, r.Defaults.Requests)
	// A request above a defaulted limit would be refused by the API
	// server; lower it to the limit.
	lower := func(req **resource.Quantity, lim *resource.Quantity) {
		if *req != nil && lim != nil && (*req).Cmp(*lim) > 0 {
			q := lim.DeepCopy()
			*req = &q
		}
	}
	lower(&out.Requests.Memory, out.Limits.Memory)
	lower(&out.Requests.CPU, out.Limits.CPU)
	return out
}

// reconcilePolicy checks a new request against the policy.
func (r *Reconciler) reconcilePolicy(ctx context.Context, obj *v1alpha1.SandboxRequest, _ *pass) (ctrl.Result, error) {
	if obj.Status.Phase == "" {
		obj.Status.Phase = v1alpha1.PhasePending
		obj.Status.Message = "accepted"
	}
	if obj.Status.Phase != v1alpha1.PhasePending {
		return ctrl.Result{}, nil
	}
	err := r.Policy.Check(obj.Spec, r.effective(obj.Spec.Resources))
	var refusal *Refusal
	if !errors.As(err, &refusal) {
		return ctrl.Result{}, err
	}
	for _, k := range refusal.Kinds {
		r.metrics.refusals.WithLabelValues(k).Inc()
	}
	ctrl.LoggerFrom(ctx).Info("refused by policy", "reasons", refusal.Reasons)
	r.fail(obj, v1alpha1.ReasonPolicyRefused, "refused by policy: "+refusal.Error(), nil)
	return ctrl.Result{}, nil
}

// reconcileCredentials checks that every credential's Secret has its key,
// so that a missing one fails the request before a pod waits for it.
func (r *Reconciler) reconcileCredentials(ctx context.Context, obj *v1alpha1.SandboxRequest, _ *pass) (ctrl.Result, error) {
	if obj.Status.Phase != v1alpha1.PhasePending || r.Secrets == nil {
		return ctrl.Result{}, nil
	}
	var missing []string
	for _, c := range obj.Spec.Credentials {
		var s corev1.Secret
		err := r.Secrets.Get(ctx, client.ObjectKey{Namespace: obj.Namespace, Name: c.Name}, &s)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, fmt.Sprintf("%s: Secret %s does not exist", c.EnvVar, c.Name))
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("read Secret %s: %w", c.Name, err)
		case s.Data[c.SecretKey] == nil && s.StringData[c.SecretKey] == "":
			missing = append(missing, fmt.Sprintf("%s: Secret %s has no key %s", c.EnvVar, c.Name, c.SecretKey))
		}
	}
	if len(missing) > 0 {
		r.fail(obj, v1alpha1.ReasonCredentialMissing, "credentials missing: "+strings.Join(missing, "; "), nil)
	}
	return ctrl.Result{}, nil
}

// reconcileWorkload makes the workload of an accepted request.
func (r *Reconciler) reconcileWorkload(ctx context.Context, obj *v1alpha1.SandboxRequest, _ *pass) (ctrl.Result, error) {
	if obj.Status.Phase != v1alpha1.PhasePending {
		return ctrl.Result{}, nil
	}
	// The workload gets the environment and nodes the policy gives it;
	// the request keeps its own spec.
	env, sel := obj.Spec.Env, obj.Spec.NodeSelector
	obj.Spec.Env, obj.Spec.NodeSelector = r.Policy.PodEnv(obj.Spec), r.Policy.PodNodeSelector(obj.Spec)
	created, err := r.Backend.Ensure(ctx, obj, r.effective(obj.Spec.Resources))
	obj.Spec.Env, obj.Spec.NodeSelector = env, sel
	var unservable *Unservable
	if errors.As(err, &unservable) {
		r.fail(obj, v1alpha1.ReasonBackendFailed, unservable.Reason, nil)
		return ctrl.Result{}, nil
	}
	if err != nil {
		obj.Status.Message = err.Error()
		return ctrl.Result{}, err
	}
	obj.Status.Phase = v1alpha1.PhaseProvisioning
	obj.Status.Message = "waiting for the pod"
	if created {
		name, what := obj.Status.JobName, "Job"
		if obj.Status.ClaimName != "" {
			name, what = obj.Status.ClaimName, "SandboxClaim"
		}
		ctrl.LoggerFrom(ctx).Info("created the workload", "kind", what, "name", name)
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, what+"Created", "Create", "created %s %s", what, name)
	}
	return ctrl.Result{RequeueAfter: provisioningPoll}, nil
}

// reconcilePod follows the pod; after the agent finished, only whether
// its exec container still runs (the worker reads the agent's files
// then).
func (r *Reconciler) reconcilePod(ctx context.Context, obj *v1alpha1.SandboxRequest, p *pass) (ctrl.Result, error) {
	switch obj.Status.Phase {
	case v1alpha1.PhaseProvisioning, v1alpha1.PhaseRunning:
	case v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed:
		if obj.Status.PodName == "" {
			return ctrl.Result{}, nil
		}
		_, o, err := r.Backend.Observe(ctx, obj)
		p.execReady = err == nil && o.ExecReady
		return ctrl.Result{}, nil
	default:
		return ctrl.Result{}, nil
	}
	pod, o, err := r.Backend.Observe(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	p.execReady = o.ExecReady
	if pod != nil {
		obj.Status.PodName = pod.Name
	}
	switch o.Phase {
	case v1alpha1.PhaseRunning:
		if obj.Status.Phase == v1alpha1.PhaseProvisioning {
			obj.Status.Phase = v1alpha1.PhaseRunning
			obj.Status.StartTime = o.StartedAt
			r.metrics.provisioning.Observe(r.now().Sub(obj.CreationTimestamp.Time).Seconds())
			r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "PodRunning", "Run", "pod %s runs", obj.Status.PodName)
		}
		obj.Status.Message = o.Message
	case v1alpha1.PhaseSucceeded:
		obj.Status.Phase = v1alpha1.PhaseSucceeded
		obj.Status.Message = o.Message
		obj.Status.ExitCode = o.ExitCode
		now := metav1.NewTime(r.now())
		obj.Status.CompletionTime = &now
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, "Succeeded", "Finish", "%s", o.Message)
	case v1alpha1.PhaseFailed:
		ctrl.LoggerFrom(ctx).Info("the sandbox failed", "reason", o.Reason, "message", o.Message)
		r.fail(obj, o.Reason, o.Message, o.ExitCode)
	default:
		obj.Status.Message = o.Message
		return ctrl.Result{RequeueAfter: provisioningPoll}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileExec runs new exec requests, records finished ones and keeps
// the results within their limits.
func (r *Reconciler) reconcileExec(ctx context.Context, obj *v1alpha1.SandboxRequest, p *pass) (ctrl.Result, error) {
	now := metav1.NewTime(r.now())
	s := &obj.Status
	requested := map[string]bool{}
	for _, q := range obj.Spec.ExecRequests {
		requested[q.ID] = true
	}
	index := func(id string) int {
		return slices.IndexFunc(s.ExecResults, func(e v1alpha1.ExecResult) bool { return e.ID == id })
	}

	// Results of finished runs: a run whose result the stored status
	// already holds is forgotten.
	for id, res := range r.execs.finished(obj.UID) {
		i := index(id)
		if i >= 0 && s.ExecResults[i].Done() {
			r.execs.forget(obj.UID, id)
			continue
		}
		res.CompletedAt = &now
		if i >= 0 {
			s.ExecResults[i] = res
		} else {
			s.ExecResults = append(s.ExecResults, res)
			i = len(s.ExecResults) - 1
		}
		r.fit(s, i, requested)
	}
	// Running results: withdrawn ones are cancelled; those the controller
	// does not run (it restarted) cannot be known.
	for i := range s.ExecResults {
		e := &s.ExecResults[i]
		if e.Done() {
			continue
		}
		if r.execs.running(obj.UID, e.ID) {
			if !requested[e.ID] || s.Phase.Finished() && !p.execReady {
				r.execs.cancel(obj.UID, e.ID)
			}
			continue
		}
		e.CompletedAt, e.Error = &now, "the controller restarted while the command ran; its outcome is unknown"
	}
	// New requests.
	for _, q := range obj.Spec.ExecRequests {
		if index(q.ID) >= 0 {
			continue
		}
		switch {
		case r.execs.running(obj.UID, q.ID):
			// Started by a reconcile whose status write failed.
			s.ExecResults = append(s.ExecResults, v1alpha1.ExecResult{ID: q.ID, StartedAt: &now})
		case p.execReady && (s.Phase == v1alpha1.PhaseRunning || s.Phase.Finished()):
			s.ExecResults = append(s.ExecResults, v1alpha1.ExecResult{ID: q.ID, StartedAt: &now})
			r.execs.start(obj, q)
		case s.Phase.Finished():
			s.ExecResults = append(s.ExecResults, v1alpha1.ExecResult{ID: q.ID, StartedAt: &now, CompletedAt: &now,
				Error: fmt.Sprintf("the sandbox is no longer running (%s: %s)", s.Phase, s.Message)})
		}
	}
	r.evict(s, requested)
	s.LastExecProcessedIndex = 0
	for _, q := range obj.Spec.ExecRequests {
		if index(q.ID) < 0 {
			break
		}
		s.LastExecProcessedIndex++
	}
	return ctrl.Result{}, nil
}

// fit cuts result i's stdout so that the results the worker has not
// consumed fit ResultBudget.
func (r *Reconciler) fit(s *v1alpha1.SandboxRequestStatus, i int, requested map[string]bool) {
	others := 0
	for j, e := range s.ExecResults {
		if j != i && requested[e.ID] {
			others += outputSize(e)
		}
	}
	res := &s.ExecResults[i]
	room := ResultBudget - others - jsonLen(res.Stderr)
	if jsonLen(res.Stdout) > room {
		res.Stdout = fitJSON([]byte(res.Stdout), true, max(room, len("... [truncated]")))
	}
}

// evict drops the oldest finished results the worker has consumed (their
// request is gone) while there are more than MaxResults or their outputs
// exceed ResultBudget.
func (r *Reconciler) evict(s *v1alpha1.SandboxRequestStatus, requested map[string]bool) {
	total := 0
	for _, e := range s.ExecResults {
		total += outputSize(e)
	}
	for len(s.ExecResults) > MaxResults || total > ResultBudget {
		i := slices.IndexFunc(s.ExecResults, func(e v1alpha1.ExecResult) bool { return e.Done() && !requested[e.ID] })
		if i < 0 {
			return
		}
		total -= outputSize(s.ExecResults[i])
		s.ExecResults = slices.Delete(s.ExecResults, i, i+1)
	}
}

// reconcileExpiry deletes a finished request once its TTL has passed.
func (r *Reconciler) reconcileExpiry(ctx context.Context, obj *v1alpha1.SandboxRequest, _ *pass) (ctrl.Result, error) {
	if !obj.Status.Phase.Finished() || obj.Status.CompletionTime == nil {
		return ctrl.Result{}, nil
	}
	ttl := time.Hour
	if t := obj.Spec.TTLSecondsAfterFinished; t != nil {
		ttl = time.Duration(*t) * time.Second
	}
	left := obj.Status.CompletionTime.Add(ttl).Sub(r.now())
	if left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	ctrl.LoggerFrom(ctx).Info("deleting the finished request after its TTL", "ttl", ttl)
	if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("delete the expired request: %w", err)
	}
	return ctrl.Result{}, nil
}

// reconcileDelete deletes the workload, then lets the request go.
func (r *Reconciler) reconcileDelete(ctx context.Context, obj *v1alpha1.SandboxRequest) (ctrl.Result, error) {
	r.execs.drop(obj.UID)
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	gone, err := r.Backend.Delete(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !gone {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	patch := client.MergeFrom(obj.DeepCopy())
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := r.Client.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove the finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}
