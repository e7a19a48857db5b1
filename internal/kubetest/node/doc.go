// Package node starts a real Kubernetes node for the suites that must see
// what a kubelet does rather than kubetest's stand-in: the envtest control
// plane with the Node authorizer, RBAC and the NodeRestriction and
// ServiceAccount admission plugins on, kube-controller-manager and
// kube-scheduler, containerd with runc, and one kubelet registered Ready.
// Everything listens on loopback or a Unix socket under one temporary
// directory, but for what a test serves pods on the host's address on
// the pods' bridge (HostOnBridge, InCluster).
//
// kubelet, kube-controller-manager, kube-scheduler and kube-proxy are
// built from the k8s.io/kubernetes that bin/envtest's kube-apiserver is
// built from (make bin/node), which also builds containerd 2 and runc
// from their own modules (tools/runtime): they run user-namespaced pods, which the
// agent's jail needs in a pod. The CNI plugins are Debian's (Packages).
// Missing pieces fail Start with the command that provides them; they
// are never skipped.
//
// Pods get their own network namespace with an eth0 on a bridge of the
// node's own, with a link-local address and no route (the CNI bridge and
// host-local plugins). containerd needs a CNI configuration: without
// one it reports NetworkReady=false ("cni plugin not initialized") and
// the kubelet keeps the Node NotReady, and with the loopback plugin alone
// every pod sandbox fails ("failed to find network info for sandbox").
// The host has no address on the bridge (IPv6 is off on it), so pods
// reach neither the host's ports nor anything beyond the machine;
// hostNetwork, which the restricted Pod Security profile refuses, is not
// needed. A test that serves pods something (a worker's gateway, as in a
// cluster) asks for Options.HostOnBridge: the host then has an address
// on the bridge (Node.HostIP), and pods reach what listens there.
//
// A test whose pods use the API server as pods in a cluster do (the
// controller and the workers of the deploy/ overlays, each under its
// service account) asks for Options.InCluster. kube-apiserver then
// serves on an address of the host's in 198.18.0.0/15 (it refuses to
// advertise a link-local one) with a certificate for the kubernetes
// Service's cluster IP and names too, and advertises it; kube-proxy,
// built with the rest (nftables mode, which needs nft: NftPackage), makes
// the Service's cluster IP lead there; and each pod has one route, to the
// service range through the host. In-cluster clients then work as they
// do anywhere: KUBERNETES_SERVICE_HOST, the service account's token and
// the kube-root-ca.crt CA. kube-proxy's rules are in nftables tables of
// its own, which Stop deletes; they are the machine's, so one node with
// InCluster runs at a time, and Start refuses a second.
//
// The Node is named localhost: the kubelet refuses a loopback node IP,
// so the API server reaches it (for logs and exec) through its Hostname
// address.
//
// Images come from the local Docker engine (docker save, then ctr import
// into containerd's k8s.io namespace); no registry is reachable. The
// sandbox ("pause") image is built here from ./pause.
//
// The node changes host state that Stop restores: the kubelet sets six
// kernel sysctls (vm.overcommit_memory, kernel.panic_on_oops and others)
// while it runs, bind-mounts its root directory, and creates cgroups
// under its own cgroup root; containerd mounts snapshots and shm; the CNI
// node makes the bridge; kube-proxy, with InCluster, its nftables
// tables; a few directories appear at fixed paths
// (hostDirs). Stop removes every pod through the CRI, kills what is left
// in the node's cgroups, unmounts everything under the node's directory,
// removes its cgroups, bridge, kube-proxy's tables and the directories
// it created, puts the
// sysctls back and stops the control plane; Leftovers reports anything
// that survived. The kubelet is told not to make iptables chains. The
// node's processes die with the test process (Pdeathsig); what they leave
// when it dies without Stop (a panic, a test binary's timeout) is undone
// by the next Start, from the state each node keeps in its directory.
//
// A node runs as root, one at a time per test binary; two test binaries
// may each run one (everything is named after the node's directory).
//
// node is for tests only: it imports kubetest, client-go and the CRI API,
// never a fleetlift adapter.
package node
