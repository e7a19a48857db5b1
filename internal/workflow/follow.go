package workflow

import (
	"cmp"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/forge"
	"github.com/fleetlift/fleetlift/internal/state"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/webhook"
)

// FollowInput is a PullRequests workflow's input.
type FollowInput struct {
	// Source is the workflow whose pull requests are followed.
	Source string `json:"source"`
	// State is what an earlier run of the follower knew (continue-as-new).
	State *status.PullRequests `json:"state,omitempty"`
	// DoneDue is the merged pull requests (URLs) whose base a push moved
	// in an earlier run, where done_when has not run since: a push is
	// not lost when the follower continues as new.
	DoneDue []string `json:"done_due,omitempty"`
}

// followPassesPerRun is how many reads a PullRequests run makes before
// it continues as new: each adds a handful of events.
const followPassesPerRun = 200

// PullRequests follows the pull requests a run opens (a campaign that
// runs its units itself, a page of a larger one, or a task started on
// its own), from the moment the run starts until every one is merged or
// closed and the run has ended: it reads them from their forges on a
// worker (RefreshPullRequests) every few minutes (the worker's
// setting), at once when asked (UpdateRefresh: `fleetlift prs
// --refresh`), and answers QueryPullRequests with what it read. It
// merges those that are ready as the run's pull_request.merge says, and
// merges or closes them when asked (UpdateAct: `fleetlift prs merge`,
// `prs close`, and the reconciler's close of a removed campaign's). Its
// result is the last of what it read. The state reader shows it beside
// the run's own state. Its state holds at most the pull requests of one
// run or page, so it stays bounded as campaigns grow.
func PullRequests(ctx workflow.Context, in FollowInput) (status.PullRequests, error) {
	f := &follower{st: status.PullRequests{Source: in.Source}, every: activity.DefaultFollowEvery,
		hinted: map[string]bool{}, retries: map[string]int{}, pushed: map[status.PushHint]bool{}, doneDue: map[string]bool{}}
	if in.State != nil {
		f.st = *in.State
	}
	for _, u := range in.DoneDue {
		f.doneDue[u] = true
	}
	if err := f.register(ctx); err != nil {
		return f.st, err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute,
		HeartbeatTimeout:    activity.FollowHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 5 * time.Second, BackoffCoefficient: 2,
			MaximumInterval: 5 * time.Minute, MaximumAttempts: 5},
	})
	var only []string
	for {
		var ended bool
		if only == nil {
			ended = f.read(ctx, actx)
		} else {
			ended = f.readSome(ctx, actx, only)
		}
		if ctx.Err() != nil {
			return f.st, ctx.Err()
		}
		if f.st.SupersededBy != "" {
			// A later run of the page follows its units' pull
			// requests: two followers would act on them twice.
			f.st.Ended = true
			return f.st, workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
		}
		if f.keep != "" {
			f.keepCurrent(ctx, actx)
		}
		if f.merge != nil {
			if merged := f.autoMerge(ctx); len(merged) > 0 {
				// Merged some: read those again now.
				only = merged
				continue
			}
		}
		if f.done != nil {
			f.checkDone(ctx)
			// done_when runs again on a schedule, for as long as a
			// merged pull request's repository may regress.
			ended = ended && !slices.ContainsFunc(f.st.PRs, status.FollowedPR.Settled)
		}
		if ended {
			f.st.Ended = true
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return f.st, err
			}
			return f.st, nil
		}
		if f.runPasses+f.partialReads >= followPassesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return f.st, err
			}
			// The pushes not yet taken, those this task delivered
			// included, go with it as done_when due. Hinted
			// repositories need not: the next run reads every pull
			// request first.
			f.drainHints()
			f.takePushes()
			next := f.st
			return f.st, workflow.NewContinueAsNewError(ctx, PullRequests,
				FollowInput{Source: f.st.Source, State: &next, DoneDue: slices.Sorted(maps.Keys(f.doneDue))})
		}
		var err error
		if only, err = f.wait(ctx, only != nil); err != nil {
			return f.st, err
		}
	}
}

