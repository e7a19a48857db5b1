// Package sandboxtest is the conformance suite every sandbox.Provider runs:
// call Run from the provider's tests with a Harness that makes providers
// and says how their agent is started. The suite checks what callers of
// the interface rely on (idempotent Provision, Exec results, the sanitised
// environment, atomic and confined file copies, ErrNotFound, Cleanup that
// leaves no process behind, concurrent use) and nothing about what the
// agent does beyond staying alive until Cleanup.
//
// sandboxtest imports package sandbox, testing and the standard library;
// never a provider (providers import it from their tests) or an SDK.
package sandboxtest
