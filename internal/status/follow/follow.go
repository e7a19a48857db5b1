package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/status/render"
	"github.com/fleetlift/fleetlift/internal/visible"
)

// ErrInterrupted is Run's error when its context ended before the run:
// it has said how the run goes on.
var ErrInterrupted = errors.New("interrupted")

// ErrFellShort is Run's error when the run ended without changing every
// repository: it has said how.
var ErrFellShort = errors.New("the run fell short")

// Options say how Run shows the run.
type Options struct {
	// TTY redraws the per-repository lines in place.
	TTY bool
	// News, from a worker in this process, paces the reads (nil: none).
	News *News
	// Ended, if set, prints what follows the result table of the ended
	// run (a report's reports).
	Ended func(w io.Writer)
	// GoesOn says how the run goes on once Run is interrupted ("" for
	// "it goes on: `fleetlift status ID`", where workers elsewhere run
	// it).
	GoesOn string
	// Retry is the command that runs the failed repositories of an
	// ended campaign again (render.HumanRetry).
	Retry string
}

// Run follows run id: it prints progress until the run ends, then the
// result table (and what o.Ended adds). On a terminal the per-repository
// lines are redrawn in place; otherwise a line is printed whenever a
// repository's state changes. Text from the run is shown through
// visible.String: the only escape sequences are Run's own. It returns ErrInterrupted when ctx ends first, and ErrFellShort,
// having said why, when the run did not complete cleanly.
func Run(ctx context.Context, rd *statetemporal.Reader, id string, w io.Writer, o Options) error {
	tty, news := o.TTY, o.News
	seen := map[string]string{}
	hinted := map[string]bool{}
	drawn := 0
	wctx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	ended := awaitClose(wctx, rd.Client, id)
	// Until the run's close is seen, a run known to be running is only
	// queried, not described as well: a task, or a campaign whose units
	// at work this process's worker told of (News.tells), judged by the
	// last read.
	running, isCampaign := false, false
	p := newReadPace(news)
	var st *status.Run
	redraw := false
	failed := 0 // reads in a row that failed for a while
	for {
		if !redraw {
			var err error
			last := st
			st = nil
			began := time.Now()
			if running && ended != nil && (!isCampaign || news.tells(id, last)) {
				st, err = rd.QueryStatus(ctx, id, isCampaign)
			}
			if st == nil || err != nil {
				st, err = rd.Status(ctx, id)
			}
			p.read(began)
			if err != nil && ctx.Err() == nil {
				if !passing(err) {
					return err
				}
				// A read that timed out (a large campaign's state, a
				// server or worker busy) says nothing of the run: it goes
				// on, and so does following it, with this process's
				// worker.
				if failed++; failed == 1 {
					fmt.Fprintf(w, "could not read %s (%v); trying again\n", id, err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(min(time.Second<<min(failed, 4), 15*time.Second)):
				}
				continue
			}
			if err == nil && failed > 0 {
				fmt.Fprintf(w, "reading %s again\n", id)
				failed = 0
			}
			if err == nil && !st.Closed {
				running, isCampaign = true, st.Campaign != nil
			}
		}
		if ctx.Err() != nil {
			goesOn := o.GoesOn
			if goesOn == "" {
				goesOn = fmt.Sprintf("it goes on: `fleetlift status %s`", id)
			}
			fmt.Fprintf(w, "\nstopped following %s; %s\n", id, goesOn)
			return ErrInterrupted
		}
		shown := st
		if news != nil && !st.Closed && st.Campaign != nil {
			// The units this process's worker finished in runs the
			// campaign has not taken in yet.
			var rp status.RunsProgress
			p.shown, rp = news.unitsOf(id)
			cs := status.WithRunsProgress(*st.Campaign, rp)
			shown = &status.Run{ID: st.ID, Campaign: &cs}
		}
		rows, waiting := progressRows(ctx, rd, shown)
		if tty {
			if drawn > 0 {
				fmt.Fprintf(w, "\x1b[%dA\x1b[J", drawn)
			}
			for _, r := range rows {
				fmt.Fprintf(w, "%-24s %s\n", visible.String(r.key), visible.String(r.state))
			}
			for _, t := range waiting {
				fmt.Fprintln(w, awaitHint(t, st.ID))
			}
			drawn = len(rows) + len(waiting)
		} else {
			for _, r := range rows {
				if seen[r.key] != r.state {
					seen[r.key] = r.state
					fmt.Fprintf(w, "%s  %-24s %s\n", time.Now().Format("15:04:05"), visible.String(r.key), visible.String(r.state))
				}
			}
			for _, t := range waiting {
				if !hinted[t] {
					hinted[t] = true
					fmt.Fprintln(w, "          "+awaitHint(t, st.ID))
				}
			}
		}
		if st.Closed {
			fmt.Fprintln(w)
			render.HumanRetry(w, st, o.Retry)
			if o.Ended != nil {
				o.Ended(w)
			}
			if why := shortfall(st); why != "" {
				fmt.Fprintln(w, "\n"+visible.String(why))
				return ErrFellShort
			}
			return nil
		}
		redraw = false
		if p.wait(ctx, ended) {
			// Read at once: the run just ended. Once only; the reads go
			// on should this one not show it closed yet.
			ended = nil
		} else {
			redraw = p.unitsOnly
		}
	}
}

// passing reports whether err, from reading a run, may pass: a timeout or
// an unavailable or busy server, not a run that is not there or ended
// otherwise.
func passing(err error) bool {
	var unavailable *serviceerror.Unavailable
	var exhausted *serviceerror.ResourceExhausted
	var deadline *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &unavailable) ||
		errors.As(err, &exhausted) || errors.As(err, &deadline)
}