// wait waits for the next read, and returns the pull requests it reads
// alone (nil: it reads them all): every f.every, or at once when an
// update asks, or, for a hint about a repository where it follows an
// open pull request, those there (and any the source opened since; a
// hint about a repository where it follows none reads only those). After a read for hints (spaced) it
// takes no hint for hintSpacing, so a storm of statuses costs the forge
// one read of each pull request per spacing; an update waits for none.
func (f *follower) wait(ctx workflow.Context, spaced bool) ([]string, error) {
	asked := func() bool { return f.wanted > f.runPasses }
	if spaced {
		if _, err := workflow.AwaitWithTimeout(ctx, hintSpacing, asked); err != nil {
			return nil, err
		}
	}
	pass := f.passAt.Add(f.every)
	for {
		// Pushes that came during the read count too: a read that
		// took longer than f.every leaves no time to wait for them.
		f.takePushes()
		due := pass
		if at, ok := f.pushedCheckAt(); ok && at.Before(due) {
			due = at
		}
		left := due.Sub(workflow.Now(ctx))
		if left <= 0 || asked() {
			break
		}
		woken, err := workflow.AwaitWithTimeout(ctx, left, func() bool { return asked() || len(f.hinted) > 0 || len(f.pushed) > 0 })
		if err != nil {
			return nil, err
		}
		if !woken || asked() {
			break
		}
		urls := []string{}
		unknown := maps.Clone(f.hinted)
		for _, p := range f.st.PRs {
			k := webhook.PullRequestKey(p.URL)
			delete(unknown, k)
			if !p.Settled() && f.hinted[k] {
				urls = append(urls, p.URL)
			}
		}
		clear(f.hinted)
		// A repository where it follows nothing yet may be where the
		// source opened one since the last read: read the source too.
		if len(urls) > 0 || len(unknown) > 0 && !f.sourceEnded {
			return urls, nil
		}
	}
	clear(f.hinted)
	if now := workflow.Now(ctx); !asked() && now.Before(pass) {
		// done_when is due where a push came: read those alone.
		var urls []string
		for _, p := range f.st.PRs {
			if f.doneDue[p.URL] && !now.Before(p.DoneAt.Add(donePushSpacing)) {
				urls = append(urls, p.URL)
			}
		}
		if len(urls) > 0 {
			return urls, nil
		}
	}
	return nil, nil
}

// donePushSpacing is the least time between two runs of done_when on one
// repository that pushes to its default branch bring about: a busy
// branch costs at most one sandbox a minute there.
const donePushSpacing = time.Minute

// takePushes marks, for a run of done_when soon, the merged pull
// requests whose base the pushes hinted at (SignalHint) moved.
func (f *follower) takePushes() {
	if f.done != nil {
		for _, p := range f.st.PRs {
			if p.Settled() && f.pushed[status.PushHint{Repository: webhook.PullRequestKey(p.URL), Branch: p.Base}] {
				f.doneDue[p.URL] = true
			}
		}
	}
	clear(f.pushed)
}

