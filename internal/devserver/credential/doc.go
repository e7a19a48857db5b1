// Package credential makes and reads an install's Temporal credentials: a
// certificate authority of its own, the client certificate it issued,
// and, on each start of the embedded server, a fresh server certificate
// for the addresses the server listens on. The embedded server requires
// every connection, at its frontend and between its internal services,
// to present a certificate this authority signed, so that a process on
// the same machine without the install's files cannot start, signal or
// read workflows.
//
// The files live in one directory (the state directory's tls/), made
// once and atomically (a crash while making them leaves no directory, so
// the next start makes a new set) and reused on every later start:
//
//	ca.pem          the authority's certificate (clients trust it)
//	ca-key.pem      the authority's key: whoever holds it can mint clients
//	client.pem      the install's client certificate
//	client-key.pem  its key
//
// The directory is 0700 and every file 0600. Keys are ECDSA P-256.
//
// It imports only the standard library, so that clients (the worker, the
// reconciler, the CLI) can read the install's client credential without
// linking the Temporal server that package devserver embeds.
package credential