// News is what a worker in this process tells Run of its
// activities: a wake-up, and when a read of the run first shows the
// latest of them.
type News struct {
	wake chan struct{}
	// due is that time, in Unix nanoseconds: the start of an activity is
	// in the run's state at once (the workflow task that scheduled it is
	// done), its end once the run has taken it in (newsSettle after).
	due atomic.Int64

	// units holds, by campaign workflow id, the units of runs of units
	// (activity.RunUnits) that started and ended, as the worker told
	// them; unitsTold counts them.
	mu        sync.Mutex
	units     map[string]*status.RunsProgress
	unitsTold atomic.Int64
}

// UnitStarted and UnitEnded are news of a unit of a run of units that
// started or ended: follow shows it at once, without reading the run,
// which takes the unit in only once the run reports
// (status.WithRunsProgress).
func (n *News) UnitStarted(workflowID string, u status.UnitRef) {
	n.unit(workflowID, func(rp *status.RunsProgress) { rp.AtWork = append(rp.AtWork, u) })
}

func (n *News) UnitEnded(workflowID string, u status.UnitOutcome) {
	n.unit(workflowID, func(rp *status.RunsProgress) { rp.Done = append(rp.Done, u) })
}

func (n *News) unit(workflowID string, add func(*status.RunsProgress)) {
	n.mu.Lock()
	if n.units == nil {
		n.units = map[string]*status.RunsProgress{}
	}
	rp := n.units[workflowID]
	if rp == nil {
		rp = &status.RunsProgress{}
		n.units[workflowID] = rp
	}
	add(rp)
	n.unitsTold.Add(1)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// tells reports whether the worker told of every unit that st, a read
// of campaign workflowID, shows at work: then what it tells shows the
// units its runs finished and started (unitsOf), which a query of the
// campaign alone does not (it shows a run's units as the run started
// them until the run reports). Until then a follower reads the runs'
// progress where their heartbeats keep it. That is every read when no
// worker here runs the campaign, and, when one does, while a run another
// process started waits for its next attempt: its first unit shows at
// work, and the units it finished are in its heartbeats alone.
func (n *News) tells(workflowID string, st *status.Run) bool {
	if n == nil || st == nil || st.Campaign == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	rp := n.units[workflowID]
	if rp == nil {
		return false
	}
	told := make(map[status.UnitRef]bool, len(rp.AtWork)+len(rp.Done))
	for _, u := range rp.AtWork {
		told[u] = true
	}
	for _, d := range rp.Done {
		told[status.UnitRef{Key: d.Key, Attempt: d.Attempt}] = true
	}
	for _, u := range st.Campaign.Units {
		if u.Phase == status.TaskRunning && !told[status.UnitRef{Key: u.Key, Attempt: u.Attempts}] {
			return false
		}
	}
	return true
}

// unitsOf is what the worker told of the units of campaign workflowID,
// and how many units of every campaign it had told of then.
func (n *News) unitsOf(workflowID string) (int64, status.RunsProgress) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var rp status.RunsProgress
	if u := n.units[workflowID]; u != nil {
		rp = status.RunsProgress{Done: slices.Clone(u.Done), AtWork: slices.Clone(u.AtWork)}
	}
	return n.unitsTold.Load(), rp
}

// newsSettle is how long after an activity ends the run has taken its
// end in (the workflow task that follows an activity).
const newsSettle = 200 * time.Millisecond

// NewNews is news of no activity yet.
func NewNews() *News { return &News{wake: make(chan struct{}, 1)} }

