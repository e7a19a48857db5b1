// Package visible makes untrusted text safe to print at a terminal:
// control characters, escape sequences among them, are shown instead of
// obeyed. Text that fleetlift did not write (diffs, reports, messages and
// errors from runs, pull request titles, definitions' ids and files) can
// then neither move the cursor, clear or overwrite lines, recolour,
// retitle the terminal, nor reorder what is shown, so a person approving
// a change sees all of it. Tabs and newlines are kept.
//
// The status, plan and approve views (and every other view of the CLI
// that shows such text) pass it through String or Writer.
//
// visible imports only the standard library.
package visible
