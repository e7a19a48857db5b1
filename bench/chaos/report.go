package main

import (
	"fmt"
	"regexp"
	"sort"
	"time"
)

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
	fmt.Fprintf(w, "  %-46s %8d  0   (extra branches %d, campaign runs %d, task runs %d; %d task runs for %d repositories, %d sandboxes lost and replaced in units the campaign ran itself, %d ran more than once)\n",
		"duplicate branches or runs", f.Duplicates(), f.ExtraBranches, f.ExtraCampaignRuns, f.DuplicateTaskRuns, f.TaskRuns, f.Repos, f.SandboxesLost, f.RanAgain)
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
