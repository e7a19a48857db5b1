package kube_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/api/v1alpha1"
	"github.com/fleetlift/fleetlift/internal/controller/controllertest"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/kube"
)

// Steps that run commands in one sandbox at once (the worker reads the
// changes of a group's repositories side by side) each get their
// answer, although the controller writes the request's status all the
// while: none fails on the request having moved under it.
func TestRequestsManyExecsAtOnce(t *testing.T) {
	c := controllertest.New(t, cp.Env(t), controllertest.Options{Controller: true})
	worker := c.Worker(t)
	p := &kube.Requests{Client: worker, Namespace: c.Sandbox, Image: controllertest.Image}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sb, err := p.Provision(ctx, sandbox.ProvisionOptions{ID: "many-execs", Image: controllertest.Image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Cleanup(context.Background(), sb.ID) })

	const n = 12
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			want := fmt.Sprintf("step %d", i)
			res, err := p.Exec(ctx, sb.ID, sandbox.ExecCommand{Command: []string{"echo", want}})
			switch {
			case err != nil:
				errs[i] = err
			case res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != want:
				errs[i] = fmt.Errorf("exit %d, stdout %q; want 0, %q", res.ExitCode, res.Stdout, want)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("exec %d: %v", i, err)
		}
	}
	// Every request was withdrawn once answered.
	res, err := p.Exec(ctx, sb.ID, sandbox.ExecCommand{Command: []string{"true"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("a later exec: %v, %+v", err, res)
	}
	var sbr v1alpha1.SandboxRequest
	if err := worker.Get(ctx, client.ObjectKey{Namespace: c.Sandbox, Name: jobspec.Name(sb.ID)}, &sbr); err != nil {
		t.Fatal(err)
	}
	if left := sbr.Spec.ExecRequests; len(left) != 0 {
		t.Errorf("%d exec requests left on the sandbox: %+v", len(left), left)
	}
}
