// Package podexec runs commands in pods' containers: the Executor
// interface the controller and the kubernetes-jobs provider use, its
// implementation on the API server's pods/exec (WebSocket, falling back
// to SPDY), and Capped, which keeps a command's output within a budget.
//
// Tests that play kubelet implement Executor themselves (see
// internal/kubetest).
//
// It sits beside the API rather than under the provider or the
// controller: both import it, and neither imports the other.
//
// podexec imports client-go; never a fleetlift package.
package podexec
