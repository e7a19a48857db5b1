// Package gcpace sets the GC percent of fleetlift's commands: they are
// short-lived and allocation-heavy (CUE evaluation, starting the
// embedded server), and collect less often at a higher percent. main
// calls Set once it knows it runs one of those commands; the hidden
// jail and the spec worker that the same binary serves do not, and run
// at the percent the program started with (GOGC's, or 100).
//
// gcpace imports only the standard library.
package gcpace

import "runtime/debug"

// Percent is the GC percent Set gives the program.
const Percent = 400

// Set sets the program's GC percent to Percent and returns the one it
// had.
func Set() (before int) { return debug.SetGCPercent(Percent) }
