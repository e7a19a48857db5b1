package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/status"
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
	// sandbox is the provider up runs (local or docker); image the
	// campaign's image; engine the Docker engine with docker.
	sandbox string
	image   string
	engine  *engine
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
	opts := campaignOptions{maxParallel: r.cfg.parallel, requireApproval: r.mode == Approvals, work: r.cfg.work, image: r.cfg.image}
	if r.fx, err = makeFixture(ctx, dir, r.cfg.repos, opts); err != nil {
		return res, err
	}
	if r.cfg.engine != nil {
		// The agents run as uid 1000 in the containers: the targets must
		// be theirs to push to.
		if err := handOver(ctx, r.fx.targets); err != nil {
			return res, err
		}
	}
	r.installs = append(r.installs, r.fx)
	if r.addr, err = listen.FreeAddr("127.0.0.1"); err != nil {
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

// launch starts up once more.
// sandboxArgs are up's sandbox flags: local processes, or containers of
// the round's own label scope.
func (r *round) sandboxArgs() []string {
	if r.cfg.engine == nil {
		return []string{"--sandbox", sandboxLocal}
	}
	// The agent under test is -bin's (static, bind-mounted), not the
	// agent image's, which may be of another commit.
	return []string{"--sandbox", sandboxDocker, "--sandbox-scope", scopeOf(r.mode, r.seed), "--sandbox-image", r.cfg.image,
		"--sandbox-agent-binary", filepath.Join(r.cfg.bin, "fleetlift-agent"), "--sandbox-network", "none"}
}

func (r *round) launch() (*upProc, error) {
	u, err := startUp(r.cfg.bin, r.addr, r.fx, len(r.ups)+1, r.sandboxArgs())
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
		if cause := serverLogError(r.fx.state); cause != "" {
			r.printf("  the embedded server's last error: %s", cause)
		}
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
	if r.cfg.engine != nil {
		// The host's containers die with it.
		n, kerr := r.cfg.engine.kill(context.Background(), scopeOf(r.mode, r.seed))
		err = errors.Join(err, kerr)
		for range n {
			victims = append(victims, proc{exe: "container"})
		}
	}
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
		case r.last.st != nil && r.last.st.Phase == status.CampaignPaused && r.last.running() == 0:
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
	if r.cfg.engine != nil {
		n, err := r.cfg.engine.remove(context.Background(), scopeOf(r.mode, r.seed))
		errs = append(errs, err)
		if n > 0 && r.cfg.verbose {
			r.printf("cleanup removed %d containers of scope %s", n, scopeOf(r.mode, r.seed))
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
