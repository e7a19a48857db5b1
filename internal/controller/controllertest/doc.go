// Package controllertest stands a cluster in for one test: the envtest
// control plane with the shipped RBAC in fresh namespaces, the
// credentials' Secrets, a kubetest.Kubelet that runs the sandbox pods on
// this machine, and the SandboxRequest controller run as its service
// account with the kubelet as its executor. Workers (providers, the
// fleetlift worker) then run as the worker's service account.
//
// controllertest is for tests only; it imports the controller, kubetest
// and jobspec.
package controllertest
