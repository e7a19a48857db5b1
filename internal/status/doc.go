// Package status is what fleetlift's workflows record of a run, and one
// run as `fleetlift status` and `fleetlift run` show it. The workflows
// (package workflow) write its types: a Task's TaskState and TaskResult,
// a Campaign's CampaignState with its UnitResults and Summary, the memo
// keys every run starts with, the status query's name and the search
// attribute of the phase. Readers (package state/temporal, follow/,
// render/) read them without linking the workflows or the Temporal SDK.
// Run and Entry are a run as a reader shows it: its state, and what the
// list of runs shows of it.
//
// Unlike package state, which is what the plan pairs with the desired
// state, a Run keeps everything the workflow records (attempts, model
// usage, the patches awaiting approval).
//
// It imports the agent protocol and the standard library; never an SDK,
// the workflows or the activities.
package status
