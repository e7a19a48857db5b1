package main

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// at is a moment n seconds into a round.
func at(n int) time.Time { return time.Date(2026, 11, 25, 0, 0, n, 0, time.UTC) }

func task(unit, suffix string, start, close int, status, phase string) Run {
	r := Run{WorkflowID: "campaign/chaos/" + unit + "@0123456789ab" + suffix, RunID: unit + suffix, Status: status, Phase: phase, Start: at(start)}
	if close >= 0 {
		r.Close = at(close)
	}
	return r
}

func campaignRun(start int, status string) Run {
	return Run{WorkflowID: "campaign/chaos", RunID: "c" + status, Status: status, Start: at(start)}
}

func good(name string) Refs {
	return Refs{Name: name, Branches: []string{expectedBranch}, Correct: true}
}

func allCompleted(keys ...string) []Unit {
	var out []Unit
	for _, k := range keys {
		out = append(out, Unit{Key: k, Phase: "completed"})
	}
	return out
}

func TestTally(t *testing.T) {
	tests := []struct {
		name string
		o    Observation
		want Figures
		why  string // a part of HumanWhy
	}{
		{
			name: "no change: every repository done once",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed", CampaignPhase: "completed",
				Repos: []Refs{good("a"), good("b")},
				Runs: []Run{campaignRun(0, "completed"),
					task("a", "", 1, 5, "completed", "completed"), task("b", "", 1, 6, "completed", "completed")},
				Units: allCompleted("a", "b"),
			},
			want: Figures{Repos: 2, Correct: 2, TaskRuns: 2},
		},
		{
			name: "a retry after a failure is no duplicate",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed",
				Repos: []Refs{good("a")},
				Runs: []Run{campaignRun(0, "completed"),
					task("a", "", 1, 3, "completed", "failed"), task("a", "/retry-1", 4, 8, "completed", "completed")},
				Units: allCompleted("a"),
			},
			want: Figures{Repos: 1, Correct: 1, TaskRuns: 2, RanAgain: 1},
		},
		{
			name: "a unit the campaign ran itself, which lost two sandboxes, ran again: no duplicate",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed",
				Repos: []Refs{good("a"), good("b")},
				Runs:  []Run{campaignRun(0, "completed")},
				Units: []Unit{{Key: "a", Phase: "completed", Lost: 2}, {Key: "b", Phase: "completed"}},
			},
			want: Figures{Repos: 2, Correct: 2, RanAgain: 1, SandboxesLost: 2},
		},
		{
			name: "overlapping runs and a second completion are duplicates",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed",
				Repos: []Refs{good("a"), good("b")},
				Runs: []Run{
					task("a", "", 1, 5, "completed", "completed"), task("a", "/retry-1", 3, 9, "completed", "failed"),
					task("b", "", 1, 2, "completed", "completed"), task("b", "/retry-1", 3, 4, "completed", "completed"),
				},
				Units: allCompleted("a", "b"),
			},
			want: Figures{Repos: 2, Correct: 2, TaskRuns: 4, RanAgain: 2, DuplicateTaskRuns: 2},
		},
		{
			name: "a run still open overlaps every later one",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed",
				Repos: []Refs{good("a")},
				Runs:  []Run{task("a", "", 1, -1, "running", ""), task("a", "/retry-1", 30, 40, "completed", "completed")},
				Units: allCompleted("a"),
			},
			want: Figures{Repos: 1, Correct: 1, TaskRuns: 2, RanAgain: 1, DuplicateTaskRuns: 1},
		},
		{
			name: "two campaign runs, continue-as-new not counted; other workflows ignored",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed",
				Repos: []Refs{good("a")},
				Runs: []Run{campaignRun(0, "continued-as-new"), campaignRun(1, "completed"), campaignRun(2, "terminated"),
					{WorkflowID: "campaign/chaos-other", Status: "completed"}, {WorkflowID: "fleetlift/reconciler-lease", Status: "running"},
					task("a", "", 1, 2, "completed", "completed")},
				Units: allCompleted("a"),
			},
			want: Figures{Repos: 1, Correct: 1, TaskRuns: 1, ExtraCampaignRuns: 1},
		},
		{
			name: "extra branches: a correct branch beside another is not exactly one",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed",
				Repos: []Refs{
					{Name: "a", Branches: []string{expectedBranch, "fleetlift/go-directive/chaos-2"}, Correct: true},
					good("b"),
				},
				Units: allCompleted("a", "b"),
			},
			want: Figures{Repos: 2, Correct: 1, ExtraBranches: 1, Human: true},
			why:  "1 repositories lack their correct branch",
		},
		{
			name: "removed: paused at the threshold, agents' tasks failed, the rest never started",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "running", CampaignPhase: "paused", CampaignNote: "4 of 10 finished units failed",
				Repos: []Refs{good("a"), {Name: "b", Why: "no branch"}, {Name: "c", Why: "no branch"}},
				Runs:  []Run{task("a", "", 1, 2, "completed", "completed"), task("b", "", 1, 2, "completed", "failed")},
				Units: []Unit{{Key: "a", Phase: "completed"}, {Key: "b", Phase: "failed", Error: "agent exited"}, {Key: "c", Phase: "pending"}},
			},
			want: Figures{Repos: 3, Correct: 1, TaskRuns: 2, Stuck: 1, Human: true},
			why:  "2 of 3 units did not complete (1 failed, 1 pending); the campaign did not finish (running, phase paused: 4 of 10 finished units failed)",
		},
		{
			name: "approvals lost: approved, then no branch",
			o: Observation{
				CampaignID: "chaos", CampaignStatus: "completed",
				Repos:    []Refs{good("a"), {Name: "b", Why: "no branch"}},
				Units:    []Unit{{Key: "a", Phase: "completed"}, {Key: "b", Phase: "failed"}},
				Approved: []string{"a", "b", "b"},
			},
			want: Figures{Repos: 2, Correct: 1, ApprovalsLost: 1, Human: true},
			why:  "1 of 2 units did not complete (1 failed)",
		},
		{
			name: "up never came back: state unknown, every unit stuck",
			o: Observation{
				CampaignID: "chaos", Repos: []Refs{{Name: "a"}, {Name: "b"}},
				RestartsFailed: 3, GaveUp: true,
			},
			want: Figures{Repos: 2, Stuck: 2, RestartsFailed: 3, Human: true},
			why:  "the campaign's state could not be read; `up` could not be started again; the campaign did not finish (unknown)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Tally(tt.o)
			why := got.HumanWhy
			got.HumanWhy = ""
			if got != tt.want {
				t.Errorf("Tally:\n got %+v\nwant %+v", got, tt.want)
			}
			if !strings.Contains(why, tt.why) {
				t.Errorf("HumanWhy = %q, want it to say %q", why, tt.why)
			}
			if tt.want.Human != (why != "") {
				t.Errorf("HumanWhy = %q with Human %t", why, tt.want.Human)
			}
			wantGoal := tt.name == "no change: every repository done once" || tt.name == "a retry after a failure is no duplicate" ||
				tt.name == "a unit the campaign ran itself, which lost two sandboxes, ran again: no duplicate"
			if got.MeetsGoal() != wantGoal {
				t.Errorf("MeetsGoal() = %t, want %t", got.MeetsGoal(), wantGoal)
			}
		})
	}
}