// pushedCheckAt is when the earliest run of done_when a push brought
// about may go (donePushSpacing after that repository's last); ok is
// false when none waits.
func (f *follower) pushedCheckAt() (at time.Time, ok bool) {
	for _, p := range f.st.PRs {
		if !f.doneDue[p.URL] {
			continue
		}
		if t := p.DoneAt.Add(donePushSpacing); !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	return at, ok
}

// hintSpacing is the least time between two reads of a follower's pull
// requests for hints (SignalHint).
const hintSpacing = 10 * time.Second

// follower is one run of PullRequests.
type follower struct {
	st    status.PullRequests
	every time.Duration
	// merge is the source's merge policy as last read; nil: none. keep
	// is its keep_current ("": never).
	merge *status.MergePolicy
	keep  string
	// done is the source's done_when as last read; nil: none.
	done *status.DoneCheck
	// hinted holds the repositories (webhook.PullRequestKey) that
	// hints named since the last read; partialReads counts this run's
	// reads of only some pull requests (readSome).
	hinted       map[string]bool
	partialReads int
	// pushed holds the pushes hints named since they were last taken;
	// doneDue the merged pull requests (URLs) whose base a push moved,
	// where done_when runs before its schedule.
	pushed  map[status.PushHint]bool
	doneDue map[string]bool
	// hints is the channel of SignalHint.
	hints workflow.ReceiveChannel
	// retries counts, by URL, the reads of some that failed in a row.
	retries map[string]int
	// sourceEnded: the last read found the source ended, so no pull
	// request joins.
	sourceEnded bool
	// passAt is when the last read of them all began: the next is due
	// f.every after it, however many hints were read since.
	passAt time.Time
	// runPasses counts this run's reads of them all; wanted is the read
	// an update waits for; reading says one is under way, which began
	// before any update that comes meanwhile; acting says an action is
	// under way.
	runPasses, wanted int
	reading, acting   bool
}

// read reads the pull requests once, and reports whether the source has
// ended with none open.
func (f *follower) read(ctx, actx workflow.Context) bool {
	f.passAt = workflow.Now(ctx)
	ended := f.refresh(ctx, actx, nil)
	f.st.Passes++
	f.runPasses++
	return ended
}

// readSome reads the pull requests at urls (and any the source opened
// since the last read), and reports what read does. One whose read
// failed, or open one whose forge had not worked out yet whether it
// merges (as after its base moved), is read again after hintSpacing, up
// to someRetries times.
func (f *follower) readSome(ctx, actx workflow.Context, urls []string) bool {
	ended := f.refresh(ctx, actx, urls)
	f.st.PartialReads++
	f.partialReads++
	for _, u := range urls {
		if p, ok := f.st.Find(u); ok && (p.Error != "" || p.Open() && p.Mergeable == "") && f.retries[u] < someRetries {
			f.retries[u]++
			f.hinted[webhook.PullRequestKey(u)] = true
			continue
		}
		delete(f.retries, u)
	}
	return ended
}

// someRetries is how many times readSome reads a pull request again
// whose read failed (a forge may hold a request about a pull request it
// is merging) or whose mergeability the forge was working out.
const someRetries = 3

// refresh has a worker read the pull requests (only those at only, when
// set, and new ones), and takes in what it read.
func (f *follower) refresh(ctx, actx workflow.Context, only []string) bool {
	var out activity.RefreshOutcome
	// A read of only some is not one an update waits for (fresh).
	f.reading = only == nil
	sent := reopenedFor(f.st.PRs)
	err := workflow.ExecuteActivity(actx, a.RefreshPullRequests,
		activity.RefreshInput{Source: f.st.Source, Known: f.st.PRs, Only: only, Hinted: only != nil}).Get(ctx, &out)
	f.reading = false
	if err != nil {
		// No worker could read them: try again at the next pass.
		workflow.GetLogger(ctx).Warn("pull requests not read", "source", f.st.Source, "error", err)
		return false
	}
	if out.SupersededBy != "" {
		f.st.SupersededBy = out.SupersededBy
		return false
	}
	// What was read carries the marks of Known as they were sent: a
	// reopen recorded while the read was out (UpdateReopened) stands,
	// or the reconciler would see the regression unmarked and reopen it
	// again.
	for _, p := range f.st.PRs {
		if p.ReopenedFor == sent[p.URL] {
			continue
		}
		for i := range out.PRs {
			if out.PRs[i].URL == p.URL {
				out.PRs[i].ReopenedFor = p.ReopenedFor
			}
		}
	}
	f.st.PRs, f.st.CheckedAt, f.merge, f.keep, f.done = out.PRs, workflow.Now(ctx), out.Merge, out.KeepCurrent, out.Done
	if f.done == nil {
		// No done_when any more: nothing a push asked for is due.
		clear(f.doneDue)
	}
	f.sourceEnded = out.SourceEnded
	if out.Every > 0 {
		f.every = out.Every
	}
	return out.SourceEnded && !anyOpen(f.st.PRs) && !f.acting
}

// reopenedFor maps the pull requests of prs to their ReopenedFor.
func reopenedFor(prs []status.FollowedPR) map[string]string {
	m := make(map[string]string, len(prs))
	for _, p := range prs {
		m[p.URL] = p.ReopenedFor
	}
	return m
}

// fresh waits for a read that begins after it is called.
func (f *follower) fresh(ctx workflow.Context) error {
	want := f.runPasses + 1
	if f.reading {
		want++
	}
	f.wanted = max(f.wanted, want)
	return workflow.Await(ctx, func() bool { return f.runPasses >= want })
}

func (f *follower) register(ctx workflow.Context) error {
	f.hints = workflow.GetSignalChannel(ctx, status.SignalHint)
	workflow.Go(ctx, func(ctx workflow.Context) {
		for {
			var h status.PullRequestHint
			f.hints.Receive(ctx, &h)
			f.hint(h)
		}
	})
	if err := workflow.SetQueryHandler(ctx, status.QueryPullRequests, func() (status.PullRequests, error) { return f.st, nil }); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, status.UpdateRefresh, func(ctx workflow.Context) (status.PullRequests, error) {
		err := f.fresh(ctx)
		return f.st, err
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandler(ctx, status.UpdateReopened, f.reopened); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, status.UpdateAct, f.act, workflow.UpdateHandlerOptions{Validator: validAct})
}

// hint records what a hint (SignalHint) names.
func (f *follower) hint(h status.PullRequestHint) {
	for _, r := range h.Repositories {
		f.hinted[r] = true
	}
	for _, p := range h.Pushed {
		f.pushed[p] = true
	}
}

// drainHints records the hints delivered and not yet received.
func (f *follower) drainHints() {
	var h status.PullRequestHint
	for f.hints.ReceiveAsync(&h) {
		f.hint(h)
		h = status.PullRequestHint{}
	}
}

// reopened marks the regressed pull requests of units as reopened for
// the commit they regressed at.
func (f *follower) reopened(ctx workflow.Context, units []string) (int, error) {
	n := 0
	for i := range f.st.PRs {
		p := &f.st.PRs[i]
		if p.Done == state.DoneRegressed && slices.Contains(units, p.Unit) && p.ReopenedFor != p.DoneBase {
			p.ReopenedFor = p.DoneBase
			n++
		}
	}
	return n, nil
}

// validAct refuses an action that is not one.
func validAct(ctx workflow.Context, req status.ActRequest) error {
	switch req.Action {
	case status.ActMerge:
		if req.Method != "" && !slices.Contains(forge.MergeMethods, req.Method) {
			return fmt.Errorf("no merge method %q: want %s", req.Method, strings.Join(forge.MergeMethods, ", "))
		}
	case status.ActClose:
	default:
		return fmt.Errorf("no action %q: want %s or %s", req.Action, status.ActMerge, status.ActClose)
	}
	return nil
}

// act carries out req on the pull requests it names that may be, as
// freshly read, and reads them again after: one action at a time.
func (f *follower) act(ctx workflow.Context, req status.ActRequest) (status.ActResult, error) {
	res := status.ActResult{Outcomes: []status.ActOutcome{}}
	if err := workflow.Await(ctx, func() bool { return !f.acting }); err != nil {
		return res, err
	}
	f.acting = true
	defer func() { f.acting = false }()
	if err := f.fresh(ctx); err != nil {
		return res, err
	}
	var todo []status.FollowedPR
	for _, p := range f.st.PRs {
		if len(req.Repos) > 0 && !slices.Contains(req.Repos, p.Repo) {
			continue
		}
		why := status.CloseBlocker(p)
		if req.Action == status.ActMerge {
			why = status.MergeBlocker(p, req.Unapproved)
		}
		if why != "" {
			res.Outcomes = append(res.Outcomes, status.ActOutcome{Repo: p.Repo, URL: p.URL, Outcome: status.ActSkipped, Reason: why})
			continue
		}
		todo = append(todo, p)
	}
	if len(todo) > 0 {
		done, err := actOn(ctx, req, todo)
		if err != nil {
			return res, err
		}
		res.Outcomes = append(res.Outcomes, done...)
	}
	return res, f.fresh(ctx)
}

// actOn has a worker carry out req on prs.
func actOn(ctx workflow.Context, req status.ActRequest, prs []status.FollowedPR) ([]status.ActOutcome, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: activity.ActTimeout,
		HeartbeatTimeout:    activity.FollowHeartbeat,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3},
	})
	var done []status.ActOutcome
	err := workflow.ExecuteActivity(actx, a.ActOnPullRequests, activity.ActInput{Request: req, PRs: prs}).Get(ctx, &done)
	return done, err
}

