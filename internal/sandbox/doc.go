// Package sandbox defines where tasks run: the Provider interface that
// every sandbox implementation (local/, docker/ and kube/) satisfies,
// and the value types it uses, and what providers share: quantities
// (ParseMemory, ParseCPU) and serving a handler on a Unix socket for the
// sandboxes (ServeUnix). sandboxtest holds the conformance suite and the
// untrusted-work suite every provider runs.
//
// sandbox imports only the standard library.
package sandbox
