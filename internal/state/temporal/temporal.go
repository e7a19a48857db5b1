package temporal

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Memo keys the runs record (workflow.Memo*).
const (
	MemoKind       = status.MemoKind
	MemoID         = status.MemoID
	MemoDigest     = status.MemoDigest
	MemoFile       = status.MemoFile
	MemoSpec       = status.MemoSpec
	MemoGeneration = status.MemoGeneration
	MemoRevision   = status.MemoRevision
	MemoPhase      = status.MemoPhase
)

// Reader reads state from a Temporal namespace.
type Reader struct {
	Client    client.Client
	Namespace string
	// QueryTimeout bounds each status query of a running workflow
	// (default 5s; negative: only the context bounds it): with no worker
	// to answer, the phase from the memo is all there is, and a pass must
	// not wait for it. A command that shows one run waits as long as its
	// context lets it.
	QueryTimeout time.Duration

	// QueryCache is how long a running workflow's status answer is
	// reused (default 2s; negative: never). Each pass of the reconciler
	// reads every running run; within this window a burst of passes asks
	// each run once. What is reused can be that much behind, which the
	// reconciler tolerates: decisions name the result or record they are
	// about, and starts are refused for a running id.
	QueryCache time.Duration

	// FullListEvery is how often List reads every run from visibility
	// (default 5 minutes; negative: at every List). In between, List
	// reads only the runs that are running or closed since it last
	// read, and keeps the others as it last read them: at 1,000
	// finished campaigns, reading every run took about 115 ms of each
	// reconciler pass, most of it the runs' memos, which carry their
	// specs.
	FullListEvery time.Duration
	// VisibilityLag is how far before its last read such a List reads
	// closed runs again (default a minute): a run's close reaches
	// visibility a moment after it happened. A run read running that
	// visibility then shows neither running nor closed since has List
	// read every run.
	VisibilityLag time.Duration

	mu sync.Mutex
	// listed is the latest run of each workflow id, as the last List
	// read it; listedAt is when that read began, and fullAt when the
	// last read of every run did.
	listed           map[string]runRef
	listedAt, fullAt time.Time
	// answers caches status answers of running workflows.
	answers map[string]answer
	// closed caches what was read of finished runs, by run id: a finished
	// run never changes, and reading its result costs a round trip.
	closed map[string]state.Campaign
	// followers are the workflows whose pull requests' followers hold
	// what became of a run's pull requests, by run id: the run's own,
	// or its pages'.
	followers map[string][]string
	// finishedUnits caches the reports of a campaign's finished units, by
	// task workflow id (each unit's run has an id of its own).
	finishedUnits map[string][]state.Report
	// pages caches the states of campaigns' pages that ended, by page
	// workflow id (each run of a page has an id of its own).
	pages map[string]status.CampaignState
}

type answer struct {
	v  converter.EncodedValue
	at time.Time
}

func (r *Reader) query(ctx context.Context, wid, runID string) (converter.EncodedValue, error) {
	return r.ask(ctx, wid, runID, status.QueryStatus)
}

