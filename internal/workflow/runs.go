package workflow

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/status"
)

// Runs of direct units. A unit that needs no decision on its way runs as
// an activity of the campaign; a campaign of short units would spend more
// of the machine dispatching one activity per unit, and the workflow task
// after each, than on the units' own work. So a free slot takes a run of
// units that one activity (RunUnits) works through in turn, each still in
// its own sandbox:
//
//   - a run takes a fair share of the units not yet done (runLength),
//     so that the campaign's last units do not wait behind a long run,
//     and once units have been timed, no more
//     than they say take about runFor; the activity starts no unit once
//     it has worked runFor and gives the rest back, so that units that
//     take long run one per activity: those given back would have
//     waited for a free slot all the same;
//   - a stop, a suspension, a pause at the failure threshold or an
//     update of the spec since the run was made cancels the run
//     (closeGates): its unit at work finishes, and
//     the heartbeat it sends before each further unit says it was
//     cancelled; the units left come back (Requeued), to start first
//     once starting is allowed again;
//   - a run stops after a unit that failed when the campaign has a
//     failure threshold, which the campaign then checks;
//   - the campaign takes in the units of a run once the run reports;
//     until then the units after the first show as queued in its own
//     state, and `fleetlift run`, `fleetlift status` and the state
//     readers show each as it ended, from the worker in their process or
//     the run's heartbeats (WithRunsProgress).
const (
	// runFor is about how long a run of units works. Each run costs the
	// server an activity, its workflow task and the reads of those
	// following the campaign: on 50 repositories whose units take 8
	// seconds on a busy forge, runs of about 20 seconds were 21 to 24
	// runs, of a minute, 8. The readers of a campaign show its units as
	// they end (WithRunsProgress), not once their run reports.
	runFor = time.Minute
	// maxRun bounds the units of a run.
	maxRun = 16
)

// runLength is how many units the next run takes: a fair share, no more
// than the units timed so far say fit in runFor, and at least one. The
// share is the units left (counting the one taken) and those in runs not
// yet reported over the parallelism, and no more than the units left
// over the slots free: 50 units over 8 slots are runs of 7, 7 and six of
// 6, one each. (The units left over the parallelism alone made the slots
// that start together take ever shorter runs, 7, 6, 5, 5, 4, ..., and
// the slots that finished first take more runs after.)
func (c *campaignRun) runLength() int {
	n := maxRun
	if c.p.UnitsTimed > 0 {
		if avg := c.p.UnitTime / time.Duration(c.p.UnitsTimed); avg > 0 {
			n = min(n, int(runFor/avg))
		}
	}
	left := 1 + len(c.p.Requeued) + len(c.p.Retry) + max(len(c.in.Units)-c.p.Next, 0)
	parallel := max(c.in.MaxParallel, 1)
	share := (left + len(c.running) + parallel - 1) / parallel
	free := max(parallel-c.runsInFlight, 1)
	return max(min(n, share, (left+free-1)/free), 1)
}

// takeRun takes the units of a run that starts with first, already
// taken: while the run is shorter than runLength, the next units that
// may start now, without waiting for the pull-request budget.
func (c *campaignRun) takeRun(first string) []string {
	keys := []string{first}
	// Started counts the units of a run once it starts: the run stays
	// within what this run of the workflow may start.
	// max_pending_checks: no more than its room (checksRoom).
	n := min(c.runLength(), c.unitsPerRun()-c.p.Started, c.checksRoom())
	for len(keys) < n && c.mayStart() {
		key, ok := c.startableKey()
		if !ok || !c.takeToken() {
			break
		}
		c.takeKey(key)
		keys = append(keys, key)
	}
	return keys
}

