package protocol

import "fmt"

// ReportOverTargets reports whether m is a report over targets (a
// transformation repository run over target repositories): its outcome
// is its report's alone, carried by the transformation repository's
// result, the last one.
func (m *Manifest) ReportOverTargets() bool {
	return m.Mode == ModeReport && m.Transformation != nil
}

// Judged is the part of repos a result's terminal phase is judged by:
// every repository, or for a report over targets the last result alone.
func Judged(overTargets bool, repos []RepositoryResult) []RepositoryResult {
	if overTargets && len(repos) > 0 {
		return repos[len(repos)-1:]
	}
	return repos
}

// Summarize counts outcomes ("2 succeeded, 1 failed, 0 skipped") and
// returns the number failed and the first failure, "name: error".
func Summarize(results []RepositoryResult) (msg string, failed int, firstErr string) {
	counts := map[string]int{}
	for _, res := range results {
		counts[res.Status]++
		if res.Status == "failed" && firstErr == "" {
			firstErr = res.Name + ": " + res.Error
		}
	}
	msg = fmt.Sprintf("%d succeeded, %d failed, %d skipped", counts["success"], counts["failed"], counts["skipped"])
	return msg, counts["failed"], firstErr
}

// Outcome is the terminal phase judged amounts to: failed when every one
// of them failed, complete otherwise; with Summarize's message and first
// failure.
func Outcome(judged []RepositoryResult) (phase Phase, msg, firstErr string) {
	msg, failed, firstErr := Summarize(judged)
	if n := len(judged); n > 0 && failed == n {
		return PhaseFailed, msg, firstErr
	}
	return PhaseComplete, msg, ""
}

// ReportsFailed is the error of a repository some of whose for_each
// reports failed.
func ReportsFailed(failed, total int) string {
	return fmt.Sprintf("%d of %d reports failed", failed, total)
}
