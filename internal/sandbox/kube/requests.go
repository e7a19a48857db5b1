package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Requests is the "kubernetes" provider: sandboxes are SandboxRequests
// that the controller makes and drives; the worker needs only the
// sandboxrequests Role.
type Requests struct {
	// Client is the worker's, allowed sandboxrequests alone.
	Client client.WithWatch
	// Namespace holds the requests (and their sandboxes).
	Namespace string
	// Image is the image of tasks that name none.
	Image string
	// SecretRefs are where secret variables' values come from.
	SecretRefs map[string]SecretRef
	// TTLSecondsAfterFinished, when set, is the requests'; the API's
	// default (an hour) otherwise.
	TTLSecondsAfterFinished *int32
	// Gateway, when set, is how the sandboxes reach the worker's gateway.
	Gateway *Gateway
}

var _ sandbox.Provider = (*Requests)(nil)

// Name implements sandbox.Provider.
func (p *Requests) Name() string { return "kubernetes" }

func (p *Requests) key(id string) client.ObjectKey {
	return client.ObjectKey{Namespace: p.Namespace, Name: jobspec.Name(id)}
}

// Provision implements sandbox.Provider: it creates the request (or finds
// the one a previous attempt created) and waits for it to run.
func (p *Requests) Provision(ctx context.Context, opts sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	creds, err := credentials(opts, p.SecretRefs)
	if err != nil {
		return nil, sandbox.Refused(err)
	}
	ns := p.Namespace
	if opts.Namespace != "" && opts.Namespace != ns {
		return nil, sandbox.Refused(fmt.Errorf("namespace %s: this worker's sandboxes are in %s", opts.Namespace, ns))
	}
	image := opts.Image
	if image == "" {
		image = p.Image
	}
	res, err := resources(opts.Resources)
	if err != nil {
		return nil, sandbox.Refused(err)
	}
	taskID := opts.Labels[jobspec.LabelTaskID]
	if taskID == "" {
		taskID = opts.ID
	}
	sbr := &v1alpha1.SandboxRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: jobspec.Name(opts.ID), Namespace: ns,
			Labels:      labels(opts.Labels),
			Annotations: map[string]string{jobspec.AnnotationSandbox: opts.ID},
		},
		Spec: v1alpha1.SandboxRequestSpec{
			TaskID:                  jobspec.LabelValue(taskID),
			Image:                   image,
			Env:                     p.Gateway.env(opts.Env),
			Resources:               res,
			RuntimeClassName:        opts.RuntimeClass,
			NodeSelector:            opts.NodeSelector,
			Credentials:             creds,
			TTLSecondsAfterFinished: p.TTLSecondsAfterFinished,
		},
	}
	if err := p.Client.Create(ctx, sbr); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create the SandboxRequest: %w", err)
	}
	got, err := p.await(ctx, sbr.Name, func(s *v1alpha1.SandboxRequest) (bool, error) {
		switch {
		case s == nil:
			return false, fmt.Errorf("the SandboxRequest was deleted: %w", sandbox.ErrNotFound)
		case s.DeletionTimestamp != nil:
			return false, fmt.Errorf("the SandboxRequest is being deleted")
		case s.Status.Phase == v1alpha1.PhaseRunning:
			return true, nil
		case s.Status.Phase.Finished():
			return false, failure(s)
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if err := p.Gateway.open(ctx, requestFiles{p}, opts.ID); err != nil {
		return nil, fmt.Errorf("the sandbox's key to the gateway: %w", err)
	}
	return &sandbox.Sandbox{ID: opts.ID, Provider: p.Name(), WorkingDir: got.Spec.WorkingDir, Phase: sandbox.PhaseRunning}, nil
}

// labels keeps the options' labels that are valid Kubernetes labels.
func labels(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		out[k] = jobspec.LabelValue(v)
	}
	return out
}

// resources converts sandbox resources to the request's limits and
// requests. A request above its limit is refused: the pod could not be
// made.
func resources(r sandbox.Resources) (v1alpha1.Resources, error) {
	var out v1alpha1.Resources
	for _, q := range []struct {
		name, v string
		dst     **resource.Quantity
	}{
		{"limits.memory", r.Memory, &out.Limits.Memory}, {"limits.cpu", r.CPU, &out.Limits.CPU},
		{"requests.memory", r.RequestMemory, &out.Requests.Memory}, {"requests.cpu", r.RequestCPU, &out.Requests.CPU},
	} {
		if q.v == "" {
			continue
		}
		v, err := resource.ParseQuantity(q.v)
		if err != nil {
			return out, fmt.Errorf("sandbox.resources.%s %q: %w", q.name, q.v, err)
		}
		*q.dst = &v
	}
	return out, checkRequests(out)
}

// checkRequests refuses a request above its limit.
func checkRequests(r v1alpha1.Resources) error {
	for _, c := range []struct {
		name       string
		req, limit *resource.Quantity
	}{{"memory", r.Requests.Memory, r.Limits.Memory}, {"cpu", r.Requests.CPU, r.Limits.CPU}} {
		if c.req != nil && c.limit != nil && c.req.Cmp(*c.limit) > 0 {
			return fmt.Errorf("sandbox.resources.requests.%s %s is above the limit %s", c.name, c.req, c.limit)
		}
	}
	return nil
}

// await watches the request name until cond says it is done or fails;
// cond sees nil once the request is gone.
func (p *Requests) await(ctx context.Context, name string, cond func(*v1alpha1.SandboxRequest) (bool, error)) (*v1alpha1.SandboxRequest, error) {
	sel := client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)}
	for {
		var list v1alpha1.SandboxRequestList
		if err := p.Client.List(ctx, &list, client.InNamespace(p.Namespace), sel); err != nil {
			return nil, err
		}
		var cur *v1alpha1.SandboxRequest
		if len(list.Items) > 0 {
			cur = &list.Items[0]
		}
		if done, err := cond(cur); done || err != nil {
			return cur, err
		}
		w, err := p.Client.Watch(ctx, &v1alpha1.SandboxRequestList{}, client.InNamespace(p.Namespace), sel,
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true}})
		if err != nil {
			return nil, err
		}
		done, err := p.follow(ctx, w, cond, &cur)
		w.Stop()
		if done || err != nil {
			return cur, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// follow reads w until cond decides, the watch ends (relist) or ctx does.
func (p *Requests) follow(ctx context.Context, w watch.Interface, cond func(*v1alpha1.SandboxRequest) (bool, error), cur **v1alpha1.SandboxRequest) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil
			}
			s, isSBR := ev.Object.(*v1alpha1.SandboxRequest)
			switch {
			case ev.Type == watch.Error || !isSBR:
				return false, nil
			case ev.Type == watch.Bookmark:
				continue
			case ev.Type == watch.Deleted:
				s = nil
			}
			*cur = s
			if done, err := cond(s); done || err != nil {
				return done, err
			}
		}
	}
}