// ask is query with the query named name.
func (r *Reader) ask(ctx context.Context, wid, runID, name string) (converter.EncodedValue, error) {
	ttl := r.QueryCache
	if ttl == 0 {
		ttl = 2 * time.Second
	}
	key := wid + "\x00" + runID + "\x00" + name
	if ttl > 0 {
		r.mu.Lock()
		a, ok := r.answers[key]
		r.mu.Unlock()
		if ok && time.Since(a.at) < ttl {
			return a.v, nil
		}
	}
	t := r.QueryTimeout
	if t == 0 {
		t = 5 * time.Second
	}
	qctx := ctx
	if t > 0 {
		var cancel context.CancelFunc
		qctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	at := time.Now()
	v, err := r.Client.QueryWorkflow(qctx, wid, runID, name)
	if err != nil || ttl < 0 {
		return v, err
	}
	r.mu.Lock()
	if r.answers == nil {
		r.answers = map[string]answer{}
	}
	for k, a := range r.answers {
		if time.Since(a.at) >= ttl {
			delete(r.answers, k)
		}
	}
	r.answers[key] = answer{v: v, at: at}
	r.mu.Unlock()
	return v, nil
}

var _ state.Reader = (*Reader)(nil)

// Get returns the latest run of the definition id.
func (r *Reader) Get(ctx context.Context, id string) (state.Campaign, error) {
	for _, wid := range []string{"campaign/" + id, "task/" + id} {
		c, err := r.GetRun(ctx, wid)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		return c, err
	}
	return state.Campaign{}, fmt.Errorf("%s: %w", id, state.ErrNotFound)
}

// GetRun returns the latest run of the workflow wid ("campaign/<id>" or
// "task/<id>"), or an error wrapping state.ErrNotFound.
func (r *Reader) GetRun(ctx context.Context, wid string) (state.Campaign, error) {
	d, err := r.Client.DescribeWorkflowExecution(ctx, wid, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return state.Campaign{}, fmt.Errorf("%s: %w", wid, state.ErrNotFound)
	}
	if err != nil {
		return state.Campaign{}, fmt.Errorf("describe %s: %w", wid, err)
	}
	info := d.WorkflowExecutionInfo
	if _, ok := info.GetMemo().GetFields()[MemoID]; !ok {
		return state.Campaign{}, fmt.Errorf("%s was not started by fleetlift (its memo names no definition)", wid)
	}
	return r.campaign(ctx, runRef{wid: info.Execution.WorkflowId, run: info.Execution.RunId, typ: info.Type.Name, status: info.Status,
		memo: info.GetMemo().GetFields(), described: true, pending: d.PendingActivities})
}

// List returns the latest run of every definition, sorted by id.
func (r *Reader) List(ctx context.Context) ([]state.Campaign, error) {
	runs, err := r.latestRuns(ctx)
	if err != nil {
		return nil, err
	}
	// Each running run is asked for its status (and each of its waiting
	// tasks for theirs): ask several at once.
	out := make([]state.Campaign, len(runs))
	errs := make([]error, len(runs))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, ref := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = r.campaign(ctx, ref)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b state.Campaign) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// latestRuns is the latest run of every definition: every run read from
// visibility, or, within FullListEvery of the last such read, the runs
// last read updated with those running or closed since.
func (r *Reader) latestRuns(ctx context.Context) ([]runRef, error) {
	now := time.Now()
	r.mu.Lock()
	listed, since, fullAt := r.listed, r.listedAt, r.fullAt
	r.mu.Unlock()
	every := cmp.Or(r.FullListEvery, 5*time.Minute)
	var found map[string]runRef
	if listed != nil && every > 0 && now.Sub(fullAt) < every {
		query := fmt.Sprintf("ExecutionStatus = 'Running' OR CloseTime >= '%s'", since.Add(-cmp.Or(r.VisibilityLag, time.Minute)).UTC().Format(time.RFC3339Nano))
		changed, err := r.listRuns(ctx, query)
		if err != nil {
			return nil, err
		}
		found = maps.Clone(listed)
		for wid, ref := range changed {
			if old, ok := found[wid]; !ok || ref.newerThan(old) {
				found[wid] = ref
			}
		}
		for wid, ref := range listed {
			if _, ok := changed[wid]; !ok && ref.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				// A run read running that is neither running nor
				// closed since: visibility lags behind its close, or
				// it was deleted. Read every run.
				found = nil
				break
			}
		}
	}
	if found == nil {
		var err error
		if found, err = r.listRuns(ctx, ""); err != nil {
			return nil, err
		}
		fullAt = now
	}
	r.mu.Lock()
	r.listed, r.listedAt, r.fullAt = found, now, fullAt
	r.mu.Unlock()
	return slices.Collect(maps.Values(found)), nil
}

