// Package kubetest starts the control plane the Kubernetes suites run
// against: etcd and kube-apiserver built from Go modules into bin/envtest
// (make bin/envtest, tools/envtest/build.sh), through controller-runtime's
// envtest, with RBAC authorization on and the Pod Security admission
// plugin enforcing, so that what the suites prove about permissions and
// pod security holds on a real API server. The CRDs under
// deploy/crds/bases are installed.
//
// Missing binaries fail the tests, with the make target that builds them;
// they are never skipped.
//
// There is no kubelet, scheduler or controller manager: a test that needs
// pods plays their part (see Kubelet), and one whose objects rely on
// owner references for deletion runs a Collector. A test that must see
// what a real kubelet and container runtime do starts a node from the
// node subpackage instead.
//
// kubetest is for tests only; it imports controller-runtime's envtest,
// client-go and the fleetlift API, never a fleetlift adapter.
package kubetest
