package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
)

// namespace is the embedded server's namespace (devserver.Namespace,
// which `up` uses by default; that package links the server).
const namespace = "default"

// observer reads the round's runs from the embedded server, with the
// install's client credential from <state-dir>/tls, as `fleetlift status`
// does.
type observer struct {
	c      client.Client
	reader *statetemporal.Reader
}

// dial connects to the server at addr; the credential is read afresh,
// since a first start killed early may not have written it yet.
func dial(ctx context.Context, addr, stateDir string) (*observer, error) {
	tlsCfg, err := credential.LoadClient(filepath.Join(stateDir, "tls"))
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{
		HostPort: addr, Namespace: namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: tlsCfg},
		DataConverter:     payload.Converter,
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	// Never a cached answer: the harness wants the state now.
	return &observer{c: c, reader: &statetemporal.Reader{Client: c, Namespace: namespace, QueryCache: -1}}, nil
}

func (o *observer) Close() { o.c.Close() }

// serving reports whether the server answers as a working install must:
// its namespace is there, visibility lists runs, and the campaign has
// been started (the reconciler's first pass did it).
func (o *observer) serving(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := o.c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); err != nil {
		return fmt.Errorf("describe namespace: %w", err)
	}
	if _, err := o.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 1}); err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	if _, err := o.c.DescribeWorkflowExecution(ctx, "campaign/"+campaignID, ""); err != nil {
		return fmt.Errorf("describe campaign/%s: %w", campaignID, err)
	}
	return nil
}

// campaignView is the campaign as the harness sees it at one moment.
type campaignView struct {
	// status is the workflow's status (running, completed, ...).
	status string
	// st is the campaign's state: its query answer while it runs, its
	// result once completed; nil when neither could be read.
	st *status.CampaignState
}

// closed reports whether the campaign's workflow has ended.
func (v campaignView) closed() bool { return v.status != "" && v.status != "running" }

// running counts the units that are running.
func (v campaignView) running() int {
	if v.st == nil {
		return 0
	}
	n := 0
	for _, u := range v.st.Units {
		if u.Phase == status.TaskRunning || u.Phase == status.TaskProvisioning ||
			u.Phase == status.TaskAwaitingApproval || u.Phase == status.TaskCreatingPRs {
			n++
		}
	}
	return n
}

// units are the campaign's units, nil when its state is unknown.
func (v campaignView) units() []Unit {
	if v.st == nil {
		return nil
	}
	out := make([]Unit, 0, len(v.st.Units))
	for _, u := range v.st.Units {
		out = append(out, Unit{Key: u.Key, Phase: string(u.Phase), Error: u.Error, Applied: u.Applied, Lost: u.SandboxesLost})
	}
	return out
}

// campaign reads the campaign's latest run.
func (o *observer) campaign(ctx context.Context) (campaignView, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	wid := "campaign/" + campaignID
	d, err := o.c.DescribeWorkflowExecution(ctx, wid, "")
	if err != nil {
		return campaignView{}, fmt.Errorf("describe %s: %w", wid, err)
	}
	info := d.WorkflowExecutionInfo
	v := campaignView{status: statusName(info.Status)}
	var st status.CampaignState
	switch info.Status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		val, err := o.c.QueryWorkflow(ctx, wid, "", status.QueryStatus)
		if err != nil {
			return v, fmt.Errorf("query %s: %w", wid, err)
		}
		if err := val.Get(&st); err != nil {
			return v, err
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if err := o.c.GetWorkflow(ctx, wid, info.Execution.RunId).Get(ctx, &st); err != nil {
			return v, fmt.Errorf("result of %s: %w", wid, err)
		}
	default:
		return v, nil
	}
	v.st = &st
	return v, nil
}

// pending lists the results awaiting approval, as `fleetlift status`
// and `approve --git` find them.
func (o *observer) pending(ctx context.Context) ([]state.PendingApproval, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rec, err := o.reader.Get(ctx, campaignID)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rec.PendingApprovals, nil
}

// runs lists every execution of the campaign and of its tasks, open and
// closed, with the phase each completed task ended in.
func (o *observer) runs(ctx context.Context) ([]Run, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	prefix := "campaign/" + campaignID
	var out []Run
	var token []byte
	for {
		resp, err := o.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 1000, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.Executions {
			wid := e.Execution.WorkflowId
			if wid != prefix && !strings.HasPrefix(wid, prefix+"/") {
				continue
			}
			r := Run{WorkflowID: wid, RunID: e.Execution.RunId, Status: statusName(e.Status), Start: e.StartTime.AsTime()}
			if e.CloseTime != nil {
				r.Close = e.CloseTime.AsTime()
			}
			if wid != prefix && e.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				var tr status.TaskResult
				if err := o.c.GetWorkflow(ctx, wid, r.RunID).Get(ctx, &tr); err == nil {
					r.Phase = string(tr.Phase)
				}
			}
			out = append(out, r)
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return out, nil
		}
	}
}

// statusName is a workflow status as `fleetlift status` prints it:
// "running", "completed", "continued-as-new".
func statusName(s enumspb.WorkflowExecutionStatus) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s.String(), "WORKFLOW_EXECUTION_STATUS_")), "_", "-")
}
