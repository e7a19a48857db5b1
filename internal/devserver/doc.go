// Package devserver runs an embedded Temporal server in this process: all
// services, SQLite persistence in one file, static host addresses (the
// default ring discovery made the first workflow after a restart wait about
// a minute; static hosts take about a second).
//
// It is the only package that imports go.temporal.io/server. Linking the
// server costs minutes of build time and a large binary, so only the
// commands that start a server (`fleetlift server`, `fleetlift run`
// without --temporal-address, later `fleetlift up`) and integration tests
// import it.
package devserver
