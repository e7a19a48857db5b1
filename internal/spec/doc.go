// Package spec loads Task, Campaign and Config definitions written in CUE or
// YAML from an fs.FS, unifies them with the CUE schema in package schemas,
// applies its defaults, decodes them into Go types and gives each a stable
// digest. LoadApprovals reads approval records (approvals/**.yaml) the same
// way, against the schema's #Approval; package approval gives them meaning.
//
// A YAML Task or Campaign that is plain data and plainly valid is read
// without evaluating CUE (see decodeDirect): checked against the same
// constraints, with the same defaults, to the same definition and digest.
// Anything else, and every file with an error, is evaluated with CUE, whose
// verdict and messages are the reference.
//
// Loading is bounded: file size, file count, per-file evaluation time and
// the wall time of loading one revision (Loader.Revision) are limited, and
// evaluation can run in separate worker processes (see Pool) so
// that a CUE definition that never ends, or grows without end, is stopped
// without harming the caller.
//
// spec imports no SDK (Temporal, client-go, go-github, Docker); only CUE and
// the standard library.
package spec
