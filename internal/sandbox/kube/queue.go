package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// The worker's exec requests are entries of the SandboxRequest's
// spec.execRequests. The controller writes the request's status as they
// run, and every status write moves the object's resourceVersion: an
// edit of the spec on the resourceVersion it read loses to them, again
// and again while a sandbox is busy. So entries are added and withdrawn
// with JSON patches that hold without it: an append at the end of the
// list, and a removal at the index read, guarded by a test that the
// entry there is still the one to remove.

// queueBackoff paces the retries of an append or a withdrawal that lost
// a race with another one: about 10 s in all, in which a busy sandbox's
// status writes leave a gap at least once.
var queueBackoff = wait.Backoff{Steps: 16, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: time.Second}

// patchOp is one operation of a JSON patch (RFC 6902).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// enqueue adds req to the end of sandbox id's exec requests.
func (p *Requests) enqueue(ctx context.Context, id string, req v1alpha1.ExecRequest) error {
	return retryLost(ctx, func() error {
		s, err := p.live(ctx, id)
		if err != nil {
			return err
		}
		if len(s.Spec.ExecRequests) == 0 {
			// There is no list to append to, and JSON patch cannot test
			// that a member is absent: make the list on the version
			// read. A status write or another exec's list coming first
			// is a conflict, and the next pass reads again (and most
			// likely appends).
			patch := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
			s.Spec.ExecRequests = append(s.Spec.ExecRequests, req)
			return p.Client.Patch(ctx, s, patch)
		}
		// The list going while the patch is on its way fails it as
		// invalid; the next pass makes it anew.
		return p.jsonPatch(ctx, s, patchOp{Op: "add", Path: "/spec/execRequests/-", Value: req})
	})
}

// withdraw removes the exec request reqID from sandbox id's, if it is
// there.
func (p *Requests) withdraw(ctx context.Context, id, reqID string) error {
	return retryLost(ctx, func() error {
		s, err := p.live(ctx, id)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(s.Spec.ExecRequests, func(q v1alpha1.ExecRequest) bool { return q.ID == reqID })
		if i < 0 {
			return nil
		}
		at := fmt.Sprintf("/spec/execRequests/%d", i)
		return p.jsonPatch(ctx, s,
			patchOp{Op: "test", Path: at + "/id", Value: reqID},
			patchOp{Op: "remove", Path: at})
	})
}

// live reads sandbox id's request, which must not be going.
func (p *Requests) live(ctx context.Context, id string) (*v1alpha1.SandboxRequest, error) {
	var s v1alpha1.SandboxRequest
	if err := p.Client.Get(ctx, p.key(id), &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
		}
		return nil, err
	}
	if s.DeletionTimestamp != nil {
		return nil, fmt.Errorf("sandbox %s is being deleted: %w", id, sandbox.ErrNotFound)
	}
	return &s, nil
}

// jsonPatch applies ops to s on whatever version the server holds.
func (p *Requests) jsonPatch(ctx context.Context, s *v1alpha1.SandboxRequest, ops ...patchOp) error {
	b, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return p.Client.Patch(ctx, s, client.RawPatch(types.JSONPatchType, b))
}

// retryLost runs f again, with queueBackoff, while it fails because the
// entry it tested moved (another withdrawal came first).
func retryLost(ctx context.Context, f func() error) error {
	var err error
	werr := wait.ExponentialBackoffWithContext(ctx, queueBackoff, func(context.Context) (bool, error) {
		err = f()
		if apierrors.IsInvalid(err) || apierrors.IsConflict(err) || isFailedTest(err) {
			return false, nil
		}
		return true, err
	})
	if wait.Interrupted(werr) {
		return err
	}
	return werr
}

// isFailedTest reports whether err is the server's answer to a JSON
// patch whose test operation did not hold.
func isFailedTest(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code == 422 || code == 409
}
