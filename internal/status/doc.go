// Package status is one run as its workflow records it, for `fleetlift
// status` and `fleetlift run` to show: a campaign's or a task's state
// (Run), and a run as the list of runs shows it (Entry). Package
// state/temporal reads them; render/ shows them for people and as JSON;
// follow/ follows one run to its end.
//
// Unlike package state, which is what the plan pairs with the desired
// state, a Run keeps everything the workflow records (attempts, model
// usage, the patches awaiting approval).
//
// It imports workflow for the recorded types, and no client of any SDK.
package status
