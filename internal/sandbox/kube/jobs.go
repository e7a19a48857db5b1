package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/podexec"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Jobs is the "kubernetes-jobs" provider (seed 000): the worker makes the
// sandboxes' Jobs and execs into their pods itself, with no controller.
type Jobs struct {
	// Client is the worker's: Jobs (create, get, list, watch, delete),
	// pods (get, list, watch) in Namespace.
	Client client.WithWatch
	// Executor execs into the pods (pods/exec).
	Executor podexec.Executor
	// Namespace holds the sandboxes.
	Namespace string
	// Image is the image of tasks that name none.
	Image string
	// Pod is the operator's part of every pod.
	Pod jobspec.Config
	// SecretRefs are where secret variables' values come from.
	SecretRefs map[string]SecretRef
	// Defaults are the sandbox container's resources where the options
	// name none.
	Defaults v1alpha1.Resources
	// TTLSecondsAfterFinished and DeadlineSeconds go to every Job.
	TTLSecondsAfterFinished *int32
	DeadlineSeconds         int64
	// Poll is how often Provision looks at the pod (250ms).
	Poll time.Duration
	// NodeLabels are the node labels a sandbox's node selector may name,
	// RuntimeClasses the runtime classes it may ask for; none otherwise:
	// whoever wrote the definition would choose the nodes that hold the
	// sandbox's credentials. (The "kubernetes" provider leaves this to the
	// controller's policy.)
	NodeLabels, RuntimeClasses []string
	// Gateway, when set, is how the sandboxes reach the worker's gateway.
	Gateway *Gateway
}

var _ sandbox.Provider = (*Jobs)(nil)

// Name implements sandbox.Provider.
func (p *Jobs) Name() string { return "kubernetes-jobs" }

// checkPlacement refuses a node selector or runtime class the operator
// did not allow.
func (p *Jobs) checkPlacement(opts sandbox.ProvisionOptions) error {
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(opts.NodeSelector)) {
		if !slices.Contains(p.NodeLabels, k) {
			bad = append(bad, fmt.Sprintf("node selector may not name node label %s (the worker's --sandbox-allowed-node-label; allowed: %s)", k, allowed(p.NodeLabels)))
		}
	}
	if c := opts.RuntimeClass; c != "" && !slices.Contains(p.RuntimeClasses, c) {
		bad = append(bad, fmt.Sprintf("runtime class %s is not allowed (the worker's --sandbox-allowed-runtime-class; allowed: %s)", c, allowed(p.RuntimeClasses)))
	}
	if len(bad) > 0 {
		return errors.New(strings.Join(bad, "; "))
	}
	return nil
}

// allowed is names, comma-separated, or "none".
func allowed(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func (p *Jobs) key(id string) client.ObjectKey {
	return client.ObjectKey{Namespace: p.Namespace, Name: jobspec.Name(id)}
}

// Provision implements sandbox.Provider.
func (p *Jobs) Provision(ctx context.Context, opts sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	creds, err := credentials(opts, p.SecretRefs)
	if err != nil {
		return nil, sandbox.Refused(err)
	}
	if opts.Namespace != "" && opts.Namespace != p.Namespace {
		return nil, sandbox.Refused(fmt.Errorf("namespace %s: this worker's sandboxes are in %s", opts.Namespace, p.Namespace))
	}
	if err := p.checkPlacement(opts); err != nil {
		return nil, sandbox.Refused(err)
	}
	res, err := resources(opts.Resources)
	if err != nil {
		return nil, sandbox.Refused(err)
	}
	if res.Limits.Memory == nil {
		res.Limits.Memory = p.Defaults.Limits.Memory
	}
	if res.Limits.CPU == nil {
		res.Limits.CPU = p.Defaults.Limits.CPU
	}
	// A request above the default limit could make no pod.
	if err := checkRequests(res); err != nil {
		return nil, sandbox.Refused(err)
	}
	image := opts.Image
	if image == "" {
		image = p.Image
	}
	taskID := opts.Labels[jobspec.LabelTaskID]
	if taskID == "" {
		taskID = opts.ID
	}
	s := jobspec.Sandbox{
		Name: jobspec.Name(opts.ID), Namespace: p.Namespace, ID: opts.ID, TaskID: taskID,
		Image: image, Env: p.Gateway.env(opts.Env), Credentials: creds, Resources: res,
		RuntimeClassName: opts.RuntimeClass, NodeSelector: opts.NodeSelector,
		TTLSecondsAfterFinished: p.TTLSecondsAfterFinished, Labels: labels(opts.Labels),
	}
	deadline := p.DeadlineSeconds
	if opts.Timeout > 0 {
		deadline = int64(opts.Timeout / time.Second)
	}
	if deadline > 0 {
		s.ActiveDeadlineSeconds = &deadline
	}
	job := p.Pod.Job(s)
	if err := p.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create the Job: %w", err)
	}
	poll := p.Poll
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	for {
		_, _, o, err := p.observe(ctx, opts.ID)
		if err != nil {
			return nil, err
		}
		switch o.Phase {
		case v1alpha1.PhaseRunning:
			if err := p.Gateway.open(ctx, jobFiles{p}, opts.ID); err != nil {
				return nil, fmt.Errorf("the sandbox's key to the gateway: %w", err)
			}
			return &sandbox.Sandbox{ID: opts.ID, Provider: p.Name(), WorkingDir: s.Workspace(), Phase: sandbox.PhaseRunning}, nil
		case v1alpha1.PhaseFailed, v1alpha1.PhaseSucceeded:
			return nil, fmt.Errorf("the sandbox %s (%s): %s", o.Phase, o.Reason, o.Message)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (%s)", ctx.Err(), o.Message)
		case <-time.After(poll):
		}
	}
}

