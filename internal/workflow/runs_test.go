package workflow_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// runsInput is a campaign of n direct units, parallel at once, with no
// failure threshold.
func runsInput(n, parallel int) workflow.CampaignInput {
	in := campaignInput(n)
	in.StrictBatches = false
	in.ThresholdPercent = 100
	in.MaxParallel = parallel
	return in
}

// Short units run in runs of several: fewer activities than units, each
// unit once in a sandbox of its own, no run longer than a fair share of
// the units left, and every unit's pull request recorded.
func TestCampaignRunsShortUnitsInRuns(t *testing.T) {
	f := &fleet{}
	env := newCampaignEnv(f)
	env.ExecuteWorkflow(workflow.Campaign, runsInput(12, 2))
	st := campaignResult(t, env)
	if st.Phase != status.CampaignCompleted || st.Summary.Completed != 12 || st.Summary.PRsCreated != 12 {
		t.Fatalf("campaign %s (%s) %+v", st.Phase, st.Message, st.Summary)
	}
	total := 0
	for _, n := range f.runs {
		total += n
	}
	// Each slot takes its share of the 12, counting those the other
	// took: two runs of 6, one activity per slot.
	if total != 12 || !slices.Equal(f.runs, []int{6, 6}) {
		t.Errorf("runs of %v units: want two of 6 (each slot's share)", f.runs)
	}
	started := slices.Clone(f.started)
	slices.Sort(started)
	if len(slices.Compact(started)) != 12 || len(f.started) != 12 {
		t.Errorf("units started %v: want each of the 12 once", f.started)
	}
	for id, key := range f.unit {
		if !strings.HasPrefix(id, "default-test-workflow-id-"+key+"-") {
			t.Errorf("unit %s ran in sandbox %s: want one named for the unit", key, id)
		}
	}
	for _, u := range st.Units {
		if u.Attempts != 1 || len(u.PRs) != 1 {
			t.Errorf("%s: %d attempts, PRs %v", u.Key, u.Attempts, u.PRs)
		}
	}
}

// With a failure threshold, a run stops after a unit that failed, so
// that the campaign pauses before more units start, as it does with one
// unit per activity; the units the run did not start wait, pending, and
// continue starts them.
func TestCampaignRunStopsAtAFailureForTheThreshold(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r2": true}}
	env := newCampaignEnv(f)
	in := runsInput(8, 1)
	in.ThresholdPercent = 30
	paused := continueAfter(t, env, time.Hour)
	env.ExecuteWorkflow(workflow.Campaign, in)
	st := campaignResult(t, env)
	// A run of the 8 that stops after r2: 1 of 3 finished units failed,
	// over 30%.
	want := "r0=completed r1=completed r2=failed r3=pending r4=pending r5=pending r6=pending r7=pending"
	if paused.Phase != status.CampaignPaused || phases(*paused) != want {
		t.Errorf("at the threshold: %s %s, want paused: %s", paused.Phase, phases(*paused), want)
	}
	if !slices.Equal(f.runs, []int{8, 5}) {
		t.Errorf("runs %v: want a run of 8 that stops after r2, then one of the 5 left", f.runs)
	}
	if st.Phase != status.CampaignCompletedWithFailures || st.Summary.Completed != 7 || st.Summary.Failed != 1 {
		t.Errorf("after continue: %s %+v", st.Phase, st.Summary)
	}
}

// Once units have been timed, a run takes as many as fit in about a
// minute, and works no longer.
func TestCampaignRunsWorkAboutAMinute(t *testing.T) {
	f := &fleet{took: 8 * time.Second}
	env := newCampaignEnv(f)
	env.ExecuteWorkflow(workflow.Campaign, runsInput(40, 1))
	st := campaignResult(t, env)
	if st.Summary.Completed != 40 {
		t.Fatalf("campaign %s: %+v", st.Phase, st.Summary)
	}
	// The first run has no timings: a fair share, at most 16. Then units
	// of 8 seconds: 7 fit in a minute.
	if want := []int{16, 7, 7, 7, 3}; !slices.Equal(f.runs, want) {
		t.Errorf("runs of %v units, want %v", f.runs, want)
	}
	for _, w := range f.within {
		if w != time.Minute {
			t.Errorf("a run works within %s, want a minute", w)
		}
	}
}

