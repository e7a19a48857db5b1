package activity

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	sdkactivity "go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/status"
)

// DefaultFollowEvery is how often a run's pull requests are read from
// their forges when Activities.FollowEvery is unset.
const DefaultFollowEvery = 5 * time.Minute

// FollowHeartbeat is RefreshPullRequests' heartbeat timeout.
const FollowHeartbeat = 20 * time.Second

// followReadTimeout bounds the read of one pull request, its waits for
// the forge's budget included: a forge that holds a request (Gitea on
// SQLite may, for a pull request it is merging) costs that read, which
// the next pass makes again, not the pass.
const followReadTimeout = 30 * time.Second

// followParallel is how many pull requests one refresh reads at once;
// the forge's budget paces them further.
const followParallel = 4

// RefreshInput asks RefreshPullRequests about the pull requests of the
// run Source (a workflow id), Known being what was read of them before.
type RefreshInput struct {
	Source string              `json:"source"`
	Known  []status.FollowedPR `json:"known,omitempty"`
	// Hinted: ask the forges only about the pull requests at Only (by
	// URL) and those the run opened since; the others known are kept
	// as they were.
	Hinted bool     `json:"hinted,omitempty"`
	Only   []string `json:"only,omitempty"`
}

// RefreshOutcome is what RefreshPullRequests found.
type RefreshOutcome struct {
	PRs []status.FollowedPR `json:"prs,omitempty"`
	// SourceEnded: the source's latest run has ended, so no pull
	// request will join.
	SourceEnded bool `json:"source_ended,omitempty"`
	// Every is when to read them again: the worker's setting.
	Every time.Duration `json:"every"`
	// Merge is the source's pull_request.merge, as it is now.
	Merge *status.MergePolicy `json:"merge,omitempty"`
	// KeepCurrent is the source's pull_request.keep_current, as it is
	// now (empty: never).
	KeepCurrent string `json:"keep_current,omitempty"`
	// Done is the source's done_when, as it is now.
	Done *status.DoneCheck `json:"done,omitempty"`
	// SupersededBy, for a page of a campaign, is the later run of the
	// page (run again, or its campaign started again) that follows its
	// units' pull requests now.
	SupersededBy string `json:"superseded_by,omitempty"`
}

// RefreshPullRequests reads which pull requests the run in.Source has
// opened (its status while it runs, its result once it ended) and asks
// each one's forge what became of it, with this worker's forges and
// credentials. A merged pull request is not asked about again. A forge
// that cannot be read leaves that pull request as it was, with the
// reason in its Error; nothing here fails the follower.
func (a *Activities) RefreshPullRequests(ctx context.Context, in RefreshInput) (RefreshOutcome, error) {
	out := RefreshOutcome{Every: a.FollowEvery}
	if out.Every <= 0 {
		out.Every = DefaultFollowEvery
	}
	opened, policy, ended, err := sourcePRs(ctx, sdkactivity.GetClient(ctx), in.Source)
	if err != nil {
		// The source cannot be read now (no worker answers its query):
		// follow what is known.
		sdkactivity.GetLogger(ctx).Warn("pull requests of the run not read", "source", in.Source, "error", err)
		opened = in.Known
	}
	out.SourceEnded, out.Merge, out.KeepCurrent, out.Done = ended, policy.Merge, policy.KeepCurrent, policy.Done
	if out.SupersededBy = policy.SupersededBy; out.SupersededBy != "" {
		return out, nil
	}
	known := map[string]status.FollowedPR{}
	for _, k := range in.Known {
		known[k.URL] = k
	}
	out.PRs = make([]status.FollowedPR, len(opened))
	// Heartbeats go on while reads wait for the forge's budget: a worker
	// that stops mid-refresh is noticed within FollowHeartbeat.
	stop := beatEvery(ctx, FollowHeartbeat/4)
	defer stop()
	var wg sync.WaitGroup
	sem := make(chan struct{}, followParallel)
	for i, p := range opened {
		if k, ok := known[p.URL]; ok && !(k.Settled() && p.Commit != "" && k.Commit != "" && p.Commit != k.Commit) {
			// What the run says of it (its latest push) over what was
			// known, and what was read of it before. (One that merged
			// and was proposed again since, as the local forge names a
			// branch pushed anew, is a new pull request: read afresh.)
			k.Unit, k.Repo, k.PullRequestInfo = p.Unit, p.Repo, p.PullRequestInfo
			p = k
		}
		out.PRs[i] = p
		_, wasKnown := known[p.URL]
		if p.Settled() || in.Hinted && wasKnown && !slices.Contains(in.Only, p.URL) {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			a.readPR(ctx, &out.PRs[i])
		}()
	}
	wg.Wait()
	return out, ctx.Err()
}

