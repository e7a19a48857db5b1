// Package logging makes the logger fleetlift's commands write to standard
// error: its format (text or JSON lines) and its level, as --log-format
// and --log-level name them, and a writer that turns the plain lines
// other code writes to standard error into records of that logger, so
// that with JSON every line there is a JSON object.
//
// logging imports only the standard library.
package logging
