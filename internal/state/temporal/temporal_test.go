package temporal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/state"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
)

// finished is a Temporal with one finished run: its memo and its result.
// Only what Reader.Get calls on a finished run is there.
type finished struct {
	client.Client
	wid, typ string
	memo     map[string]any
	result   any
}

func (f finished) DescribeWorkflowExecution(_ context.Context, wid, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if wid != f.wid {
		return nil, serviceerror.NewNotFound(wid)
	}
	fields := map[string]*commonpb.Payload{}
	for k, v := range f.memo {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return nil, err
		}
		fields[k] = p
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: "run-1"},
		Type:      &commonpb.WorkflowType{Name: f.typ},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
		Memo:      &commonpb.Memo{Fields: fields},
	}}, nil
}

func (f finished) GetWorkflow(context.Context, string, string) client.WorkflowRun {
	return result{v: f.result}
}

type result struct {
	client.WorkflowRun
	v any
}

func (r result) Get(_ context.Context, v any) error {
	b, err := json.Marshal(r.v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// TestReaderReportsHowARunEnded: the recorded phase of a finished run says
// whether every repository got its change, some failed, or the campaign was
// aborted, with the counts as its message; every such phase is done. A
// campaign recorded before the final phases were told apart ("completed"
// with failed units) reads as it ended.
func TestReaderReportsHowARunEnded(t *testing.T) {
	units := func(phases ...status.TaskPhase) []status.UnitResult {
		var out []status.UnitResult
		for i, p := range phases {
			out = append(out, status.UnitResult{Key: string(rune('a' + i)), Phase: p})
		}
		return out
	}
	cases := []struct {
		name      string
		typ       string
		memoPhase string
		result    any
		want      state.Phase
		message   string
	}{
		{name: "campaign, every repository completed", typ: "Campaign", memoPhase: "completed",
			result: status.CampaignState{Phase: status.CampaignCompleted, Message: "2 repositories completed",
				Summary: status.Summary{Total: 2, Completed: 2}, Units: units(status.TaskCompleted, status.TaskCompleted)},
			want: state.PhaseCompleted, message: "2 repositories completed"},
		{name: "campaign, one repository failed", typ: "Campaign", memoPhase: "completed_with_failures",
			result: status.CampaignState{Phase: status.CampaignCompletedWithFailures, Message: "1 of 2 repositories failed, 1 completed",
				Summary: status.Summary{Total: 2, Completed: 1, Failed: 1}, Units: units(status.TaskCompleted, status.TaskFailed)},
			want: state.PhaseCompletedWithFailures, message: "1 of 2 repositories failed, 1 completed"},
		{name: "campaign, every repository failed", typ: "Campaign", memoPhase: "failed",
			result: status.CampaignState{Phase: status.CampaignFailed, Message: "2 of 2 repositories failed",
				Summary: status.Summary{Total: 2, Failed: 2}, Units: units(status.TaskFailed, status.TaskFailed)},
			want: state.PhaseFailed, message: "2 of 2 repositories failed"},
		{name: "campaign, aborted", typ: "Campaign", memoPhase: "aborted",
			result: status.CampaignState{Phase: status.CampaignAborted, Message: "1 of 2 repositories failed, 1 skipped; aborted",
				Summary: status.Summary{Total: 2, Failed: 1, Skipped: 1}, Units: units(status.TaskFailed, status.Skipped)},
			want: state.PhaseAborted, message: "1 of 2 repositories failed, 1 skipped; aborted"},
		{name: "campaign recorded before the final phases, one repository failed", typ: "Campaign", memoPhase: "completed",
			result: status.CampaignState{Phase: status.CampaignCompleted,
				Summary: status.Summary{Total: 2, Completed: 1, Failed: 1}, Units: units(status.TaskCompleted, status.TaskFailed)},
			want: state.PhaseCompletedWithFailures, message: "1 of 2 repositories failed, 1 completed"},
		{name: "task, every repository completed", typ: "Task",
			result: status.TaskResult{Phase: status.TaskCompleted, Repositories: []status.RepoResult{
				{Name: "a", Status: "success"}, {Name: "b", Status: "skipped"}}},
			want: state.PhaseCompleted, message: "2 repositories completed"},
		{name: "task, one of its repositories failed", typ: "Task",
			result: status.TaskResult{Phase: status.TaskCompleted, Repositories: []status.RepoResult{
				{Name: "a", Status: "success"}, {Name: "b", Status: "failed"}}},
			want: state.PhaseCompletedWithFailures, message: "1 of 2 repositories failed, 1 completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind := "campaign/"
			if c.typ == "Task" {
				kind = "task/"
			}
			memo := map[string]any{statetemporal.MemoID: "x", statetemporal.MemoKind: c.typ, statetemporal.MemoGeneration: int64(1)}
			if c.memoPhase != "" {
				memo[statetemporal.MemoPhase] = c.memoPhase
			}
			r := &statetemporal.Reader{Client: finished{wid: kind + "x", typ: c.typ, memo: memo, result: c.result}}
			got, err := r.Get(t.Context(), "x")
			if err != nil {
				t.Fatal(err)
			}
			if got.Phase != c.want || got.Message != c.message || !got.Phase.Done() {
				t.Errorf("recorded %s (%s), done %t; want %s (%s), done", got.Phase, got.Message, got.Phase.Done(), c.want, c.message)
			}
		})
	}
}

// fleet is a Temporal with several runs, finished or running: what
// Reader.Get reads of a campaign and of its units' tasks.
type fleet struct {
	client.Client
	runs    map[string]fleetRun // by workflow id
	results map[string]any      // finished workflows' results
	queries map[string]any      // running workflows' status answers
	gets    map[string]int      // results read, by workflow id
	// pending are running workflows' pending activities; describes
	// counts their descriptions.
	pending   map[string][]*workflowpb.PendingActivityInfo
	describes int
}

type fleetRun struct {
	typ    string
	status enumspb.WorkflowExecutionStatus
	memo   map[string]any
}

// info is what the server says of run wid.
func (f *fleet) info(wid string) (*workflowpb.WorkflowExecutionInfo, error) {
	run, ok := f.runs[wid]
	if !ok {
		return nil, serviceerror.NewNotFound(wid)
	}
	fields := map[string]*commonpb.Payload{}
	for k, v := range run.memo {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		if err != nil {
			return nil, err
		}
		fields[k] = p
	}
	return &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: wid, RunId: "run-of-" + wid},
		Type:      &commonpb.WorkflowType{Name: run.typ},
		Status:    run.status,
		Memo:      &commonpb.Memo{Fields: fields},
		StartTime: timestamppb.Now(),
	}, nil
}

