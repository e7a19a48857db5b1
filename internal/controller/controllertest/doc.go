// Package controllertest stands a cluster in for one test: the envtest
// control plane with the shipped RBAC in fresh namespaces, the
// credentials' Secrets, a kubetest.Kubelet that runs the sandbox pods on
// this machine, and the SandboxRequest controller run as its service
// account with the kubelet as its executor. Workers (providers, the
// fleetlift worker) then run as the worker's service account.
//
// With Options.AgentSandbox the controller backs requests with
// SandboxClaims, and kubernetes-sigs/agent-sandbox's own controllers
// (the version in go.mod, not a stand-in) serve them from a warm pool,
// with a kubetest.Collector for the garbage collection they rely on.
//
// controllertest is for tests only; it imports the controller, kubetest,
// jobspec and agent-sandbox's controllers.
package controllertest
