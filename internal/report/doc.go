// Package report makes the reports of a report-mode run readable: one
// table over every repository (and every for_each target), whose columns
// come from the output schema, with each report's status, validation
// errors and a link to its body. The table has a text, a JSON, a CSV and
// a markdown view, and each body a markdown file of its own: what
// `fleetlift reports` prints and what the status mirror writes under
// reports/<id>/.
//
// New pairs a run's report rows (state.Report, which the state reader
// makes of what the run recorded) with its normalised spec, which names
// the schema.
//
// Text from the work (frontmatter values, bodies, errors) is never
// trusted: the markdown views quote it with package markdown, except a
// report's body, which is the agent's markdown and is written as it is
// into the body's own file. The text views leave control characters to
// the caller (package visible).
//
// report imports state, markdown and the standard library; no
// SDK, and not package spec, whose JSON form it reads.
package report