func (f *fleet) DescribeWorkflowExecution(_ context.Context, wid, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	info, err := f.info(wid)
	if err != nil {
		return nil, err
	}
	f.describes++
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info, PendingActivities: f.pending[wid]}, nil
}

func (f *fleet) ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for wid := range f.runs {
		info, err := f.info(wid)
		if err != nil {
			return nil, err
		}
		resp.Executions = append(resp.Executions, info)
	}
	return resp, nil
}

func (f *fleet) GetWorkflow(_ context.Context, wid, _ string) client.WorkflowRun {
	f.gets[wid]++
	return result{v: f.results[wid]}
}

func (f *fleet) QueryWorkflow(_ context.Context, wid, _, _ string, _ ...any) (converter.EncodedValue, error) {
	v, ok := f.queries[wid]
	if !ok {
		return nil, serviceerror.NewNotFound(wid)
	}
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	if err != nil {
		return nil, err
	}
	return encoded{p}, nil
}

type encoded struct{ p *commonpb.Payloads }

func (e encoded) HasValue() bool { return e.p != nil }
func (e encoded) Get(v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(e.p, v)
}

// TestReaderReadsReports: a report-mode Task's reports come from its
// result; a report-mode campaign's from each unit's task, running or
// finished, with a row for each unit that has not run; a transform has
// none.
func TestReaderReadsReports(t *testing.T) {
	valid := &protocol.Report{Frontmatter: map[string]any{"score": 8}, Body: "# ok", Raw: "---\nscore: 8\n---\n# ok"}
	invalid := &protocol.Report{Frontmatter: map[string]any{"score": 11}, Raw: "---\nscore: 11\n---\n", ValidationErrors: []string{"/score: maximum: got 11, want 10"}}
	empty := &protocol.Report{Warning: protocol.ReportEmptyWarning}
	reportSpec := json.RawMessage(`{"kind":"Task","mode":"report"}`)
	memo := func(kind string, spec json.RawMessage) map[string]any {
		return map[string]any{statetemporal.MemoID: "audit", statetemporal.MemoKind: kind, statetemporal.MemoGeneration: int64(1), statetemporal.MemoSpec: spec}
	}
	threeRepos := []status.RepoResult{
		{Name: "a", Status: "success", Report: valid},
		{Name: "b", Status: "failed", Report: invalid, Error: "frontmatter does not match output.schema", ErrorKind: protocol.ReportSchemaInvalid},
		{Name: "c", Status: "success", Report: empty},
	}
	statuses := func(rs []state.Report) string {
		var parts []string
		for _, r := range rs {
			parts = append(parts, r.Unit+"/"+r.Repository+":"+string(r.Status))
		}
		return strings.Join(parts, " ")
	}

	t.Run("finished task", func(t *testing.T) {
		f := &fleet{gets: map[string]int{},
			runs:    map[string]fleetRun{"task/audit": {"Task", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, memo("Task", reportSpec)}},
			results: map[string]any{"task/audit": status.TaskResult{Phase: status.TaskCompleted, Repositories: threeRepos}}}
		c, err := (&statetemporal.Reader{Client: f}).Get(t.Context(), "audit")
		if err != nil {
			t.Fatal(err)
		}
		if got := statuses(c.Reports); got != "/a:valid /b:invalid /c:empty" {
			t.Fatalf("reports %s", got)
		}
		if b := c.Reports[1]; b.Raw != invalid.Raw || len(b.ValidationErrors) != 1 || string(b.Frontmatter) != `{"score":11}` {
			t.Errorf("invalid report recorded as %+v", b)
		}
	})

	t.Run("running task, reports so far", func(t *testing.T) {
		f := &fleet{gets: map[string]int{},
			runs: map[string]fleetRun{"task/audit": {"Task", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, memo("Task", reportSpec)}},
			queries: map[string]any{"task/audit": status.TaskState{Phase: status.TaskRunning, Result: &protocol.Result{Repositories: []protocol.RepositoryResult{
				{Name: "a", Status: "success", Report: valid},
				{Name: "b", Status: "running"},
			}}}}}
		c, err := (&statetemporal.Reader{Client: f}).Get(t.Context(), "audit")
		if err != nil {
			t.Fatal(err)
		}
		if got := statuses(c.Reports); got != "/a:valid /b:pending" {
			t.Fatalf("reports %s", got)
		}
	})

	t.Run("a transform has no reports", func(t *testing.T) {
		f := &fleet{gets: map[string]int{},
			runs:    map[string]fleetRun{"task/audit": {"Task", enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED, memo("Task", json.RawMessage(`{"mode":"transform"}`))}},
			results: map[string]any{"task/audit": status.TaskResult{Phase: status.TaskCompleted, Repositories: threeRepos}}}
		c, err := (&statetemporal.Reader{Client: f}).Get(t.Context(), "audit")
		if err != nil || len(c.Reports) != 0 {
			t.Fatalf("reports %+v, %v", c.Reports, err)
		}
	})

	t.Run("running campaign", func(t *testing.T) {
		f := &fleet{gets: map[string]int{},
			runs: map[string]fleetRun{"campaign/audit": {"Campaign", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
				memo("Campaign", json.RawMessage(`{"kind":"Campaign","template":{"mode":"report"}}`))}},
			queries: map[string]any{
				"campaign/audit": status.CampaignState{Phase: status.CampaignRunning, Units: []status.UnitResult{
					{Key: "team-a", Phase: status.TaskCompleted, WorkflowID: "campaign/audit/team-a@1"},
					{Key: "team-b", Phase: status.TaskRunning, WorkflowID: "campaign/audit/team-b@1"},
					{Key: "team-c", Phase: status.TaskFailed, WorkflowID: "campaign/audit/team-c@1", Error: "provision sandbox: no space left"},
					{Key: "team-d", Phase: "pending"},
				}},
				"campaign/audit/team-b@1": status.TaskState{Phase: status.TaskRunning, Result: &protocol.Result{Repositories: []protocol.RepositoryResult{
					{Name: "web", Status: "running", ForEach: []protocol.ForEachResult{{Name: "users-api", Report: valid}}}}}},
			},
			results: map[string]any{
				"campaign/audit/team-a@1": status.TaskResult{Phase: status.TaskCompleted, Repositories: threeRepos},
				"campaign/audit/team-c@1": status.TaskResult{Phase: status.TaskFailed, Error: "provision sandbox: no space left"},
			}}
		r := &statetemporal.Reader{Client: f, QueryCache: -1}
		for range 2 {
			c, err := r.Get(t.Context(), "audit")
			if err != nil {
				t.Fatal(err)
			}
			want := "team-a/a:valid team-a/b:invalid team-a/c:empty team-b/web:valid team-c/team-c:failed team-d/team-d:pending"
			if got := statuses(c.Reports); got != want {
				t.Fatalf("reports %s\nwant    %s", got, want)
			}
			if c.Reports[3].Target != "users-api" || c.Reports[4].Error != "provision sandbox: no space left" {
				t.Errorf("running unit's report %+v, failed unit's %+v", c.Reports[3], c.Reports[4])
			}
		}
		if f.gets["campaign/audit/team-a@1"] != 1 {
			t.Errorf("a finished unit's result was read %d times in two passes, want once", f.gets["campaign/audit/team-a@1"])
		}
	})
}