// listRuns reads the runs visibility holds that query selects (all, when
// empty) and returns the latest of each definition's.
func (r *Reader) listRuns(ctx context.Context, query string) (map[string]runRef, error) {
	latest := map[string]runRef{}
	var token []byte
	for {
		resp, err := r.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: r.Namespace, PageSize: 1000, NextPageToken: token, Query: query})
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.Executions {
			wid := e.Execution.WorkflowId
			if e.ParentExecution != nil || !(strings.HasPrefix(wid, "campaign/") || strings.HasPrefix(wid, "task/")) {
				continue
			}
			if _, ok := e.GetMemo().GetFields()[MemoID]; !ok {
				continue
			}
			ref := runRef{wid: wid, run: e.Execution.RunId, typ: e.Type.Name, status: e.Status, memo: e.GetMemo().GetFields(), start: e.StartTime.AsTime().UnixNano()}
			if old, ok := latest[wid]; !ok || ref.newerThan(old) {
				latest[wid] = ref
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return latest, nil
		}
	}
}

type runRef struct {
	wid, run, typ string
	status        enumspb.WorkflowExecutionStatus
	memo          map[string]*commonpb.Payload
	start         int64
	// described says that the run's description was read (GetRun), with
	// its pending activities; a listed run's were not.
	described bool
	pending   []*workflowpb.PendingActivityInfo
}

// newerThan reports whether ref is a later run of its workflow than old,
// the one rule a full list and an incremental one both go by: started
// later; at the same instant (a clock's resolution), the one still
// running, then the one with the greater run id, so that whichever order
// visibility lists them in, the same run is the latest.
func (ref runRef) newerThan(old runRef) bool {
	if ref.start != old.start {
		return ref.start > old.start
	}
	refRunning, oldRunning := ref.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, old.status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	if refRunning != oldRunning {
		return refRunning
	}
	return ref.run > old.run
}

func (r *Reader) campaign(ctx context.Context, ref runRef) (state.Campaign, error) {
	runID := ref.run
	finished := ref.status != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING && ref.status != enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED
	if finished {
		r.mu.Lock()
		c, ok := r.closed[runID]
		r.mu.Unlock()
		if ok {
			c = c.Clone()
			// What became of its pull requests goes on changing.
			r.withPullRequests(ctx, &c)
			return c, nil
		}
	}
	c, err := r.read(ctx, ref)
	if err == nil && finished {
		r.mu.Lock()
		if r.closed == nil {
			r.closed = map[string]state.Campaign{}
		}
		r.closed[runID] = c.Clone()
		r.mu.Unlock()
	}
	if err == nil {
		r.withPullRequests(ctx, &c)
	}
	return c, err
}

func (r *Reader) read(ctx context.Context, ref runRef) (state.Campaign, error) {
	wid, runID, execStatus, memo := ref.wid, ref.run, ref.status, ref.memo
	dc := payload.Converter
	str := func(k string) string {
		var s string
		if p, ok := memo[k]; ok {
			_ = dc.FromPayload(p, &s)
		}
		return s
	}
	c := state.Campaign{
		ID: str(MemoID), Kind: state.Kind(str(MemoKind)), File: str(MemoFile), SpecDigest: str(MemoDigest),
		SourceRevision: str(MemoRevision), WorkflowID: wid, RunID: runID,
	}
	if p, ok := memo[MemoGeneration]; ok {
		_ = dc.FromPayload(p, &c.Generation)
	}
	reports := false
	if p, ok := memo[MemoSpec]; ok {
		var raw json.RawMessage
		if err := dc.FromPayload(p, &raw); err == nil {
			c.Spec = raw
			var policy struct {
				Suspend    bool `json:"suspend"`
				SyncPolicy struct {
					Prune bool `json:"prune"`
				} `json:"sync_policy"`
			}
			if json.Unmarshal(raw, &policy) == nil {
				c.Suspended, c.Prune = policy.Suspend, policy.SyncPolicy.Prune
			}
			reports = state.IsReport(raw)
		}
	}
	c.Phase = phaseOf(execStatus, str(MemoPhase))
	if err := r.repos(ctx, &c, ref, reports); err != nil {
		return state.Campaign{}, err
	}
	return c, c.Validate()
}