// Exec implements sandbox.Provider.
func (p *Requests) Exec(ctx context.Context, id string, cmd sandbox.ExecCommand) (*sandbox.ExecResult, error) {
	ws, err := p.workspace(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := p.Gateway.take(ctx, requestFiles{p}, id); err != nil {
		return nil, err
	}
	return execute(ctx, p.runner(), id, ws, cmd)
}

// CopyTo implements sandbox.Provider.
func (p *Requests) CopyTo(ctx context.Context, id string, src io.Reader, dest string) error {
	ws, err := p.workspace(ctx, id)
	if err != nil {
		return err
	}
	if err := p.Gateway.take(ctx, requestFiles{p}, id); err != nil {
		return err
	}
	return copyTo(ctx, p.runner(), id, ws, src, dest)
}

// CopyFrom implements sandbox.Provider.
func (p *Requests) CopyFrom(ctx context.Context, id, src string) (io.ReadCloser, error) {
	ws, err := p.workspace(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := p.Gateway.take(ctx, requestFiles{p}, id); err != nil {
		return nil, err
	}
	return copyFrom(ctx, p.runner(), id, ws, src)
}

// requestFiles are p's sandboxes as the gateway's keys reach them (see
// files): never taken over.
type requestFiles struct{ p *Requests }

func (f requestFiles) CopyTo(ctx context.Context, id string, src io.Reader, dest string) error {
	ws, err := f.p.workspace(ctx, id)
	if err != nil {
		return err
	}
	return copyTo(ctx, f.p.runner(), id, ws, src, dest)
}

func (f requestFiles) CopyFrom(ctx context.Context, id, src string) (io.ReadCloser, error) {
	ws, err := f.p.workspace(ctx, id)
	if err != nil {
		return nil, err
	}
	return copyFrom(ctx, f.p.runner(), id, ws, src)
}

func (f requestFiles) Status(ctx context.Context, id string) (*sandbox.Status, error) {
	return f.p.Status(ctx, id)
}

// workspace reads the request's working directory.
func (p *Requests) workspace(ctx context.Context, id string) (string, error) {
	var sbr v1alpha1.SandboxRequest
	if err := p.Client.Get(ctx, p.key(id), &sbr); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return "", fmt.Errorf("sandbox %s: %w", id, err)
	}
	if sbr.DeletionTimestamp != nil {
		return "", fmt.Errorf("sandbox %s is being deleted: %w", id, sandbox.ErrNotFound)
	}
	return (jobspec.Sandbox{WorkingDir: sbr.Spec.WorkingDir}).Workspace(), nil
}

func (p *Requests) runner() runner { return requestRunner{p} }

// requestRunner runs commands as exec requests.
type requestRunner struct{ p *Requests }

func (r requestRunner) run(ctx context.Context, id string, argv []string, dir string, timeout time.Duration) (*sandbox.ExecResult, error) {
	p := r.p
	b := make([]byte, 8)
	rand.Read(b)
	req := v1alpha1.ExecRequest{ID: hex.EncodeToString(b), Command: argv, WorkingDir: dir}
	if timeout > 0 {
		req.TimeoutSeconds = int32(min(math.Ceil(timeout.Seconds()), math.MaxInt32))
	}
	// A finished sandbox whose exec container still runs takes requests
	// too (the worker reads what the agent left); the controller answers
	// those it cannot run with an error.
	if err := p.enqueue(ctx, id, req); err != nil {
		return nil, err
	}
	// However this ends, the request goes: read, or withdrawn (which
	// cancels it).
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		p.withdraw(ctx, id, req.ID)
	}()
	var res v1alpha1.ExecResult
	_, err := p.await(ctx, jobspec.Name(id), func(s *v1alpha1.SandboxRequest) (bool, error) {
		if s == nil || s.DeletionTimestamp != nil {
			return false, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		for _, e := range s.Status.ExecResults {
			if e.ID == req.ID && e.Done() {
				res = e
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	return &sandbox.ExecResult{ExitCode: int(res.ExitCode), Stdout: res.Stdout, Stderr: res.Stderr}, nil
}

// edit changes the request's spec with edit, retrying on conflicts.
func (p *Requests) edit(ctx context.Context, id string, edit func(*v1alpha1.SandboxRequest) error) error {
	return retry.RetryOnConflict(queueBackoff, func() error {
		var s v1alpha1.SandboxRequest
		if err := p.Client.Get(ctx, p.key(id), &s); err != nil {
			if apierrors.IsNotFound(err) {
				return fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
			}
			return err
		}
		if s.DeletionTimestamp != nil {
			return fmt.Errorf("sandbox %s is being deleted: %w", id, sandbox.ErrNotFound)
		}
		patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if err := edit(&s); err != nil {
			return err
		}
		return p.Client.Patch(ctx, &s, patch)
	})
}

// Status implements sandbox.Provider.
func (p *Requests) Status(ctx context.Context, id string) (*sandbox.Status, error) {
	var s v1alpha1.SandboxRequest
	if err := p.Client.Get(ctx, p.key(id), &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	st := &sandbox.Status{Phase: phase(s.Status.Phase), Message: s.Status.Message}
	if s.Status.ExitCode != nil {
		st.ExitCode = int(*s.Status.ExitCode)
	}
	return st, nil
}

func phase(p v1alpha1.Phase) sandbox.Phase {
	switch p {
	case v1alpha1.PhaseRunning:
		return sandbox.PhaseRunning
	case v1alpha1.PhaseSucceeded:
		return sandbox.PhaseSucceeded
	case v1alpha1.PhaseFailed:
		return sandbox.PhaseFailed
	}
	return sandbox.PhasePending
}

// Cleanup implements sandbox.Provider: it deletes the request and waits
// until the controller has deleted its Job and let it go.
func (p *Requests) Cleanup(ctx context.Context, id string) error {
	p.Gateway.close(id)
	sbr := &v1alpha1.SandboxRequest{ObjectMeta: metav1.ObjectMeta{Name: jobspec.Name(id), Namespace: p.Namespace}}
	if err := p.Client.Delete(ctx, sbr); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("clean up sandbox %s: %w", id, err)
	}
	if _, err := p.await(ctx, sbr.Name, func(s *v1alpha1.SandboxRequest) (bool, error) { return s == nil, nil }); err != nil {
		return fmt.Errorf("clean up sandbox %s: wait for the controller: %w", id, err)
	}
	return nil
}

// failure is the error of request s, which finished before it ran: its
// phase, the controller's classification (the Stalled condition's
// reason: OOMKilled, ImagePullFailed, ...) and message. A request the
// controller's policy or the cluster's admission refused, or whose
// credentials are missing, fails the same way however often it is made
// again: that error is a refusal (sandbox.ErrRefused), and the task fails
// at once.
func failure(s *v1alpha1.SandboxRequest) error {
	c := apimeta.FindStatusCondition(s.Status.Conditions, v1alpha1.ConditionStalled)
	if c == nil || c.Reason == "" {
		return fmt.Errorf("the sandbox %s: %s", s.Status.Phase, s.Status.Message)
	}
	err := fmt.Errorf("the sandbox %s (%s): %s", s.Status.Phase, c.Reason, s.Status.Message)
	if c.Reason == v1alpha1.ReasonPolicyRefused || c.Reason == v1alpha1.ReasonCredentialMissing {
		return sandbox.Refused(err)
	}
	return err
}
