// Package devserver runs an embedded Temporal server in this process: all
// services, SQLite persistence in one file, static host addresses (the
// default ring discovery made the first workflow after a restart wait about
// a minute; static hosts take about a second).
//
// Every listener it opens (the frontend and the history, matching and
// worker services; the frontend's HTTP API is off) requires mutual TLS
// with a client certificate from the install's own authority, which
// package credential makes in the state directory on the first start and
// reuses after; Server.ClientTLS is what a client in the same process
// presents. There is no option to turn that off: a process on the same
// machine without the install's files must not be able to start, signal
// or read workflows.
//
// Its database comes into existence whole or not at all: a missing one
// is built beside it under a temporary name, synced and renamed into
// place, and leftovers of a build killed midway are removed at the next
// start; fleetlift's namespace and search attributes are then registered
// unless they are there. An existing database is taken as it is. A lock
// beside the database keeps a second server off it while one runs. A
// server that starts but cannot serve (it answers the health check with
// errors) fails the start with its error.
//
// It is the only package that imports go.temporal.io/server. Linking the
// server costs minutes of build time and a large binary, so only the
// commands that start a server (`fleetlift server`, `fleetlift run`
// without --temporal-address, later `fleetlift up`) and integration tests
// import it.
package devserver
