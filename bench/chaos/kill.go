package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/status"
)

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
	case r.last.st != nil && r.last.st.Phase == status.CampaignPaused && r.last.running() == 0:
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
	if e := r.cfg.engine; e != nil {
		scope := scopeOf(r.mode, r.seed)
		if ok, err := e.waitRunning(ctx, scope, 15*time.Second); err != nil {
			return err
		} else if !ok {
			if why := r.settled(); why != "" {
				r.printf("kill %d: %s: nothing killed", k, why)
			} else {
				r.printf("kill %d: no container ran within 15 s: nothing killed", k)
			}
			return nil
		}
		n, err := e.kill(ctx, scope)
		if err != nil {
			return err
		}
		r.printf("kill %d (%s): the agents: %d containers", k, r.progressText(), n)
		return nil
	}
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