// withRunsProgress is st with what the run's runs of units in flight
// have done (status.WithRunsProgress), from their heartbeats among its
// pending activities: those of its description when it was read, else
// read when st has units queued behind a run's first. Should they not be
// read, st is still right, only later.
func (r *Reader) withRunsProgress(ctx context.Context, ref runRef, st status.CampaignState) status.CampaignState {
	if !slices.ContainsFunc(st.Units, func(u status.UnitResult) bool { return u.Phase == status.TaskQueued }) {
		return st
	}
	pending := ref.pending
	if !ref.described {
		d, err := r.Client.DescribeWorkflowExecution(ctx, ref.wid, ref.run)
		if err != nil {
			return st
		}
		pending = d.PendingActivities
	}
	return status.WithRunsProgress(st, RunsProgressOf(pending))
}

// repos fills in per-repository outcomes, and the reports of a report-mode
// run: from the status query of a running workflow, or the result of a
// completed one.
func (r *Reader) repos(ctx context.Context, c *state.Campaign, ref runRef, reports bool) error {
	typ, execStatus := ref.typ, ref.status
	var get func(any) error
	switch execStatus {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		v, err := r.query(ctx, c.WorkflowID, c.RunID)
		if err != nil {
			// No worker to answer: the phase is still known.
			return nil
		}
		get = v.Get
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		run := r.Client.GetWorkflow(ctx, c.WorkflowID, c.RunID)
		get = func(v any) error { return run.Get(ctx, v) }
	default:
		return nil
	}
	if typ == "Campaign" {
		var st status.CampaignState
		if err := get(&st); err != nil {
			return fmt.Errorf("read %s: %w", c.WorkflowID, err)
		}
		running := execStatus == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
		// Whose pull requests are followed: the run's, or its pages'.
		followers := []string{c.WorkflowID}
		if len(st.Pages) > 0 {
			followers = followers[:0]
			for _, p := range st.Pages {
				if p.WorkflowID != "" {
					followers = append(followers, p.WorkflowID)
				}
			}
		}
		st, err := r.WithPages(ctx, st)
		if err != nil {
			return err
		}
		if running {
			c.Suspended, c.AwaitingPieces = st.Suspended, st.AwaitingPieces
			st = r.withRunsProgress(ctx, ref, st)
		} else {
			// How it ended, also for a run recorded before campaigns
			// told their endings apart.
			st = status.Final(st)
		}
		c.Phase = campaignPhase(st.Phase)
		if !running || st.Phase == status.CampaignPaused {
			// Why it paused, or how it ended; not what changes by the
			// second while it runs (the pull request budget's wait).
			c.Message = st.Message
		}
		// The records carried out: the campaign's own (continue, abort,
		// retry) and its units' (approve, steer, reject).
		c.AppliedApprovals = slices.Clone(st.Applied)
		var used *protocol.ModelUsage
		usedRepos := 0
		for _, u := range st.Units {
			if u.ModelUsage != nil {
				used, usedRepos = used.Plus(u.ModelUsage), usedRepos+max(len(u.Repos), 1)
			}
			repo := state.Repo{Name: u.Key, Status: unitStatus(u.Phase)}
			if len(u.PRs) > 0 {
				repo.Branch, repo.PullRequestURL, repo.PullRequestState = u.PRs[0].Branch, u.PRs[0].URL, state.PullRequestOpen
			}
			c.AppliedApprovals = append(c.AppliedApprovals, u.Applied...)
			var live *status.TaskState
			if running && u.Phase == status.TaskRunning && u.WorkflowID != "" {
				// A running unit may be waiting for approval, or have
				// carried out records the campaign hears of only when it
				// ends: ask it.
				if ts, ok := r.task(ctx, u.WorkflowID); ok {
					live = &ts
					c.AppliedApprovals = append(c.AppliedApprovals, ts.Applied...)
					if p, ok := pending(c.ID+"/"+u.Key, u.WorkflowID, ts); ok {
						repo.Status = state.RepoAwaitingApproval
						c.PendingApprovals = append(c.PendingApprovals, p)
					}
				}
			}
			c.Repos = append(c.Repos, groupRepos(u, repo)...)
			if reports {
				c.Reports = append(c.Reports, r.unitReports(ctx, u, live, running)...)
			}
		}
		c.Usage = usageOf(used, usedRepos)
		r.setFollowers(c.RunID, followers)
		if running && len(c.PendingApprovals) > 0 && c.Phase == state.PhaseRunning {
			c.Phase = state.PhaseAwaitingApproval
		}
	} else {
		var repos []status.RepoResult
		if execStatus == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			var st status.TaskState
			if err := get(&st); err != nil {
				return fmt.Errorf("read %s: %w", c.WorkflowID, err)
			}
			if p, ok := pending(c.ID, c.WorkflowID, st); ok {
				c.Phase = state.PhaseAwaitingApproval
				c.PendingApprovals = append(c.PendingApprovals, p)
			}
			c.AppliedApprovals = st.Applied
			if st.Result != nil {
				c.Usage = usageOf(st.Result.ModelUsage, len(st.Result.Repositories))
				for _, rr := range st.Result.Repositories {
					repos = append(repos, status.RepoResult{Name: rr.Name, Status: rr.Status, PullRequest: rr.PullRequest,
						Report: rr.Report, ForEach: rr.ForEach, Error: rr.Error, ErrorKind: rr.ErrorKind})
				}
			}
		} else {
			var res status.TaskResult
			if err := get(&res); err != nil {
				return fmt.Errorf("read %s: %w", c.WorkflowID, err)
			}
			repos = res.Repositories
			c.Usage = usageOf(res.ModelUsage, len(res.Repositories))
			c.AppliedApprovals = res.Applied
			c.Phase = taskPhase(res)
			if len(res.Repositories) > 0 {
				c.Message = taskSummary(res).Describe()
			}
		}
		for _, rr := range repos {
			repo := state.Repo{Name: rr.Name, Status: agentStatus(rr.Status)}
			if rr.PullRequest != nil {
				repo.Branch, repo.PullRequestURL, repo.PullRequestState = rr.PullRequest.Branch, rr.PullRequest.URL, state.PullRequestOpen
			}
			c.Repos = append(c.Repos, repo)
		}
		r.setFollowers(c.RunID, []string{c.WorkflowID})
		if reports {
			c.Reports = repoReports("", repos)
		}
	}
	slices.SortFunc(c.Repos, func(a, b state.Repo) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(c.PendingApprovals, func(a, b state.PendingApproval) int { return strings.Compare(a.Target, b.Target) })
	return nil
}