// observe reads the sandbox's Job and pod.
func (p *Jobs) observe(ctx context.Context, id string) (*batchv1.Job, *corev1.Pod, jobspec.Outcome, error) {
	var job batchv1.Job
	if err := p.Client.Get(ctx, p.key(id), &job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, jobspec.Outcome{}, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return nil, nil, jobspec.Outcome{}, fmt.Errorf("sandbox %s: %w", id, err)
	}
	if job.DeletionTimestamp != nil {
		return nil, nil, jobspec.Outcome{}, fmt.Errorf("sandbox %s is being deleted: %w", id, sandbox.ErrNotFound)
	}
	var pods corev1.PodList
	if err := p.Client.List(ctx, &pods, client.InNamespace(p.Namespace), client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		return nil, nil, jobspec.Outcome{}, fmt.Errorf("sandbox %s: list its pods: %w", id, err)
	}
	var pod *corev1.Pod
	if len(pods.Items) > 0 {
		newest := slices.MaxFunc(pods.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		pod = &newest
	}
	return &job, pod, jobspec.Classify(&job, pod), nil
}

// Exec implements sandbox.Provider.
func (p *Jobs) Exec(ctx context.Context, id string, cmd sandbox.ExecCommand) (*sandbox.ExecResult, error) {
	r, ws, err := p.taken(ctx, id)
	if err != nil {
		return nil, err
	}
	return execute(ctx, r, id, ws, cmd)
}

// CopyTo implements sandbox.Provider.
func (p *Jobs) CopyTo(ctx context.Context, id string, src io.Reader, dest string) error {
	r, ws, err := p.taken(ctx, id)
	if err != nil {
		return err
	}
	return copyTo(ctx, r, id, ws, src, dest)
}

// CopyFrom implements sandbox.Provider.
func (p *Jobs) CopyFrom(ctx context.Context, id, src string) (io.ReadCloser, error) {
	r, ws, err := p.taken(ctx, id)
	if err != nil {
		return nil, err
	}
	return copyFrom(ctx, r, id, ws, src)
}

// taken is runner, once the sandbox is this worker's (Gateway.take).
func (p *Jobs) taken(ctx context.Context, id string) (runner, string, error) {
	r, ws, err := p.runner(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if err := p.Gateway.take(ctx, jobFiles{p}, id); err != nil {
		return nil, "", err
	}
	return r, ws, nil
}

// jobFiles are p's sandboxes as the gateway's keys reach them (see
// files): never taken over.
type jobFiles struct{ p *Jobs }

func (f jobFiles) CopyTo(ctx context.Context, id string, src io.Reader, dest string) error {
	r, ws, err := f.p.runner(ctx, id)
	if err != nil {
		return err
	}
	return copyTo(ctx, r, id, ws, src, dest)
}

func (f jobFiles) CopyFrom(ctx context.Context, id, src string) (io.ReadCloser, error) {
	r, ws, err := f.p.runner(ctx, id)
	if err != nil {
		return nil, err
	}
	return copyFrom(ctx, r, id, ws, src)
}

func (f jobFiles) Status(ctx context.Context, id string) (*sandbox.Status, error) {
	return f.p.Status(ctx, id)
}

// runner execs into the sandbox's running pod, with the declared
// variables the Job gives the agent (its literal values; never its
// secretKeyRefs).
func (p *Jobs) runner(ctx context.Context, id string) (runner, string, error) {
	job, pod, o, err := p.observe(ctx, id)
	if err != nil {
		return nil, "", err
	}
	if !o.ExecReady {
		return nil, "", fmt.Errorf("sandbox %s takes no commands (%s): %s", id, o.Phase, o.Message)
	}
	env := map[string]string{}
	ws := jobspec.DefaultWorkingDir
	for _, c := range job.Spec.Template.Spec.Containers {
		if c.Name != jobspec.ContainerSandbox {
			continue
		}
		ws = c.WorkingDir
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
	}
	return directRunner{x: p.Executor, pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, workspace: ws, env: env}, ws, nil
}

// directRunner execs into a pod through the shim.
type directRunner struct {
	x         podexec.Executor
	pod       types.NamespacedName
	workspace string
	env       map[string]string
}

func (r directRunner) run(ctx context.Context, _ string, argv []string, dir string, timeout time.Duration) (*sandbox.ExecResult, error) {
	var stdout, stderr bytes.Buffer
	code, err := r.x.Exec(ctx, r.pod, jobspec.ContainerExec, jobspec.ExecArgv(r.workspace, r.env, dir, timeout, argv), &stdout, &stderr)
	if err != nil {
		return nil, err
	}
	return &sandbox.ExecResult{ExitCode: code, Stdout: stdout.String(), Stderr: stderr.String()}, nil
}

// Status implements sandbox.Provider.
func (p *Jobs) Status(ctx context.Context, id string) (*sandbox.Status, error) {
	_, _, o, err := p.observe(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &sandbox.Status{Phase: phase(o.Phase), Message: o.Message}
	if o.ExitCode != nil {
		st.ExitCode = int(*o.ExitCode)
	}
	return st, nil
}

// Cleanup implements sandbox.Provider: it deletes the Job, its pod first
// (propagation Foreground), and waits until it is gone.
func (p *Jobs) Cleanup(ctx context.Context, id string) error {
	p.Gateway.close(id)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: jobspec.Name(id), Namespace: p.Namespace}}
	err := p.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("clean up sandbox %s: %w", id, err)
	}
	poll := p.Poll
	if poll == 0 {
		poll = 250 * time.Millisecond
	}
	for {
		err := p.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clean up sandbox %s: %w", id, ctx.Err())
		case <-time.After(poll):
		}
	}
}