// What a run of units has done shows before the run reports: the units
// done, as its heartbeat or its worker tells them, laid over the
// campaign's state show each unit as the campaign records it once the
// run has reported, with the counts to match, and the unit at work shows
// running. What is told of another attempt of a unit, or of a unit the
// campaign has recorded, changes nothing.
func TestRunsShowEachUnitAsItEnds(t *testing.T) {
	f := &fleet{fail: map[string]bool{"r2": true}}
	env := newCampaignEnv(f)
	type seen struct {
		before, after status.CampaignState
		done          []status.UnitOutcome
	}
	var views []seen
	f.afterUnit = func(done []status.UnitOutcome) {
		st := queryState(t, env)
		views = append(views, seen{before: st, after: status.WithRunsProgress(st, status.RunsProgress{Done: done}), done: done})
	}
	in := runsInput(5, 1)
	env.ExecuteWorkflow(workflow.Campaign, in)
	final := campaignResult(t, env)
	if !slices.Equal(f.runs, []int{5}) {
		t.Fatalf("runs of %v units, want one of 5", f.runs)
	}
	for i, v := range views {
		for j, u := range v.after.Units {
			want := final.Units[j]
			if j > i {
				// Not done yet: as the campaign says.
				want = v.before.Units[j]
			}
			if u.Phase != want.Phase || u.Error != want.Error || !slices.Equal(u.PRs, want.PRs) || u.Attempts != want.Attempts {
				t.Errorf("after unit %d, %s shows %s %q %v, want %s %q %v", i, u.Key, u.Phase, u.Error, u.PRs, want.Phase, want.Error, want.PRs)
			}
		}
		s := v.after.Summary
		failed := 0
		if i >= 2 {
			failed = 1
		}
		if s.Total != 5 || s.Completed != i+1-failed || s.Failed != failed || s.Running != 0 || s.PRsCreated != i+1-failed {
			t.Errorf("after unit %d the counts are %+v", i, s)
		}
		if v.before.Units[0].Phase != status.TaskRunning || v.before.Units[1].Phase != status.TaskQueued {
			t.Errorf("the campaign itself shows %s", phases(v.before))
		}
	}
	if len(views) != 5 {
		t.Fatalf("told of %d units, want 5", len(views))
	}
	// The unit after the first at work: running, as the first is.
	first := views[0]
	atWork := status.WithRunsProgress(first.before, status.RunsProgress{Done: first.done, AtWork: []status.UnitRef{{Key: "r1", Attempt: 1}}})
	if phases(atWork) != "r0=completed r1=running r2=queued r3=queued r4=queued" || atWork.Summary.Running != 1 || atWork.Summary.Completed != 1 {
		t.Errorf("r0 done, r1 at work: %s, %+v", phases(atWork), atWork.Summary)
	}
	last := views[4]
	// Another attempt's outcome, and one the campaign has recorded.
	stale := slices.Clone(last.done)
	for i := range stale {
		stale[i].Attempt = 2
	}
	if got := status.WithRunsProgress(last.before, status.RunsProgress{Done: stale, AtWork: []status.UnitRef{{Key: "r1", Attempt: 2}}}); !reflect.DeepEqual(got, last.before) {
		t.Errorf("outcomes of another attempt changed the state: %s", phases(got))
	}
	if got := status.WithRunsProgress(final, status.RunsProgress{Done: last.done, AtWork: []status.UnitRef{{Key: "r4", Attempt: 1}}}); !reflect.DeepEqual(got, final) {
		t.Errorf("outcomes the campaign has recorded changed its state: %s, %+v", phases(got), got.Summary)
	}
	if phases(last.before) != "r0=running r1=queued r2=queued r3=queued r4=queued" {
		t.Errorf("overlaying changed the state it was given: %s", phases(last.before))
	}
}