// mergeRetryAfter is how long a merge the forge refused waits before it
// is asked again at the same head (a push asks again at once).
const mergeRetryAfter = time.Hour

// autoMerge merges, as the source's merge policy says, the pull
// requests that have been ready for its soak time, and returns those it
// merged. Each one the forge refuses keeps the reason, and is asked
// again after mergeRetryAfter or once its head moves.
func (f *follower) autoMerge(ctx workflow.Context) []string {
	if f.acting {
		return nil
	}
	now := workflow.Now(ctx)
	var due []int
	for i := range f.st.PRs {
		p := &f.st.PRs[i]
		if status.MergeBlocker(*p, f.merge.Unapproved) != "" {
			p.ReadySince = time.Time{}
			continue
		}
		if p.ReadySince.IsZero() {
			p.ReadySince = now
		}
		if now.Sub(p.ReadySince) < f.merge.After || p.MergeHead == p.Head && now.Sub(p.MergeTriedAt) < mergeRetryAfter {
			continue
		}
		due = append(due, i)
	}
	if len(due) == 0 {
		return nil
	}
	f.acting = true
	defer func() { f.acting = false }()
	req := status.ActRequest{Action: status.ActMerge, Method: f.merge.Method, Unapproved: f.merge.Unapproved, DeleteBranch: f.merge.DeleteBranch}
	var prs []status.FollowedPR
	for _, i := range due {
		prs = append(prs, f.st.PRs[i])
	}
	done, err := actOn(ctx, req, prs)
	if err != nil {
		workflow.GetLogger(ctx).Warn("pull requests not merged", "source", f.st.Source, "error", err)
		return nil
	}
	var merged []string
	for _, o := range done {
		for _, i := range due {
			p := &f.st.PRs[i]
			if p.URL != o.URL {
				continue
			}
			p.MergeHead, p.MergeTriedAt, p.MergeError = p.Head, now, o.Reason
			if o.Outcome == status.ActDone {
				merged = append(merged, p.URL)
			}
		}
	}
	return merged
}

