// Package render shows a run's state (status.Run) and the list of runs
// (status.Entry) two ways: for people, as `fleetlift status` and the end
// of `fleetlift run` print them, and as the JSON of `status -o json`
// (format_version 1, documented in docs/running.md). The views only
// present; reading the runs is package state/temporal's.
//
// Text from a run (messages, errors, repository names, paths, patches)
// is shown through package visible: its control characters are shown,
// not obeyed, and in JSON keep their value with every character a
// terminal would act on escaped.
//
// It imports status and agent/protocol for the types it shows,
// and no client of any SDK.
package render
