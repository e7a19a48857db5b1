// Package spec loads Task, Campaign and Config definitions written in CUE or
// YAML from an fs.FS, unifies them with the CUE schema in package schemas,
// applies its defaults, decodes them into Go types and gives each a stable
// digest. LoadApprovals reads approval records (approvals/**.yaml) the same
// way, against the schema's #Approval; package approval gives them meaning.
//
// CUE is the one validator: every file, YAML or CUE, is unified with the
// schema, and the schema alone says what is valid and what a default is.
//
// Loading is bounded: file size, file count, per-file evaluation time and
// the wall time of loading one revision (Loader.Revision) are limited, and
// evaluation can run in separate worker processes (see Pool) so
// that a CUE definition that never ends, or grows without end, is stopped
// without harming the caller.
//
// spec imports no SDK (Temporal, client-go, go-github, Docker); only CUE,
// the standard library and notify (which parses notification templates).
package spec