// readPR asks p's forge about it and records the answer in p, within
// followReadTimeout: a forge that does not answer fails this read, not
// the pass.
//
// On a forge with stamps (forge.Stamper), a pull request read before
// without error whose stamp is still the one of that read is not read
// again: what was read stands.
func (a *Activities) readPR(ctx context.Context, p *status.FollowedPR) {
	rctx, cancel := context.WithTimeout(ctx, followReadTimeout)
	defer cancel()
	f, err := a.follower(*p)
	if err == nil && p.Error == "" && p.State != "" && p.Stamp != "" && prStamp(rctx, f, p) == p.Stamp {
		p.CheckedAt = time.Now().UTC()
		return
	}
	var st *forge.PullRequestStatus
	if err == nil {
		st, err = prStatus(rctx, f, p)
	}
	p.CheckedAt = time.Now().UTC()
	if err != nil {
		p.Error = git.Redact(err.Error())
		return
	}
	p.Error = ""
	p.PullRequestStatus = *st
	// A head other than what fleetlift pushed: someone else pushed.
	p.Foreign = st.State == forge.StateOpen && (p.NotOverwritten != "" || p.Commit != "" && st.Head != "" && st.Head != p.Commit)
}

// prStamp is p's stamp on its forge f, "" when f has none, p's base is
// not known, or the stamp could not be taken (the read says why).
func prStamp(ctx context.Context, f forge.Forge, p *status.FollowedPR) string {
	sf, ok := f.(forge.Stamper)
	if !ok || p.Base == "" {
		return ""
	}
	stamp, err := sf.PullRequestStamp(ctx, p.Repository, p.Number, p.Branch, p.Base)
	if err != nil {
		return ""
	}
	return stamp
}

// prStatus is what p's forge f says of it.
func prStatus(ctx context.Context, f forge.Forge, p *status.FollowedPR) (*forge.PullRequestStatus, error) {
	fl, ok := f.(forge.Follower)
	if !ok {
		return nil, fmt.Errorf("forge %s cannot say what became of its pull requests", f.Name())
	}
	return fl.PullRequestStatus(ctx, p.Repository, p.Number, p.Branch)
}

// follower is the worker's forge that opened p, provided p's repository
// is one the worker may use.
func (a *Activities) follower(p status.FollowedPR) (forge.Forge, error) {
	if a.Forges == nil {
		return nil, errors.New("this worker has no forge")
	}
	if p.Repository == "" {
		return nil, fmt.Errorf("pull request %s names no repository", p.URL)
	}
	return a.forgeOf(p.Forge, p.Repository)
}

// forgeOf is the worker's forge called name, for repository, provided
// the repository is one the worker may use (git.CheckLocal).
func (a *Activities) forgeOf(name, repository string) (forge.Forge, error) {
	f, err := a.Forges(name)
	if err == nil && f == nil {
		err = fmt.Errorf("forge %q: this worker has none", name)
	}
	if err != nil {
		return nil, err
	}
	if err := git.CheckLocal(repository, a.FileRoots); err != nil {
		return nil, err
	}
	return f, nil
}

