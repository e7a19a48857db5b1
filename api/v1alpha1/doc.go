// Package v1alpha1 is the fleetlift.io/v1alpha1 API: the SandboxRequest a
// worker creates to get a sandbox on Kubernetes, and that the controller
// (internal/controller) reconciles into a Job, or into an agent-sandbox
// SandboxClaim, and drives (seeds 001 and 002).
//
// The types carry kubebuilder markers; zz_generated.deepcopy.go and the
// CRD under deploy/crd are generated from them (make generate).
//
// v1alpha1 imports only the Kubernetes API machinery (k8s.io/apimachinery):
// nothing of fleetlift's, no client.
//
// +kubebuilder:object:generate=true
// +groupName=fleetlift.io
package v1alpha1
