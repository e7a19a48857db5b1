package dispatch_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestStartCarriesSearchAttributesWhereRegistered: a run starts with
// fleetlift's search attributes in a namespace that registers them, and
// without them, but started all the same with its memo, in one that does
// not (a Temporal cluster whose operator has not registered them).
func TestStartCarriesSearchAttributesWhereRegistered(t *testing.T) {
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(t.TempDir(), "temporal.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	dial := func(ns string) client.Client {
		c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: ns,
			ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	nc, err := client.NewNamespaceClient(client.Options{HostPort: srv.Address(),
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: "bare", WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}

	d := revision(t, strings.Repeat("1", 40), "searchable", "p").Desired.Definitions[0]
	for _, tt := range []struct {
		namespace string
		want      bool
	}{{devserver.Namespace, true}, {"bare", false}} {
		t.Run(tt.namespace, func(t *testing.T) {
			c := dial(tt.namespace)
			// A new namespace is known to the frontend once its cache
			// refreshes.
			deadline := time.Now().Add(time.Minute)
			var run client.WorkflowRun
			for {
				run, err = dispatch.StartRun(ctx, c, d, workflow.Options{}, "", 1)
				var nf *serviceerror.NamespaceNotFound
				if !errors.As(err, &nf) || time.Now().After(deadline) {
					break
				}
				time.Sleep(500 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			desc, err := c.DescribeWorkflowExecution(ctx, run.GetID(), run.GetRunID())
			if err != nil {
				t.Fatal(err)
			}
			info := desc.WorkflowExecutionInfo
			if _, ok := info.GetMemo().GetFields()[status.MemoDigest]; !ok {
				t.Errorf("the run has no memo: %v", info.GetMemo())
			}
			fields := info.GetSearchAttributes().GetIndexedFields()
			for _, name := range workflow.SearchAttributeNames() {
				// A task of its own belongs to no campaign.
				want := tt.want && name != workflow.SearchCampaign.GetName()
				if _, ok := fields[name]; ok != want {
					t.Errorf("search attribute %s set: %v, want %v (%v)", name, ok, want, fields)
				}
			}
			if err := c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "test over"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