// Tell is news of an activity that started or ended.
func (n *News) Tell(ended bool) {
	due := time.Now()
	if ended {
		due = due.Add(newsSettle)
	}
	for {
		old := n.due.Load()
		if old >= due.UnixNano() || n.due.CompareAndSwap(old, due.UnixNano()) {
			break
		}
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// readPace says when follow reads its run again. Without news from a
// worker in this process, each second. With it, once news comes (an
// activity started or ended: a unit began or finished) that the last
// read did not show, when a read shows it (see News) and never
// sooner than a second after the last read; and otherwise every five
// seconds, for what happens without an activity of this process (an
// approval awaited, a worker elsewhere). A run whose units work for
// minutes is then read every few seconds, not every second, and the
// start of the next unit that a read after the end of one already showed
// does not read it again: each read is a query the server hands to the
// worker.
type readPace struct {
	news *News
	// last is when the last read began.
	last time.Time
	// every is the least time between two reads; idle the most while this
	// process's worker has no news.
	every, idle time.Duration
	// shown is how many units the worker had told of (News.unitsTold)
	// when follow last drew; unitsOnly says that wait returned for units
	// told since, which follow draws without reading the run.
	shown     int64
	unitsOnly bool
}

func newReadPace(news *News) *readPace {
	p := &readPace{news: news, every: time.Second, idle: time.Second}
	if news != nil {
		p.idle = 5 * time.Second
	}
	return p
}

// read records a read that began at began.
func (p *readPace) read(began time.Time) { p.last = began }

// wait returns when the next read is due, or ctx ends; it reports
// whether ended was closed (the run ended).
func (p *readPace) wait(ctx context.Context, ended <-chan struct{}) bool {
	p.unitsOnly = false
	t := time.NewTimer(time.Until(p.last.Add(p.idle)))
	defer t.Stop()
	var wake <-chan struct{}
	if p.news != nil {
		wake = p.news.wake
	}
	var due time.Time
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		case <-ended:
			return true
		case <-wake:
		}
		// News the last read already showed reads nothing new.
		if due = time.Unix(0, p.news.due.Load()); due.After(p.last) {
			break
		}
		if p.news.unitsTold.Load() > p.shown {
			p.unitsOnly = true
			return false
		}
	}
	t.Reset(max(time.Until(due), time.Until(p.last.Add(p.every))))
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-ended:
		return true
	}
	return false
}

// awaitClose's channel is closed when the run id has ended (its latest
// run's close event, waited for on the server), or the wait failed: the
// end of a run is printed when it happens, not on the next tick.
func awaitClose(ctx context.Context, c client.Client, id string) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		it := c.GetWorkflowHistory(ctx, id, "", true, enumspb.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT)
		if it.HasNext() {
			_, _ = it.Next()
		}
	}()
	return done
}

type progressRow struct{ key, state string }

// progressRows is one line per repository (and one for the campaign), and
// the tasks awaiting approval.
func progressRows(ctx context.Context, rd *statetemporal.Reader, st *status.Run) (rows []progressRow, waiting []string) {
	if st.Task != nil {
		if st.Task.Phase == status.TaskAwaitingApproval {
			waiting = append(waiting, st.ID)
		}
		return []progressRow{{st.ID, string(st.Task.Phase)}}, waiting
	}
	units := append([]status.UnitResult(nil), st.Campaign.Units...)
	sort.Slice(units, func(i, j int) bool { return units[i].Key < units[j].Key })
	rows = append(rows, progressRow{"campaign", string(st.Campaign.Phase) + suffix(st.Campaign.Message)})
	for _, u := range units {
		state := string(u.Phase)
		if !st.Closed {
			if phase, ok := rd.UnitPhase(ctx, u); ok {
				state = string(phase)
				if phase == status.TaskAwaitingApproval {
					waiting = append(waiting, u.WorkflowID)
				}
			}
		}
		rows = append(rows, progressRow{u.Key, state})
	}
	return rows, waiting
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return " (" + msg + ")"
}

// shortfall says how a finished run fell short of changing every
// repository, or is "" when it did not: then run exits 0, else 1.
func shortfall(st *status.Run) string {
	if c := st.Campaign; c != nil {
		if c.Phase == status.CampaignCompleted && c.Summary.Failed == 0 && c.Summary.Cancelled == 0 {
			return ""
		}
		return fmt.Sprintf("%s ended %s: %s", st.ID, c.Phase, c.Message)
	}
	res := st.Task.Final
	if st.Task.Phase != status.TaskCompleted {
		if res.Error != "" {
			return fmt.Sprintf("%s ended %s: %s", st.ID, st.Task.Phase, render.OneLine(res.Error))
		}
		return fmt.Sprintf("%s ended %s", st.ID, st.Task.Phase)
	}
	failed := 0
	for _, r := range res.Repositories {
		if r.Status == "failed" {
			failed++
		}
	}
	if failed == 0 {
		return ""
	}
	return fmt.Sprintf("%s ended with failures: %d of %d repositories failed", st.ID, failed, len(res.Repositories))
}

// awaitHint says how to decide on task t of run id, which awaits approval.
func awaitHint(t, id string) string {
	return fmt.Sprintf("%s awaits approval: `fleetlift status %s --diff` shows it and its digest D; then `fleetlift approve %s --digest D` (or reject, or steer --prompt \"...\")",
		visible.String(t), visible.String(id), visible.String(id))
}
