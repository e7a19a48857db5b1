package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// config is what every round shares: the flags.
type config struct {
	bin           string
	repos         int
	parallel      int
	kills         int
	killMin       time.Duration
	killMax       time.Duration
	startWindow   time.Duration
	work          time.Duration
	wait          time.Duration
	startTimeout  time.Duration
	startAttempts int
	keep          bool
	verbose       bool
	root          string
	out           io.Writer
}

// round is one round: a fresh fixture, `up` started on it, the mode's
// kills at moments drawn from the round's seed, then a bounded wait for
// the campaign to finish by itself.
type round struct {
	cfg   *config
	mode  Mode
	seed  uint64
	rng   *rand.Rand
	fx    *fixture
	addr  string
	began time.Time

	// installs are every fixture `up` ran on: the round's own and, in
	// the first-start round, the probes.
	installs []*fixture
	ups      []*upProc
	up       *upProc
	obs      *observer
	appr     *approvals

	// last is the campaign as last read, and lastRead when.
	last     campaignView
	lastRead time.Time

	restartsFailed int
	gaveUp         bool
	// neverServed counts installs up never served on again after a kill.
	neverServed int
	// finished says when the campaign finished, or why the wait ended.
	finished string
}

// result is what a round reports.
type result struct {
	mode    Mode
	seed    uint64
	figures Figures
	took    time.Duration
}

func newRound(cfg *config, mode Mode, seed uint64) *round {
	return &round{cfg: cfg, mode: mode, seed: seed, rng: rand.New(rand.NewPCG(seed, seed))}
}

// printf prints a line of the round's log, stamped with the time since
// the round began.
func (r *round) printf(format string, args ...any) {
	fmt.Fprintf(r.cfg.out, "  %6.1fs  %s\n", time.Since(r.began).Seconds(), fmt.Sprintf(format, args...))
}

// run runs the round and tallies it. Whatever happens, every process it
// started is killed and, unless -keep, its directory removed.
func (r *round) run(ctx context.Context) (res result, err error) {
	r.began = time.Now()
	res = result{mode: r.mode, seed: r.seed}
	dir, err := os.MkdirTemp(r.cfg.root, fmt.Sprintf("%s-%d-", r.mode, r.seed))
	if err != nil {
		return res, err
	}
	defer func() {
		if cerr := r.cleanup(dir); err == nil {
			err = cerr
		}
	}()
	opts := campaignOptions{maxParallel: r.cfg.parallel, requireApproval: r.mode == Approvals, work: r.cfg.work}
	if r.fx, err = makeFixture(ctx, dir, r.cfg.repos, opts); err != nil {
		return res, err
	}
	r.installs = append(r.installs, r.fx)
	if r.addr, err = freeAddr(); err != nil {
		return res, err
	}
	if r.mode == Approvals {
		r.appr = &approvals{bin: r.cfg.bin, fx: r.fx, addr: r.addr}
	}
	r.printf("%d repositories, max_parallel %d, campaign committed; up on %s, state in %s", r.cfg.repos, r.cfg.parallel, r.addr, r.fx.state)

	if r.mode == FirstStart {
		err = r.killStarts(ctx)
	} else {
		err = r.killWhileRunning(ctx)
	}
	if err != nil {
		return res, err
	}
	if !r.gaveUp {
		if err := r.waitFinish(ctx); err != nil {
			return res, err
		}
	}
	o, err := r.observe(ctx)
	if err != nil {
		return res, err
	}
	res.figures = Tally(o)
	res.took = time.Since(r.began)
	r.report(o, res)
	return res, nil
}

