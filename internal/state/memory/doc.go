// Package memory is a state.Store held in process memory: for tests, and
// for planning against empty state (`fleetlift plan --state none`).
//
// memory imports package state and the standard library only.
package memory