// keepCurrent has the source make again, on their bases as they are now,
// the changes of the pull requests keep_current says are out of date,
// once for each base commit: the source runs their units again
// (RegenerateActivity), which push to the same branches. Those it may
// not make again say why in their KeepNote.
func (f *follower) keepCurrent(ctx, actx workflow.Context) {
	var due []int
	var units []string
	for i := range f.st.PRs {
		p := &f.st.PRs[i]
		why, same := status.RegenerateBlocker(*p, f.keep, false)
		switch {
		case same:
			p.KeepNote = ""
		case why != "":
			p.KeepNote = why
		case p.KeptFor != p.BaseSHA:
			due = append(due, i)
			if !slices.Contains(units, p.Unit) {
				units = append(units, p.Unit)
			}
		}
	}
	if len(due) == 0 {
		return
	}
	var n int
	err := workflow.ExecuteActivity(actx, RegenerateActivity, RegenerateInput{Source: f.st.Source, Units: units}).Get(ctx, &n)
	if err != nil {
		workflow.GetLogger(ctx).Warn("pull requests not made again", "source", f.st.Source, "error", err)
	}
	for _, i := range due {
		p := &f.st.PRs[i]
		p.KeptFor = p.BaseSHA
		p.KeepNote = fmt.Sprintf("made again on %.12s (keep_current: %s)", p.BaseSHA, f.keep)
		if err != nil {
			p.KeepNote = "not made again: " + errText(err)
		}
	}
}