// killWhileRunning starts up, then kills as the mode says at random
// moments of the campaign's course, restarting up after each kill that
// took it down. The k-th kill comes a random delay (-kill-min to
// -kill-max) after the campaign reached the k-th of kills progress points
// drawn at random (see killPoints): so the kills spread over the whole
// campaign however fast or slow it goes, and a slow recovery does not
// swallow them. It stops killing once the campaign has finished, or
// paused with nothing running.
func (r *round) killWhileRunning(ctx context.Context) error {
	points := killPoints(r.rng, r.cfg.repos, r.cfg.kills, r.appr != nil)
	if !r.bringUp(ctx) {
		return ctx.Err()
	}
	for k := 1; k <= r.cfg.kills; k++ {
		if err := r.awaitProgress(ctx, points[k-1]); err != nil {
			return err
		}
		delay := r.cfg.killMin + time.Duration(r.rng.Int64N(int64(r.cfg.killMax-r.cfg.killMin)+1))
		if err := r.idle(ctx, delay); err != nil {
			return err
		}
		if r.gaveUp {
			return nil
		}
		if why := r.settled(); why != "" {
			r.printf("%s before kill %d of %d: no more kills", why, k, r.cfg.kills)
			return nil
		}
		switch r.mode {
		case AgentsOnly:
			if err := r.killAgents(ctx, k); err != nil {
				return err
			}
			continue
		case UpOnly:
			victims, err := killSome(r.fx.state, func(p proc) bool { return p.pgid == r.up.pid() }, 10*time.Second)
			if err != nil {
				return err
			}
			r.printf("kill %d (%s): up's process group: %s", k, r.progressText(), census(victims))
		default:
			victims, err := r.killTree()
			if err != nil {
				return err
			}
			r.printf("kill %d (%s): the whole tree: %s", k, r.progressText(), census(victims))
		}
		<-r.up.done
		if !r.bringUp(ctx) {
			return ctx.Err()
		}
	}
	return nil
}

// progressStall is how long a kill waits for the campaign to reach its
// progress point before it comes anyway.
const progressStall = 90 * time.Second

// progress is how far the campaign has got: the results approved in the
// approvals round, the units finished in the others.
func (r *round) progress() int {
	if r.appr != nil {
		return r.appr.made
	}
	n := 0
	if r.last.st != nil {
		for _, u := range r.last.st.Units {
			if finalUnit(string(u.Phase)) {
				n++
			}
		}
	}
	return n
}

