// Package activity holds fleetlift's Temporal activities: methods on
// Activities, which holds the dependencies (the sandbox provider and the
// worker's sandbox environment). Each activity takes one input struct and
// is safe to retry: provisioning finds the sandbox it made, writes replace
// files atomically, and waiting resumes polling.
//
// Secrets (tokens for the agent) live only in Activities.SandboxEnv, in
// the worker's memory: they never enter activity inputs, results or
// workflow history.
//
// activity imports the Temporal SDK's activity package, sandbox, status
// (the outcomes it records), the forge and git it pushes with and the
// agent protocol; never the server, forges' SDKs or cmd.
package activity