// policy is what a run's definition says becomes of its pull requests,
// and, for a page of a campaign, whether a later run of the page
// follows them now.
type policy struct {
	Merge        *status.MergePolicy
	KeepCurrent  string
	Done         *status.DoneCheck
	SupersededBy string
}

// sourcePRs lists the pull requests the latest run of workflow source
// opened, with its policy, and says whether that run has ended.
func sourcePRs(ctx context.Context, c client.Client, source string) ([]status.FollowedPR, policy, bool, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, source, "")
	if err != nil {
		return nil, policy{}, false, err
	}
	info := desc.GetWorkflowExecutionInfo()
	running := info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	runID := info.GetExecution().GetRunId()
	get := func(v any) error {
		if running {
			q, err := c.QueryWorkflow(ctx, source, runID, status.QueryStatus)
			if err != nil {
				return err
			}
			return q.Get(v)
		}
		return c.GetWorkflow(ctx, source, runID).Get(ctx, v)
	}
	if !running && info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		// Failed, cancelled, terminated or timed out: no result to read.
		return nil, policy{}, true, errors.New("the run ended without a result")
	}
	switch typ := info.GetType().GetName(); typ {
	case "Task":
		if running {
			var st status.TaskState
			if err := get(&st); err != nil {
				return nil, policy{}, false, err
			}
			var repos []status.RepoResult
			if st.Result != nil {
				for _, rr := range st.Result.Repositories {
					repos = append(repos, status.RepoResult{Name: rr.Name, PullRequest: rr.PullRequest})
				}
			}
			return status.RepoPRs(repos), policy{Merge: st.Merge, KeepCurrent: st.KeepCurrent, Done: st.Done}, false, nil
		}
		var res status.TaskResult
		if err := get(&res); err != nil {
			return nil, policy{}, true, err
		}
		return status.RepoPRs(res.Repositories), policy{Merge: res.Merge, KeepCurrent: res.KeepCurrent, Done: res.Done}, true, nil
	case "Campaign", "CampaignPage":
		var st status.CampaignState
		if typ == "CampaignPage" && !running {
			var res struct {
				State status.CampaignState `json:"state"`
			}
			err = get(&res)
			st = res.State
		} else {
			err = get(&st)
		}
		if err != nil {
			return nil, policy{}, !running, err
		}
		pol := policy{Merge: st.Merge, KeepCurrent: st.KeepCurrent, Done: st.Done}
		if typ == "CampaignPage" && !running {
			pol.SupersededBy = supersededBy(ctx, c, source, info.GetParentExecution().GetWorkflowId())
		}
		return status.UnitPRs(st.Units), pol, !running, nil
	default:
		return nil, policy{}, true, fmt.Errorf("workflow %s is a %s, which opens no pull requests", source, typ)
	}
}

// supersededBy is the later run of page (a page of campaign) that holds
// its units now, or "" when page is the latest run of its page or that
// cannot be told: the campaign's latest run has run the page again
// (retry, a change made again), or was started again and has started
// its page.
func supersededBy(ctx context.Context, c client.Client, page, campaign string) string {
	i, ok := status.PageIndex(page)
	if !ok || campaign == "" {
		return ""
	}
	var st status.CampaignState
	desc, err := c.DescribeWorkflowExecution(ctx, campaign, "")
	if err != nil {
		return ""
	}
	switch desc.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		q, err := c.QueryWorkflow(ctx, campaign, "", status.QueryStatus)
		if err != nil || q.Get(&st) != nil {
			return ""
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		if c.GetWorkflow(ctx, campaign, "").Get(ctx, &st) != nil {
			return ""
		}
	default:
		return ""
	}
	if i >= len(st.Pages) || st.Pages[i].WorkflowID == "" || st.Pages[i].WorkflowID == page {
		return ""
	}
	return st.Pages[i].WorkflowID
}

// beatEvery records a heartbeat of the activity of ctx every d until
// stop is called.
func beatEvery(ctx context.Context, d time.Duration) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				sdkactivity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
