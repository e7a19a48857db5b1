package status

// Run is a campaign's or a task's state: one of Campaign and Task is set.
type Run struct {
	// ID is the run's workflow id ("campaign/<id>" or "task/<id>").
	ID string
	// Closed says that the run has ended.
	Closed   bool
	Campaign *CampaignState
	Task     *TaskState
	// PullRequests are those the run opened, with what became of each
	// as its follower last read it (see PullRequests).
	PullRequests []FollowedPR
}

// Entry is a run as the list of runs shows it, with what its memo
// records. Times are RFC 3339, in UTC; Closed is "" while it runs.
type Entry struct {
	ID, RunID, Workflow string
	// Kind and Definition are the definition's, Digest its spec's,
	// Generation how many times it was started.
	Kind, Definition, Digest string
	Generation               int64
	// Status is the workflow's (running, completed, failed, …); Phase
	// the run's own (awaiting_approval, completed_with_failures, …).
	Status, Phase   string
	Started, Closed string
}
