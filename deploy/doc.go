// Package deploy holds no code: its directory is fleetlift's kustomize
// manifests — crds/ (the SandboxRequest CRD), base/ (namespaces, the RBAC
// split, NetworkPolicy, quota, the reconciler, worker and controller),
// overlays/standalone and overlays/production, and gitops/ (Argo CD and
// Flux) — and its tests render every overlay with the kustomize library and
// apply it to a real kube-apiserver (internal/kubetest) with the engines
// Argo CD and Flux use.
//
// It is a module of its own: gitops-engine and Flux's ssa need Go 1.27
// (GOTOOLCHAIN=go1.27.3; make test-deploy sets it) and k8s.io/kubernetes
// with a replace per staging module, none of which the main module should
// carry.
package deploy
