package plan

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetlift/fleetlift/internal/approval"
	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// decideApprovals binds each approval record to the recorded state. A
// record applies when what it acts on is there: the very result it names
// awaiting approval (approve, reject, steer), a paused campaign
// (continue), an unfinished run (abort), failed repositories (retry); and
// when it names a generation, only while the recorded run is that
// generation (continue, abort and retry always name one), so a record
// left in Git never acts on a later run.
// Records that would apply together but disagree (approve and reject of
// one result; continue and abort of one campaign) are all ignored; exact
// duplicates apply once. Nothing applies to a run this plan cancels
// (prune, or an update that restarts it).
func decideApprovals(records []approval.Record, refused []Refusal, recs map[string]*state.Campaign, changes []Change) []ApprovalChange {
	ending := map[string]string{}
	for _, c := range changes {
		switch {
		case c.Action == Prune:
			ending[c.ID] = "its run is cancelled: the campaign is pruned"
		case c.SpecChanged() && c.Strategy == spec.UpdateRestart:
			ending[c.ID] = "its run is cancelled: the campaign restarts with its new spec"
		}
	}
	out := make([]ApprovalChange, len(records), len(records)+len(refused))
	for i, r := range records {
		out[i] = decide(r, recs)
		if why, ok := ending[r.Campaign()]; ok && out[i].Status == ApprovalApply {
			out[i].Status, out[i].Reason = ApprovalIgnored, why
		}
	}
	for _, r := range refused {
		a := ApprovalChange{Record: r.Record, Status: ApprovalIgnored, Reason: r.Reason}
		if rec := recs[r.Record.Campaign()]; rec != nil {
			if p, ok := rec.Pending(r.Record.Target); ok {
				a.Current = p.ResultDigest
			}
		}
		out = append(out, a)
	}
	slices.SortStableFunc(out, func(a, b ApprovalChange) int {
		return cmp.Or(cmp.Compare(a.Record.Target, b.Record.Target), cmp.Compare(a.Record.File, b.Record.File),
			cmp.Compare(a.Record.Action, b.Record.Action))
	})

	// Group the applying records by what they decide.
	groups := map[string][]int{}
	var keys []string
	for i, a := range out {
		if a.Status != ApprovalApply {
			continue
		}
		k := a.Record.Target + "\x00" + class(a.Record.Action)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range keys {
		idx := groups[k]
		if len(idx) < 2 {
			continue
		}
		first := out[idx[0]].Record
		same := true
		for _, i := range idx[1:] {
			r := out[i].Record
			if r.Action != first.Action || r.Prompt != first.Prompt {
				same = false
			}
		}
		if same {
			for _, i := range idx[1:] {
				out[i].Status = ApprovalIgnored
				out[i].Reason = "same as " + first.File + ", which applies"
			}
			continue
		}
		for _, i := range idx {
			var others []string
			for _, j := range idx {
				if j != i {
					others = append(others, fmt.Sprintf("%s (%s)", out[j].Record.File, out[j].Record.Action))
				}
			}
			out[i].Status = ApprovalIgnored
			out[i].Reason = "conflicts with " + strings.Join(others, ", ") + "; none of them applies"
		}
	}
	return out
}

// class groups the actions that decide the same thing.
func class(a approval.Action) string {
	switch a {
	case approval.Approve, approval.Reject, approval.Steer:
		return "result"
	case approval.Continue, approval.Abort:
		return "run"
	}
	return string(a)
}

func decide(r approval.Record, recs map[string]*state.Campaign) ApprovalChange {
	a := ApprovalChange{Record: r, Status: ApprovalIgnored}
	if err := r.Validate(); err != nil {
		a.Reason = err.Error()
		return a
	}
	rec := recs[r.Campaign()]
	if rec != nil {
		if p, ok := rec.Pending(r.Target); ok {
			a.Current = p.ResultDigest
		}
		if slices.Contains(rec.AppliedApprovals, r.ID()) {
			a.Status, a.Reason = ApprovalDone, "carried out by the current run"
			return a
		}
		if r.Generation != 0 && r.Generation != rec.Generation {
			a.Reason = fmt.Sprintf("names generation %d of %s, and the recorded run is generation %d: a record decides only about the run it names",
				r.Generation, rec.ID, rec.Generation)
			return a
		}
	}
	if r.Action.BindsResult() {
		switch {
		case a.Current == "":
			a.Reason = "nothing awaits approval for " + r.Target
		case a.Current != r.ResultDigest:
			a.Reason = fmt.Sprintf("result changed since approved: digest %s, now %s", ShortDigest(r.ResultDigest), ShortDigest(a.Current))
		default:
			a.Status, a.Reason = ApprovalApply, ""
		}
		return a
	}
	if rec == nil {
		a.Reason = fmt.Sprintf("%s has no recorded run", r.Campaign())
		return a
	}
	if rec.Kind != state.KindCampaign {
		a.Reason = fmt.Sprintf("%s acts on a campaign; %s is a %s", r.Action, rec.ID, rec.Kind)
		return a
	}
	switch r.Action {
	case approval.Continue:
		if rec.Phase != state.PhasePaused {
			a.Reason = fmt.Sprintf("nothing to continue: %s is %s, not paused", rec.ID, phase(rec.Phase))
			return a
		}
	case approval.Abort:
		if rec.Phase.Done() {
			a.Reason = fmt.Sprintf("nothing to abort: %s is %s", rec.ID, phase(rec.Phase))
			return a
		}
	case approval.Retry:
		if reason := retryable(rec, r.Unit()); reason != "" {
			a.Reason = reason
			return a
		}
	}
	a.Status = ApprovalApply
	return a
}

// retryable says why nothing would be retried, or "" when something would.
func retryable(rec *state.Campaign, unit string) string {
	if unit == "" {
		for _, rp := range rec.Repos {
			if rp.Status == state.RepoFailed {
				return ""
			}
		}
		return fmt.Sprintf("nothing to retry: no repository of %s failed", rec.ID)
	}
	for _, rp := range rec.Repos {
		if rp.Name != unit && !strings.HasPrefix(rp.Name, unit+"/") {
			continue
		}
		if rp.Status == state.RepoFailed {
			return ""
		}
	}
	return fmt.Sprintf("nothing to retry: %s/%s has not failed", rec.ID, unit)
}

func phase(p state.Phase) string {
	if p == "" {
		return "in an unknown phase"
	}
	return string(p)
}

// ShortDigest shortens "sha256:<64 hex>" to "sha256:" and 12 hex digits
// for people; other strings are returned as they are.
func ShortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12]
}