// TestReaderListsTheRepositoriesOfGroups: a finished campaign of groups
// reads as one row per repository ("group/name") with its own verdict and
// pull request, so that the status mirror counts and links repositories,
// not groups; a group that did not run lists its repositories with its
// status.
func TestReaderListsTheRepositoriesOfGroups(t *testing.T) {
	pr := func(name string) protocol.PullRequestInfo {
		return protocol.PullRequestInfo{URL: "https://git.example.com/acme/" + name + "/pulls/1", Branch: "auto/x"}
	}
	res := status.CampaignState{Phase: status.CampaignAborted,
		Summary: status.Summary{Total: 4, Completed: 1, Failed: 1, Skipped: 2},
		Units: []status.UnitResult{
			{Key: "g1", Phase: status.TaskCompleted, PRs: []protocol.PullRequestInfo{pr("a")},
				Repos: []status.UnitRepo{{Name: "a", Status: "success", PullRequest: pr("a").URL}, {Name: "b", Status: "failed"}}},
			{Key: "g2", Phase: status.Skipped, Repos: []status.UnitRepo{{Name: "c"}, {Name: "d"}}},
		}}
	memo := map[string]any{statetemporal.MemoID: "x", statetemporal.MemoKind: "Campaign", statetemporal.MemoGeneration: int64(1)}
	r := &statetemporal.Reader{Client: finished{wid: "campaign/x", typ: "Campaign", memo: memo, result: res}}
	got, err := r.Get(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	want := []state.Repo{
		{Name: "g1/a", Status: state.RepoCompleted, Branch: "auto/x", PullRequestURL: pr("a").URL, PullRequestState: state.PullRequestOpen},
		{Name: "g1/b", Status: state.RepoFailed},
		{Name: "g2/c", Status: state.RepoSkipped},
		{Name: "g2/d", Status: state.RepoSkipped},
	}
	if len(got.Repos) != len(want) {
		t.Fatalf("repositories %+v, want %+v", got.Repos, want)
	}
	for i := range want {
		if got.Repos[i] != want[i] {
			t.Errorf("repository %d: %+v, want %+v", i, got.Repos[i], want[i])
		}
	}
}

// A running campaign's units that a run of units has finished show as
// they ended, and its unit at work as running, from the run's last
// heartbeat, before the campaign takes them in: Get reads it in the
// description it makes anyway, List describes the run for it, and only
// when a unit is queued behind a run's first.
func TestReaderShowsUnitsARunFinished(t *testing.T) {
	pr := protocol.PullRequestInfo{URL: "https://git.example.com/acme/a/pulls/1", Branch: "auto/x"}
	beat, err := converter.GetDefaultDataConverter().ToPayloads(map[string]any{"done": []status.UnitOutcome{{
		Key: "a", Attempt: 1,
		Outcome: status.RunOutcome{Status: protocol.Status{Phase: protocol.PhaseComplete},
			Result: protocol.Result{Status: protocol.PhaseComplete, Repositories: []protocol.RepositoryResult{{Name: "a", Status: "success", PullRequest: &pr}}}},
	}}, "at_work": status.UnitRef{Key: "b", Attempt: 1}})
	if err != nil {
		t.Fatal(err)
	}
	memo := map[string]any{statetemporal.MemoID: "x", statetemporal.MemoKind: "Campaign", statetemporal.MemoGeneration: int64(1)}
	running := status.CampaignState{Phase: status.CampaignRunning, Summary: status.Summary{Total: 2, Running: 1},
		Units: []status.UnitResult{{Key: "a", Phase: status.TaskRunning, Attempts: 1}, {Key: "b", Phase: status.TaskQueued, Attempts: 1}}}
	f := &fleet{gets: map[string]int{},
		runs:    map[string]fleetRun{"campaign/x": {typ: "Campaign", status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, memo: memo}},
		queries: map[string]any{"campaign/x": running},
		pending: map[string][]*workflowpb.PendingActivityInfo{"campaign/x": {{ActivityType: &commonpb.ActivityType{Name: status.RunUnitsName}, HeartbeatDetails: beat}}},
	}
	r := &statetemporal.Reader{Client: f, QueryCache: -1}
	want := []state.Repo{
		{Name: "a", Status: state.RepoCompleted, Branch: "auto/x", PullRequestURL: pr.URL, PullRequestState: state.PullRequestOpen},
		{Name: "b", Status: state.RepoRunning},
	}
	read := map[string]func() (state.Campaign, error){
		"Get": func() (state.Campaign, error) { return r.Get(t.Context(), "x") },
		"List": func() (state.Campaign, error) {
			l, err := r.List(t.Context())
			if err != nil || len(l) != 1 {
				return state.Campaign{}, fmt.Errorf("listed %d runs: %v", len(l), err)
			}
			return l[0], nil
		},
	}
	for _, how := range []string{"Get", "List"} {
		f.queries["campaign/x"] = running
		f.describes = 0
		got, err := read[how]()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Repos, want) {
			t.Errorf("%s: repositories %+v, want %+v", how, got.Repos, want)
		}
		if f.describes != 1 {
			t.Errorf("%s described the run %d times, want once", how, f.describes)
		}

		// Nothing queued: no description for it.
		nothingQueued := running
		nothingQueued.Units = []status.UnitResult{running.Units[0], {Key: "b", Phase: status.TaskRunning, Attempts: 1}}
		f.queries["campaign/x"] = nothingQueued
		f.describes = 0
		if got, err = read[how](); err != nil {
			t.Fatal(err)
		}
		wantDescribes := map[string]int{"Get": 1, "List": 0}[how]
		if f.describes != wantDescribes || got.Repos[0].Status != state.RepoRunning {
			t.Errorf("%s with nothing queued: described %d times, a shows %s; want %d, running", how, f.describes, got.Repos[0].Status, wantDescribes)
		}
	}
}