// checkDone runs done_when on the repository of each merged pull
// request that it has not run on within done.Every, or whose base a
// push moved (at most once per donePushSpacing), one after another.
func (f *follower) checkDone(ctx workflow.Context) {
	f.takePushes()
	for i := range f.st.PRs {
		p := &f.st.PRs[i]
		since := workflow.Now(ctx).Sub(p.DoneAt)
		if p.Settled() && (p.DoneAt.IsZero() || since >= f.done.Every || f.doneDue[p.URL] && since >= donePushSpacing) {
			delete(f.doneDue, p.URL)
			f.checkOne(ctx, p)
		}
	}
}

// checkOne runs done_when in a sandbox on a fresh clone of p's base
// branch (its repository's default branch, as p was proposed to it),
// on any worker, and records what it said in p: a check that could not
// run leaves p.Done as it was, saying why.
func (f *follower) checkOne(ctx workflow.Context, p *status.FollowedPR) {
	m := f.done.Manifest
	name := path.Base(p.Repo) // a group's repository is <group>/<name>
	m.Repositories = []protocol.Repository{{URL: p.Repository, Branch: p.Base, Name: name}}
	timeout := time.Duration(m.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout:   timeout + 2*shortTimeout,
		HeartbeatTimeout:      TaskInput{}.heartbeatTimeout(),
		DisableEagerExecution: true,
		RetryPolicy:           &temporal.RetryPolicy{MaximumAttempts: 2, NonRetryableErrorTypes: activity.NonRetryable},
	})
	in := activity.RunInput{
		Provision: activity.ProvisionInput{SandboxID: sandboxID(f.st.Source+"/done/"+name, strconv.Itoa(f.st.Passes)), Image: f.done.Image,
			Resources: f.done.Resources, Placement: placement(f.done),
			Labels: map[string]string{"fleetlift.io/task-id": m.TaskID}},
		Manifest: m, Timeout: timeout, MaxSandboxes: 1,
	}
	var out status.RunOutcome
	err := workflow.ExecuteActivity(actx, a.RunSandboxed, in).Get(ctx, &out)
	p.DoneAt = workflow.Now(ctx)
	var r protocol.RepositoryResult
	if err == nil && len(out.Result.Repositories) == 1 {
		r = out.Result.Repositories[0]
	}
	switch {
	case err != nil:
		p.DoneNote = "done_when did not run: " + errText(err)
	case r.Status == "success":
		p.Done, p.DoneBase, p.DoneNote = state.DoneYes, r.Base, ""
	case r.ErrorKind == protocol.CheckFailed:
		if p.Done == state.DoneYes || p.Done == state.DoneRegressed {
			p.Done = state.DoneRegressed
		} else {
			p.Done = state.DoneNo
		}
		p.DoneBase, p.DoneNote = r.Base, r.Error
	default:
		p.DoneNote = "done_when did not run: " + cmp.Or(r.Error, out.Result.Error, "the sandbox returned no result")
	}
}

// placement is the sandbox placement of d's check; nil when the
// definition sets none.
func placement(d *status.DoneCheck) *activity.Placement {
	if d.Namespace == "" && d.RuntimeClass == "" && len(d.NodeSelector) == 0 {
		return nil
	}
	return &activity.Placement{Namespace: d.Namespace, RuntimeClass: d.RuntimeClass, NodeSelector: d.NodeSelector}
}

// anyOpen reports whether one of prs is open (or not read yet).
func anyOpen(prs []status.FollowedPR) bool {
	for _, p := range prs {
		if p.Open() {
			return true
		}
	}
	return false
}

// opensPullRequests reports whether work of t opens pull requests.
func opensPullRequests(t TaskInput) bool {
	return t.Manifest.Mode == protocol.ModeTransform && t.Manifest.PullRequest != nil
}

// follow starts the follower of the pull requests of the running
// workflow, unless it runs already (from an earlier run of the same
// workflow id, which it goes on following), and does not wait for it:
// it outlives the run.
func follow(ctx workflow.Context) {
	source := workflow.GetInfo(ctx).WorkflowExecution.ID
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            status.FollowerID(source),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TaskQueue:             workflow.GetInfo(ctx).TaskQueueName,
	})
	f := workflow.ExecuteChildWorkflow(cctx, PullRequests, FollowInput{Source: source})
	// Started, or running already: either way it follows.
	_ = f.GetChildWorkflowExecution().Get(ctx, nil)
}
