// Package gcpace collects garbage less often from the start of the
// program that imports it: its initialisation sets the GC percent to
// percent.
//
// Package initialisation runs in the order of the import paths of the
// packages ready to run theirs, and this one needs only runtime/debug:
// it runs before the large dependencies of fleetlift's command (the
// Temporal server, CUE, Kubernetes' client), whose initialisation
// allocates about 14 MB, and which at the default percent took four
// collections before main ran.
package gcpace

import "runtime/debug"

// percent is the GC percent the importing program starts with:
// fleetlift's commands are short-lived and allocation-heavy (CUE
// evaluation, starting the embedded server).
const percent = 400

// started is the percent the runtime started with: GOGC's, or 100.
var started = debug.SetGCPercent(percent)

// Restore gives the program back the GC percent it started with, for a
// part of it that is not one of those commands.
func Restore() { debug.SetGCPercent(started) }
