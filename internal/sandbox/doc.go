// Package sandbox defines where tasks run: the Provider interface that
// every sandbox implementation (local/, later docker/ and kube/) satisfies,
// and the value types it uses. sandboxtest holds the conformance suite
// every provider runs.
//
// sandbox imports only the standard library.
package sandbox