// unitReports are the reports of campaign unit u: from its task's
// status (live) while it runs, from its task's result once it finished,
// or a row saying it has not run. While the campaign runs (keep), a
// finished task's reports are kept, as a finished task never changes;
// once the campaign has finished, what is read of it is kept whole (see
// closed) and its units' are let go.
func (r *Reader) unitReports(ctx context.Context, u status.UnitResult, live *status.TaskState, keep bool) []state.Report {
	row := func(s state.ReportStatus, err string) []state.Report {
		return []state.Report{{Unit: u.Key, Repository: u.Key, Status: s, Error: err}}
	}
	switch u.Phase {
	case status.Skipped:
		return row(state.ReportSkipped, "")
	case status.TaskCompleted, status.TaskFailed, status.TaskCancelled:
	default:
		if live != nil && live.Result != nil {
			var repos []status.RepoResult
			for _, rr := range live.Result.Repositories {
				repos = append(repos, status.RepoResult{Name: rr.Name, Status: rr.Status, Report: rr.Report, ForEach: rr.ForEach,
					Error: rr.Error, ErrorKind: rr.ErrorKind})
			}
			if out := repoReports(u.Key, repos); len(out) > 0 {
				return out
			}
		}
		return row(state.ReportPending, "")
	}
	failed := func(err string) []state.Report {
		if u.Phase == status.TaskCancelled && err == "" {
			err = "cancelled"
		}
		return row(state.ReportFailed, err)
	}
	if u.WorkflowID == "" {
		return failed(u.Error)
	}
	r.mu.Lock()
	cached, ok := r.finishedUnits[u.WorkflowID]
	if !keep {
		delete(r.finishedUnits, u.WorkflowID)
	}
	r.mu.Unlock()
	if ok {
		return slices.Clone(cached)
	}
	var res status.TaskResult
	if err := r.Client.GetWorkflow(ctx, u.WorkflowID, "").Get(ctx, &res); err != nil {
		if u.Error != "" {
			return failed(u.Error)
		}
		return failed(fmt.Sprintf("the result of %s cannot be read: %v", u.WorkflowID, err))
	}
	out := repoReports(u.Key, res.Repositories)
	if len(out) == 0 {
		out = failed(cmp.Or(res.Error, u.Error))
	}
	if keep {
		r.mu.Lock()
		if r.finishedUnits == nil {
			r.finishedUnits = map[string][]state.Report{}
		}
		r.finishedUnits[u.WorkflowID] = slices.Clone(out)
		r.mu.Unlock()
	}
	return out
}