// startRun runs keys as a run of units (RunUnits): the first running,
// the others queued behind it.
func (c *campaignRun) startRun(keys []string) workflow.Future {
	wid, firstRunID := c.root()
	in := c.in.Template
	units := make([]activity.UnitSpec, 0, len(keys))
	for i, key := range keys {
		r, had := c.p.Results[key]
		c.queued[key] = nil
		if had {
			prev := r
			c.queued[key] = &prev
		}
		r.Key = key
		r.Phase = status.TaskQueued
		if i == 0 {
			r.Phase = status.TaskRunning
		}
		r.Attempts++
		c.p.Results[key] = r
		c.p.Started++
		c.running[key] = true
		// As startUnit names a direct unit's sandbox.
		retry := ""
		if r.Attempts > 1 {
			retry = fmt.Sprintf("/retry-%d", r.Attempts-1)
		}
		units = append(units, activity.UnitSpec{
			Key:          key,
			Attempt:      r.Attempts,
			SandboxID:    sandboxID(wid+"/"+key+retry, firstRunID),
			TaskID:       c.in.ID + "/" + key,
			Repositories: slices.Clone(c.units[key].Repositories),
			Parallel:     c.units[key].Parallel,
		})
	}
	m := in.Manifest
	m.TaskID = c.in.ID
	timeout := in.agentTimeout()
	opts := directOptions(in, len(keys))
	// A cancelled run reports the units it finished: their pull requests
	// are open.
	opts.WaitForCancellation = true
	actx, cancel := workflow.WithCancel(workflow.WithActivityOptions(c.ctx, opts))
	c.gates = append(c.gates, &runGate{first: keys[0], rev: c.rev, cancel: cancel})
	return workflow.ExecuteActivity(actx, a.RunUnits, activity.UnitsInput{
		Template: activity.RunInput{
			Provision: in.provision(""),
			Manifest:  m, Timeout: timeout, MaxSandboxes: maxSandboxes,
		},
		Units:         units,
		Within:        runFor,
		StopAtFailure: c.in.ThresholdPercent < 100,
		MaxAttempts:   maxSandboxes,
	})
}

// runGate is a run of units in flight: the unit it started with,
// the revision it was made at, and how to cancel it.
type runGate struct {
	first  string
	rev    int
	cancel workflow.CancelFunc
	closed bool
}

// closeGates cancels the runs of units in flight that may start no further
// unit: every one once the campaign starts no unit (a stop, a
// suspension, the failure threshold), and those made before an update
// in place. A run cancelled so finishes its unit at work and gives the
// rest back (recordRun).
func (c *campaignRun) closeGates() {
	open := c.startsUnits()
	for _, g := range c.gates {
		if !g.closed && (!open || g.rev != c.rev) {
			g.closed = true
			g.cancel()
		}
	}
}

// dropGate forgets the gate of the run that started with first, and
// reports whether it was closed.
func (c *campaignRun) dropGate(first string) bool {
	for i, g := range c.gates {
		if g.first == first {
			c.gates = slices.Delete(c.gates, i, i+1)
			return g.closed
		}
	}
	return false
}

// recordRun records what the run of keys did: each unit it finished; the
// unit it was at, when it failed as a whole (its last heartbeat says which
// units it had finished); the units it gave back, Requeued as they were.
func (c *campaignRun) recordRun(keys []string, f workflow.Future) {
	var out activity.UnitsOutcome
	err := f.Get(c.ctx, &out)
	closed := c.dropGate(keys[0])
	if err != nil {
		out = activity.UnitsOutcome{}
		var te *temporal.TimeoutError
		var ce *temporal.CanceledError
		switch {
		case errors.As(err, &te) && te.HasLastHeartbeatDetails():
			// The progress's units done decode as the outcome's.
			_ = te.LastHeartbeatDetails(&out)
		case closed && errors.As(err, &ce) && c.ctx.Err() == nil:
			// Its gate closed before it started: every unit goes back.
			err = nil
		}
	}
	var back []string
	for i, key := range keys {
		delete(c.running, key)
		switch {
		case i < len(out.Done) && out.Done[i].Key == key:
			u := out.Done[i]
			c.p.UnitTime += u.Took
			c.p.UnitsTimed++
			c.p.Results[key] = status.WithUnitDone(c.p.Results[key], u, len(c.units[key].Repositories) > 1)
		case err != nil && i == len(out.Done):
			c.recordError(key, errText(err), c.ctx.Err() != nil)
		default:
			back = append(back, key)
			if prev := c.queued[key]; prev != nil {
				c.p.Results[key] = *prev
			} else {
				delete(c.p.Results, key)
			}
			c.p.Started--
		}
		delete(c.queued, key)
	}
	c.p.Requeued = append(back, c.p.Requeued...)
}

// startsUnits reports whether the campaign starts units now: not
// stopped, suspended, paused or past its failure threshold or budget
// (where no unit starts, as no run would).
func (c *campaignRun) startsUnits() bool {
	return !c.p.Stop && !c.p.Suspended && c.p.Phase == status.CampaignRunning && !c.overThreshold() && c.overBudget() == "" && c.ctx.Err() == nil
}