// awaitProgress waits until the campaign's progress reaches n, the
// campaign settles, or progressStall passes without progress.
func (r *round) awaitProgress(ctx context.Context, n int) error {
	seen, since := r.progress(), time.Now()
	for r.progress() < n && !r.gaveUp && r.settled() == "" {
		if p := r.progress(); p > seen {
			seen, since = p, time.Now()
		}
		if time.Since(since) > progressStall {
			r.printf("no progress for %s (at %d, the kill was to follow %d): killing now", progressStall, seen, n)
			return nil
		}
		if err := r.idle(ctx, 250*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// killPoints draws the progress points the kills follow, in order:
// kills distinct numbers of units finished, from 0 to repos-1, or, with
// approvals, of results approved, from 1 to repos-1 (a kill follows an
// approval and comes before the next). With more kills than points, the
// points repeat.
func killPoints(rng *rand.Rand, repos, kills int, approvals bool) []int {
	lo := 0
	if approvals {
		lo = 1
	}
	span := max(repos-lo, 1)
	var out []int
	for len(out) < kills {
		for _, p := range rng.Perm(span)[:min(kills-len(out), span)] {
			out = append(out, p+lo)
		}
	}
	sort.Ints(out)
	return out
}

// progressText says how far the campaign had got.
func (r *round) progressText() string {
	if r.appr != nil {
		return fmt.Sprintf("%d approvals made", r.appr.made)
	}
	return fmt.Sprintf("%d units finished", r.progress())
}

// settled says why nothing more will happen in the campaign without a
// human: it has ended, or it is paused with no unit running; "" when it
// may go on.
func (r *round) settled() string {
	switch {
	case r.last.closed():
		return "the campaign ended " + r.last.status
	case r.last.st != nil && r.last.st.Phase == workflow.CampaignPaused && r.last.running() == 0:
		return "the campaign paused with nothing running"
	}
	return ""
}

// killStarts kills the whole tree during first starts of up: each kill
// lands on an install whose state directory is fresh, a random moment
// after the start under way creates temporal.db (see firstStartKill),
// and up is started again there, which must serve. Every kill but the
// last is on a probe install (its own state directory, and a copy of the
// campaigns repository whose campaign is suspended, so that no task
// starts and the targets stay untouched), stopped once the restart is
// judged; the last is on the round's own install, whose campaign then
// runs to the end.
func (r *round) killStarts(ctx context.Context) error {
	own := r.fx
	for k := 1; k < r.cfg.kills; k++ {
		probe, err := makeProbe(ctx, own, k)
		if err != nil {
			return err
		}
		r.fx = probe
		r.installs = append(r.installs, probe)
		if err := r.firstStartKill(ctx, k); err != nil {
			return err
		}
		if r.bringUp(ctx) {
			r.printf("probe %d: the restart after kill %d serves", k, k)
		} else if ctx.Err() == nil {
			r.printf("probe %d: up never served again after kill %d", k, k)
		}
		// A probe that never serves again is counted in the restarts
		// that failed; the round goes on with the next.
		r.gaveUp = false
		r.up.stop(5 * time.Second)
		if _, err := r.killTree(); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	r.fx = own
	if r.cfg.kills > 0 {
		if err := r.firstStartKill(ctx, r.cfg.kills); err != nil {
			return err
		}
	}
	r.bringUp(ctx)
	return ctx.Err()
}

// firstStartKill starts up and kills the whole tree during that start.
// When the state directory has no temporal.db, the moment is measured
// from when the start creates it, where a first start builds the
// database; otherwise from the launch. It is -start-window times the
// square of a uniform draw: kills cluster near that moment, where the
// few milliseconds of building the schema are.
func (r *round) firstStartKill(ctx context.Context, k int) error {
	db := filepath.Join(r.fx.state, "temporal.db")
	_, statErr := os.Stat(db)
	fresh := errors.Is(statErr, os.ErrNotExist)
	u, err := r.launch()
	if err != nil {
		return err
	}
	ref, from := u.started, "the launch of start"
	if fresh {
		from = "temporal.db appeared in start"
		for deadline := time.Now().Add(r.cfg.startTimeout); !u.exited() && time.Now().Before(deadline); {
			if _, err := os.Stat(db); err == nil {
				ref = time.Now()
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
	}
	x := r.rng.Float64()
	delay := time.Duration(x * x * float64(r.cfg.startWindow))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-u.done:
	case <-time.After(time.Until(ref.Add(delay))):
	}
	if u.exited() {
		r.restartsFailed++
		r.printf("start %d exited by itself before kill %d (%s): %s", u.n, k, u.exitText(), u.lastError())
	}
	served, state := u.announced(), dbState(r.fx.state)
	victims, err := r.killTree()
	if err != nil {
		return err
	}
	<-u.done
	when := "before it announced its reconciler"
	if served {
		when = "after it announced its reconciler"
	}
	r.printf("kill %d: %.0f ms after %s %d, %s, %s: %s", k, float64(delay.Microseconds())/1000, from, u.n, when, state, census(victims))
	return nil
}

// dbState says whether the embedded server's database exists, and its
// size with its write-ahead log.
func dbState(stateDir string) string {
	db := filepath.Join(stateDir, "temporal.db")
	fi, err := os.Stat(db)
	if err != nil {
		return "no temporal.db yet"
	}
	size := fi.Size()
	if wal, err := os.Stat(db + "-wal"); err == nil {
		size += wal.Size()
	}
	return fmt.Sprintf("temporal.db %d KiB", size>>10)
}

// killAgents kills the agents and their jails, waiting (bounded) for one
// to exist when none does at the chosen moment.
func (r *round) killAgents(ctx context.Context, k int) error {
	agent, err := filepath.EvalSymlinks(filepath.Join(r.cfg.bin, "fleetlift-agent"))
	if err != nil {
		return err
	}
	isAgent := func(p proc) bool { return strings.TrimSuffix(p.exe, " (deleted)") == agent }
	deadline := time.Now().Add(15 * time.Second)
	for {
		fam, err := family(r.fx.state)
		if err != nil {
			return err
		}
		if slicesAny(fam, isAgent) {
			break
		}
		if why := r.settled(); why != "" {
			r.printf("kill %d: %s: nothing killed", k, why)
			return nil
		}
		if time.Now().After(deadline) {
			r.printf("kill %d: no agent ran within 15 s: nothing killed", k)
			return nil
		}
		if err := r.idle(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	victims, err := killSome(r.fx.state, isAgent, 10*time.Second)
	if err != nil {
		return err
	}
	r.printf("kill %d (%s): the agents: %s", k, r.progressText(), census(victims))
	return nil
}

func slicesAny(ps []proc, f func(proc) bool) bool {
	for _, p := range ps {
		if f(p) {
			return true
		}
	}
	return false
}

// launch starts up once more.
func (r *round) launch() (*upProc, error) {
	u, err := startUp(r.cfg.bin, r.addr, r.fx, len(r.ups)+1)
	if err != nil {
		return nil, err
	}
	r.ups = append(r.ups, u)
	r.up = u
	return u, nil
}

// bringUp starts up and waits for it to serve, as an operator would: up
// to -start-attempts times, each failure a failed restart. It reports
// whether up serves; when it never does, the round has given up.
func (r *round) bringUp(ctx context.Context) bool {
	for range r.cfg.startAttempts {
		u, err := r.launch()
		if err != nil {
			r.printf("start: %v", err)
			break
		}
		obs, err := u.waitServing(ctx, r.addr, r.fx.state, r.cfg.startTimeout)
		if err == nil {
			r.obs = obs
			if r.cfg.verbose || u.n > 1 {
				r.printf("start %d serving after %.1f s", u.n, time.Since(u.started).Seconds())
			}
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		r.restartsFailed++
		r.printf("start %d FAILED: %v", u.n, err)
		// Only this start's processes: agents an earlier one left run on.
		if _, err := killSome(r.fx.state, func(p proc) bool { return p.sid == u.pid() }, 10*time.Second); err != nil {
			r.printf("stop start %d: %v", u.n, err)
		}
		<-u.done
	}
	r.gaveUp = true
	r.neverServed++
	r.printf("up did not serve after %d attempts: giving up on this install", r.cfg.startAttempts)
	return false
}

// killTree kills up and everything of the round's, and forgets the
// connection to the server that died with it.
func (r *round) killTree() ([]proc, error) {
	victims, err := killTree(r.fx.state, 10*time.Second)
	if r.obs != nil {
		r.obs.Close()
		r.obs = nil
	}
	return victims, err
}

// idle lets d pass while watching the round: up restarted if it exited by
// itself, results approved (in the approvals round), the campaign read.
func (r *round) idle(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		if err := r.tick(ctx); err != nil {
			return err
		}
		left := time.Until(end)
		if left <= 0 || r.gaveUp || r.settled() != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(left, 250*time.Millisecond)):
		}
	}
}

// tick is one look at the round.
func (r *round) tick(ctx context.Context) error {
	if r.up != nil && r.up.exited() && !r.gaveUp {
		r.restartsFailed++
		r.printf("up (start %d) exited by itself (%s): %s", r.up.n, r.up.exitText(), r.up.lastError())
		if _, err := r.killTree(); err != nil {
			return err
		}
		if !r.bringUp(ctx) {
			return ctx.Err()
		}
	}
	if r.obs == nil {
		return nil
	}
	if r.appr != nil {
		pending, err := r.obs.pending(ctx)
		if err != nil && r.cfg.verbose {
			r.printf("read the results awaiting approval: %v", err)
		}
		if err == nil {
			msg, err := r.appr.next(ctx, pending)
			switch {
			case err != nil:
				r.printf("approve: %v", err)
			case msg != "" && r.cfg.verbose:
				r.printf("%s", msg)
			}
		}
	}
	if time.Since(r.lastRead) >= time.Second {
		if v, err := r.obs.campaign(ctx); err == nil {
			r.last = v
			r.lastRead = time.Now()
		}
	}
	return ctx.Err()
}

// waitFinish waits, up to -wait after the kills, for the campaign to
// finish by itself; a campaign paused at its failure threshold with
// nothing running will not, and ends the wait early.
func (r *round) waitFinish(ctx context.Context) error {
	start := time.Now()
	deadline := start.Add(r.cfg.wait)
	for {
		r.lastRead = time.Time{}
		if err := r.tick(ctx); err != nil {
			return err
		}
		switch {
		case r.gaveUp:
			r.finished = "up could not be started again"
			return nil
		case r.last.closed():
			r.finished = fmt.Sprintf("the campaign ended %s at %.0f s, %.0f s into the wait", r.last.status, time.Since(r.began).Seconds(), time.Since(start).Seconds())
			return nil
		case r.last.st != nil && r.last.st.Phase == workflow.CampaignPaused && r.last.running() == 0:
			r.finished = fmt.Sprintf("the campaign paused with nothing running at %.0f s, %.0f s into the wait: %s", time.Since(r.began).Seconds(), time.Since(start).Seconds(), r.last.st.Message)
			return nil
		case time.Now().After(deadline):
			r.finished = fmt.Sprintf("the campaign had not finished at %.0f s, after a wait of %s", time.Since(r.began).Seconds(), r.cfg.wait)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// observe reads what the round left: every target's branches, every run
// of the campaign and its tasks, and the campaign's state.
func (r *round) observe(ctx context.Context) (Observation, error) {
	o := Observation{CampaignID: campaignID, RestartsFailed: r.restartsFailed, GaveUp: r.gaveUp}
	for _, name := range r.fx.names {
		refs, err := inspect(ctx, r.fx, name)
		if err != nil {
			return o, err
		}
		o.Repos = append(o.Repos, refs)
	}
	if r.appr != nil {
		o.Approved = r.appr.units()
	}
	if r.obs == nil {
		return o, nil
	}
	runs, err := r.obs.runs(ctx)
	if err != nil {
		r.printf("list runs: %v", err)
	}
	o.Runs = runs
	v, err := r.obs.campaign(ctx)
	if err != nil {
		r.printf("read the campaign: %v", err)
	}
	o.CampaignStatus = v.status
	o.Units = v.units()
	if v.st != nil {
		o.CampaignPhase, o.CampaignNote = string(v.st.Phase), v.st.Message
	}
	return o, nil
}

// report prints the round's evidence and figures against the goal.
func (r *round) report(o Observation, res result) {
	f := res.figures
	w := r.cfg.out
	fmt.Fprintf(w, "  %s\n", r.finished)
	if o.Units != nil {
		phases := map[string]int{}
		errs := map[string]int{}
		for _, u := range o.Units {
			phases[u.Phase]++
			if u.Error != "" {
				errs[oneLine(sandboxName.ReplaceAllString(u.Error, "<sandbox>"), 200)]++
			}
		}
		fmt.Fprintf(w, "  campaign %s (phase %s): units %s\n", o.CampaignStatus, o.CampaignPhase, phaseCounts(phases, ""))
		for _, e := range byCount(errs) {
			fmt.Fprintf(w, "    %d× %s\n", errs[e], e)
		}
	}
	phase, unitErr, applied := map[string]string{}, map[string]string{}, map[string][]string{}
	for _, u := range o.Units {
		phase[u.Key], unitErr[u.Key], applied[u.Key] = u.Phase, u.Error, u.Applied
	}
	approved := map[string]bool{}
	for _, key := range o.Approved {
		approved[key] = true
	}
	for _, refs := range o.Repos {
		p, known := phase[refs.Name]
		if approved[refs.Name] && !refs.Correct {
			fmt.Fprintf(w, "    %s: approved, lost: %s; the unit is %s (%s), and reports %d approvals carried out %v\n", refs.Name, refs.Why, p,
				oneLine(sandboxName.ReplaceAllString(unitErr[refs.Name], "<sandbox>"), 200), len(applied[refs.Name]), applied[refs.Name])
			continue
		}
		switch {
		case refs.Correct && known && p != "completed":
			fmt.Fprintf(w, "    %s: the unit is %s, yet its branch is correct\n", refs.Name, p)
		case !refs.Correct && p == "completed":
			fmt.Fprintf(w, "    %s: the unit completed, yet %s (branches %v)\n", refs.Name, refs.Why, refs.Branches)
		case !refs.Correct && r.cfg.verbose:
			fmt.Fprintf(w, "    %s: %s (branches %v)\n", refs.Name, refs.Why, refs.Branches)
		}
	}
	if closed := campaignClose(o); !closed.IsZero() {
		var lastPR time.Time
		for _, refs := range o.Repos {
			if refs.Recorded.After(lastPR) {
				lastPR = refs.Recorded
			}
		}
		if !lastPR.IsZero() {
			fmt.Fprintf(w, "  the campaign closed %.1f s after the last pull request was recorded\n", closed.Sub(lastPR).Seconds())
		}
	}
	passes, lastPass := 0, ""
	for _, u := range r.ups {
		n, l := u.passFailures()
		passes += n
		if l != "" {
			lastPass = l
		}
	}
	if passes > 0 {
		fmt.Fprintf(w, "  up logged %d failed reconcile passes or applies; the last: %s\n", passes, oneLine(lastPass, 300))
	}
	if r.appr != nil {
		fmt.Fprintf(w, "  approval records committed: %d, for %d units\n", r.appr.made, len(r.appr.done))
	}
	human := "no"
	if f.Human {
		human = "yes"
	}
	fmt.Fprintf(w, "  %-46s %8s  %s\n", "figure", "measured", "goal")
	fmt.Fprintf(w, "  %-46s %8s  %d/%d\n", "repositories with exactly one correct branch", fmt.Sprintf("%d/%d", f.Correct, f.Repos), f.Repos, f.Repos)
	fmt.Fprintf(w, "  %-46s %8d  0   (extra branches %d, campaign runs %d, task runs %d; %d task runs for %d repositories, %d ran more than once)\n",
		"duplicate branches or runs", f.Duplicates(), f.ExtraBranches, f.ExtraCampaignRuns, f.DuplicateTaskRuns, f.TaskRuns, f.Repos, f.RanAgain)
	fmt.Fprintf(w, "  %-46s %8d  0\n", "approvals lost", f.ApprovalsLost)
	fmt.Fprintf(w, "  %-46s %8d  0\n", "units stuck", f.Stuck)
	fmt.Fprintf(w, "  %-46s %8d  0   (%d starts of up; %d installs never served again)\n", "restarts that failed", f.RestartsFailed, len(r.ups), r.neverServed)
	fmt.Fprintf(w, "  %-46s %8s  no", "a human had to act", human)
	if f.Human {
		fmt.Fprintf(w, "  (%s)", f.HumanWhy)
	}
	fmt.Fprintln(w)
	verdict := "MISSED"
	if f.MeetsGoal() {
		verdict = "met"
	}
	fmt.Fprintf(w, "  goal %s; the round took %.0f s\n", verdict, res.took.Seconds())
}

// sandboxName matches the sandbox ids in errors, so that errors that
// differ only by sandbox are counted together.
var sandboxName = regexp.MustCompile(`\bcampaign-` + campaignID + `-[A-Za-z0-9._-]+`)

// campaignClose is when the campaign's latest run closed; zero while it
// runs.
func campaignClose(o Observation) time.Time {
	var latest Run
	for _, run := range o.Runs {
		if run.WorkflowID == "campaign/"+o.CampaignID && run.Start.After(latest.Start) {
			latest = run
		}
	}
	return latest.Close
}

// byCount orders the keys of m by count, largest first.
func byCount(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// cleanup stops up (SIGTERM, then SIGKILL to everything of the round's)
// and removes the round's directory unless -keep.
func (r *round) cleanup(dir string) error {
	if r.up != nil {
		r.up.stop(5 * time.Second)
	}
	var errs []error
	for _, fx := range r.installs {
		left, err := killTree(fx.state, 10*time.Second)
		errs = append(errs, err)
		if len(left) > 0 && r.cfg.verbose {
			r.printf("cleanup killed what remained: %s", census(left))
		}
	}
	err := errors.Join(errs...)
	if r.obs != nil {
		r.obs.Close()
		r.obs = nil
	}
	if r.cfg.keep {
		fmt.Fprintf(r.cfg.out, "  kept %s\n", dir)
		return err
	}
	return errors.Join(err, os.RemoveAll(dir))
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