// repoReports are the reports of a task's repositories, from unit.
func repoReports(unit string, repos []status.RepoResult) []state.Report {
	var out []state.Report
	for _, rr := range repos {
		out = append(out, reportsOf(reportOutcome{Unit: unit, Repository: rr.Name, Status: rr.Status,
			Error: rr.Error, ErrorKind: rr.ErrorKind, Report: rr.Report, ForEach: rr.ForEach})...)
	}
	return out
}

// pending asks the task workflow wid whether it awaits approval.
func (r *Reader) task(ctx context.Context, wid string) (status.TaskState, bool) {
	v, err := r.query(ctx, wid, "")
	if err != nil {
		return status.TaskState{}, false
	}
	var st status.TaskState
	if v.Get(&st) != nil {
		return status.TaskState{}, false
	}
	return st, true
}

// pending is what the task in st awaits approval for, if anything.
func pending(target, wid string, st status.TaskState) (state.PendingApproval, bool) {
	if st.Phase != status.TaskAwaitingApproval || st.ResultDigest == "" {
		return state.PendingApproval{}, false
	}
	return pendingOf(target, wid, st), true
}

func pendingOf(target, wid string, st status.TaskState) state.PendingApproval {
	p := state.PendingApproval{Target: target, ResultDigest: st.ResultDigest, WorkflowID: wid, Since: st.AwaitingSince}
	if st.Result != nil {
		for _, rr := range st.Result.Repositories {
			pr := state.PendingRepo{Name: rr.Name, Report: rr.Report != nil}
			for _, d := range rr.Diffs {
				pr.Files = append(pr.Files, state.PendingFile{Path: d.Path, Additions: d.Additions, Deletions: d.Deletions})
			}
			p.Repos = append(p.Repos, pr)
		}
	}
	return p
}

func phaseOf(s enumspb.WorkflowExecutionStatus, memoPhase string) state.Phase {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		if memoPhase == string(status.CampaignPaused) {
			return state.PhasePaused
		}
		return state.PhaseRunning
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		switch p := status.CampaignPhase(memoPhase); p {
		case status.CampaignAborted, status.CampaignCompletedWithFailures, status.CampaignFailed:
			return campaignPhase(p)
		}
		return state.PhaseCompleted
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED, enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return state.PhaseFailed
	}
	return state.PhaseCancelled
}

