// Command fleetlift-controller runs the SandboxRequest controller
// (internal/controller): a controller-runtime manager with leader
// election, metrics on :8080 (controller_runtime_* and fleetlift_sandbox*),
// health and readiness probes on :8081 and JSON logs.
//
// It is a binary of its own, not a fleetlift subcommand: fleetlift links
// the Temporal server (about 230 MB and thirteen minutes of cold build on
// two cores), which a controller that holds the cluster's most sensitive
// rights should neither carry nor wait for. fleetlift-controller links
// client-go and controller-runtime only (about 60 MB).
package main