func TestUnitKey(t *testing.T) {
	tests := []struct{ id, want string }{
		{"campaign/chaos/svc-03@0123456789ab", "svc-03"},
		{"campaign/chaos/svc-03@0123456789ab/retry-2", "svc-03"},
		{"campaign/chaos/group/x@0123456789ab", "group/x"},
		{"campaign/chaos", ""},
		{"campaign/chaos/svc-03", ""},
		{"campaign/chaos-2/svc-03@0123456789ab", ""},
	}
	for _, tt := range tests {
		if got := unitKey("chaos", tt.id); got != tt.want {
			t.Errorf("unitKey(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestParseModes(t *testing.T) {
	got, err := parseModes("agents, first-start")
	if err != nil || len(got) != 2 || got[0] != AgentsOnly || got[1] != FirstStart {
		t.Errorf("parseModes = %v, %v", got, err)
	}
	if all, err := parseModes("all"); err != nil || len(all) != len(modeNames) {
		t.Errorf("parseModes(all) = %v, %v", all, err)
	}
	if _, err := parseModes("docker"); err == nil {
		t.Error("parseModes(docker): no error")
	}
}

func TestKillPoints(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, seed))
		got := killPoints(rng, 20, 5, false)
		if len(got) != 5 || !slices.IsSorted(got) || got[0] < 0 || got[4] > 19 || len(slices.Compact(slices.Clone(got))) != 5 {
			t.Fatalf("seed %d: %v, want 5 distinct sorted numbers from 0 to 19", seed, got)
		}
		got = killPoints(rng, 20, 5, true)
		if len(got) != 5 || !slices.IsSorted(got) || got[0] < 1 || got[4] > 19 || len(slices.Compact(slices.Clone(got))) != 5 {
			t.Fatalf("seed %d, approvals: %v, want 5 distinct sorted numbers from 1 to 19", seed, got)
		}
	}
	got := killPoints(rand.New(rand.NewPCG(1, 1)), 3, 5, true)
	if len(got) != 5 || !slices.IsSorted(got) || got[0] != 1 || got[4] != 2 {
		t.Errorf("more kills than approvals: %v, want the points 1 and 2, repeated", got)
	}
	if got := killPoints(rand.New(rand.NewPCG(1, 1)), 20, 0, false); len(got) != 0 {
		t.Errorf("no kills: %v", got)
	}
}