func campaignPhase(p status.CampaignPhase) state.Phase {
	switch p {
	case status.CampaignPaused:
		return state.PhasePaused
	case status.CampaignAborted:
		return state.PhaseAborted
	case status.CampaignCompleted:
		return state.PhaseCompleted
	case status.CampaignCompletedWithFailures:
		return state.PhaseCompletedWithFailures
	case status.CampaignFailed:
		return state.PhaseFailed
	}
	return state.PhaseRunning
}

// taskPhase is how a finished task ended: completed only when none of its
// repositories failed (the agent fails a task only when all of them did).
func taskPhase(res status.TaskResult) state.Phase {
	switch res.Phase {
	case status.TaskFailed:
		return state.PhaseFailed
	case status.TaskCancelled:
		return state.PhaseCancelled
	}
	for _, rr := range res.Repositories {
		if rr.Status == "failed" {
			return state.PhaseCompletedWithFailures
		}
	}
	return state.PhaseCompleted
}

// taskSummary counts a finished task's repositories as a campaign counts
// its units: one with nothing to change (skipped by the agent) completed.
func taskSummary(res status.TaskResult) status.Summary {
	s := status.Summary{Total: len(res.Repositories)}
	for _, rr := range res.Repositories {
		switch agentStatus(rr.Status) {
		case state.RepoCompleted, state.RepoSkipped:
			s.Completed++
		case state.RepoFailed:
			s.Failed++
		}
	}
	return s
}

func unitStatus(p status.TaskPhase) state.RepoStatus {
	switch p {
	case status.TaskCompleted:
		return state.RepoCompleted
	case status.TaskFailed:
		return state.RepoFailed
	case status.TaskCancelled:
		return state.RepoCancelled
	case status.Skipped:
		return state.RepoSkipped
	case status.TaskAwaitingApproval:
		return state.RepoAwaitingApproval
	case "pending", status.TaskQueued:
		// A queued unit waits, in a run of units, for those before it.
		return state.RepoPending
	}
	return state.RepoRunning
}

// agentStatus maps the agent's per-repository status (success, failed,
// skipped) to the recorded one.
// groupRepos is what happened in each repository of unit u, a group, as
// "group/name" rows: the agent's verdict once the group completed,
// otherwise the group's own status (unit). A unit of one repository is
// unit alone.
func groupRepos(u status.UnitResult, unit state.Repo) []state.Repo {
	if len(u.Repos) == 0 {
		return []state.Repo{unit}
	}
	out := make([]state.Repo, 0, len(u.Repos))
	for _, ur := range u.Repos {
		repo := state.Repo{Name: u.Key + "/" + ur.Name, Status: unit.Status}
		if u.Phase == status.TaskCompleted && ur.Status == "failed" {
			repo.Status = state.RepoFailed
		}
		for _, pr := range u.PRs {
			if ur.PullRequest != "" && pr.URL == ur.PullRequest {
				repo.Branch, repo.PullRequestURL, repo.PullRequestState = pr.Branch, pr.URL, state.PullRequestOpen
			}
		}
		out = append(out, repo)
	}
	return out
}

func agentStatus(s string) state.RepoStatus {
	switch s {
	case "success":
		return state.RepoCompleted
	case "failed":
		return state.RepoFailed
	case "skipped":
		return state.RepoSkipped
	}
	return state.RepoRunning
}

// usageOf is the state's record of model usage u of a run whose tasks
// that called a model worked on repos repositories; nil when u is.
func usageOf(u *protocol.ModelUsage, repos int) *state.Usage {
	if u == nil {
		return nil
	}
	return &state.Usage{Requests: u.Requests, Tokens: u.Tokens(), CostUSD: u.CostUSD, Unpriced: u.Unpriced, Repositories: max(repos, 1)}
}