// sameInstant lists two runs of campaign/c that visibility says started
// at the same instant, the ended first generation and the running
// second, in one order on the first list and the other after.
type sameInstant struct {
	*fleet
	lists int
}

func (s *sameInstant) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	s.lists++
	ended, err := s.info("campaign/c")
	if err != nil {
		return nil, err
	}
	running, err := s.info("campaign/c")
	if err != nil {
		return nil, err
	}
	gen2, err := converter.GetDefaultDataConverter().ToPayload(int64(2))
	if err != nil {
		return nil, err
	}
	running.Execution.RunId, running.Status, running.StartTime = "run-2", enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, ended.StartTime
	running.Memo.Fields[statetemporal.MemoGeneration] = gen2
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: []*workflowpb.WorkflowExecutionInfo{ended, running}}
	if s.lists%2 == 0 {
		slices.Reverse(resp.Executions)
	}
	return resp, nil
}

// Two runs of a definition that visibility gives one start time (its
// clock's resolution) are told apart by one rule, whichever order they
// are listed in, by a full list and by the incremental one after it:
// the running one is the latest, and plan and status show one
// generation.
func TestReaderTellsRunsStartedAtOneInstantApart(t *testing.T) {
	s := &sameInstant{fleet: &fleet{
		runs: map[string]fleetRun{"campaign/c": {typ: "Campaign", status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
			memo: map[string]any{statetemporal.MemoID: "c", statetemporal.MemoKind: "Campaign", statetemporal.MemoGeneration: int64(1)}}},
		queries: map[string]any{"campaign/c": status.CampaignState{ID: "c", Phase: status.CampaignRunning}},
		results: map[string]any{},
		gets:    map[string]int{},
	}}
	r := &statetemporal.Reader{Client: s, QueryTimeout: -1, QueryCache: -1}
	for i, how := range []string{"a full list", "an incremental list"} {
		got, err := r.List(t.Context())
		if err != nil || len(got) != 1 {
			t.Fatalf("%s: List = %+v, %v; want campaign c", how, got, err)
		}
		if got[0].Generation != 2 || got[0].Phase != state.PhaseRunning {
			t.Errorf("%s (listed in order %d): campaign c at generation %d, %s; want the running generation 2", how, i+1, got[0].Generation, got[0].Phase)
		}
	}
	if s.lists != 2 {
		t.Errorf("visibility was listed %d times; want 2", s.lists)
	}
}
