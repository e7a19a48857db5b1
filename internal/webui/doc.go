// Package webui serves the Temporal Web UI (github.com/temporalio/ui-server)
// beside the embedded Temporal server, as `temporal server start-dev` does:
// `fleetlift up` and `fleetlift server` start it when --ui-listen names a
// port. It is read-only: the UI server listens on a loopback port of its
// own behind a guard that passes only GET and HEAD requests whose Host
// names it.
//
// It must not import go.temporal.io/server (package devserver is the only
// importer), and it makes no request beyond the Temporal frontend it is
// given: the UI's release check and news are switched off.
package webui
