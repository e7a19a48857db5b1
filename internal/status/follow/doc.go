// Package follow follows one run to its end, as `fleetlift run` shows it:
// a line per repository (redrawn in place on a terminal), a hint for each
// task awaiting approval, then the result table (package render) and why
// the run fell short, if it did.
//
// It reads the run through state/temporal.Reader, at the pace News from
// a worker in the same process sets (a read when an activity starts or
// ends, else every few seconds), and waits for the run's close event on
// the server so that the end is shown when it happens. A read that timed
// out or found the server busy is tried again.
//
// It imports the Temporal SDK client (for the close event and its errors),
// state/temporal, status and render; never the server.
package follow
