package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// MakeTarget builds kubelet, kube-controller-manager, kube-scheduler and
// kube-proxy, and containerd and runc, into bin/node.
const MakeTarget = "make bin/node"

// Packages is the command that installs the CNI plugins (bridge,
// host-local, loopback).
const Packages = "apt-get install -y containernetworking-plugins"

// cniBinDir is where Debian's containernetworking-plugins puts the plugins.
const cniBinDir = "/usr/lib/cni"

// Options configure Start.
type Options struct {
	// Images are Docker images, as `docker images` names them, imported
	// into containerd's k8s.io namespace; pods name them the same way
	// and use imagePullPolicy Never (no registry is reachable).
	Images []string
	// Control configures the control plane (APIServerFlags are added to
	// the ones the node needs).
	Control kubetest.Options
	// HostOnBridge gives the host an address on the pods' bridge
	// (Node.HostIP), so that pods reach what the test serves there,
	// as pods reach a worker's gateway in a cluster. Pods then reach
	// the host's listeners on that address and on every address, but
	// still not its loopback-only ones, nor anything beyond the host.
	HostOnBridge bool
	// InCluster lets pods reach the API server as pods in a cluster
	// do: at the kubernetes Service's cluster IP, which in-cluster
	// clients read from KUBERNETES_SERVICE_HOST, forwarded by
	// kube-proxy (nftables mode) to kube-apiserver serving on an
	// address of the host's (Env.Config reaches the API server there
	// too). InCluster implies HostOnBridge. A controller or a worker
	// then runs in a pod under its service account. One such node runs
	// on a machine at a time: kube-proxy's nftables tables are the
	// machine's, and Start refuses a second.
	InCluster bool
	// Mirrors are registries containerd pulls from elsewhere: a
	// registry's host (ghcr.io) to the URL of a registry serving its
	// images on loopback (http://127.0.0.1:5000), as an operator's
	// mirror would. containerd asks only the mirror, never the registry
	// itself. Pods naming those images are pulled, as in a cluster.
	Mirrors map[string]string
}

// Node is a running control plane and a kubelet registered Ready.
type Node struct {
	// Env is the control plane; its Config is an administrator's.
	Env *kubetest.Env
	// Name is the Node's name: localhost, because the API server reaches
	// the kubelet (for logs and exec) at the node's Hostname address, the
	// kubelet serves on loopback only, and it refuses a loopback node IP.
	Name string
	// Dir holds every file of the node: certificates, kubeconfigs, logs,
	// containerd's root and state, the kubelet's root directory.
	Dir string
	// Timings are how long the steps of Start took.
	Timings Timings
	// HostIP is the host's address on the pods' bridge, with
	// Options.HostOnBridge; empty otherwise.
	HostIP string

	id         string // Dir's base name, fleetlift-node-DIGITS
	bins       binaries
	cgroupRoot string
	sysctls    map[string]string
	inCluster  bool // kube-proxy runs, and Stop removes its tables
	mirrors    map[string]string
	// newHostDirs are the hostDirs that did not exist at Start.
	newHostDirs []string
	procs       []*proc // in start order
}

// Timings are how long Start's steps took.
type Timings struct {
	ControlPlane time.Duration // etcd and kube-apiserver up
	Images       time.Duration // the pause image built, the images imported
	Ready        time.Duration // the kubelet started -> the Node Ready
}

// Start starts the control plane, kube-controller-manager,
// kube-scheduler, containerd and a kubelet, imports opts.Images and
// waits until the Node is Ready. On error everything started is stopped.
func Start(opts Options) (n *Node, err error) {
	root, err := kubetest.RepoRoot()
	if err != nil {
		return nil, err
	}
	bins, err := findBinaries(root, len(opts.Images) > 0)
	if err != nil {
		return nil, err
	}
	if err := reapStale(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleetlift-node-")
	if err != nil {
		return nil, err
	}
	if err := checkDisk(dir); err != nil {
		os.Remove(dir)
		return nil, err
	}
	id := filepath.Base(dir)
	n = &Node{Name: "localhost", Dir: dir, id: id, bins: bins, cgroupRoot: "/" + id}
	defer func() {
		if err != nil {
			if serr := n.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("stop the node: %w", serr))
			}
			n = nil
		}
	}()
	// Refused before the node counts kube-proxy's tables as its own:
	// the cleanup of a refused Start must not delete another's.
	if opts.InCluster {
		if err := proxyTablesFree(); err != nil {
			return n, err
		}
	}
	n.inCluster = opts.InCluster
	n.mirrors = opts.Mirrors
	if err := n.saveState(); err != nil {
		return n, err
	}
	for _, sub := range []string{"pki", "logs", "cni", "cni-ipam", "containerd", "kubelet", "pod-logs", "images"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return n, err
		}
	}

	// The API server authenticates to the kubelet (logs, exec) with a
	// client certificate from a CA only the kubelet trusts.
	if err := writeKubeletClientCerts(filepath.Join(dir, "pki")); err != nil {
		return n, err
	}
	flags := map[string]string{
		"authorization-mode":              "Node,RBAC",
		"enable-admission-plugins":        "NodeRestriction",
		"disable-admission-plugins":       "", // envtest turns ServiceAccount off
		"kubelet-client-certificate":      filepath.Join(dir, "pki", "kubelet-client.crt"),
		"kubelet-client-key":              filepath.Join(dir, "pki", "kubelet-client.key"),
		"kubelet-preferred-address-types": "Hostname",
	}
	ctl := opts.Control
	for k, v := range ctl.APIServerFlags {
		flags[k] = v
	}
	ctl.APIServerFlags = flags
	// The pods' bridge comes first: with InCluster the API server
	// serves on an address on it.
	if err := n.makeBridge(opts.HostOnBridge || opts.InCluster, opts.InCluster); err != nil {
		return n, err
	}
	if opts.InCluster {
		ctl.Serving = &kubetest.Serving{Address: n.apiAddress(), Names: kubetest.Service}
	}
	start := time.Now()
	env, err := kubetest.Start(ctl)
	if err != nil {
		return n, err
	}
	n.Env = env
	n.Timings.ControlPlane = time.Since(start)
	ctx := context.Background()
	if err := n.Env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fleetlift-node:kubelet-api-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: kubeletClientUser}},
	}); err != nil {
		return n, fmt.Errorf("let the API server use the kubelet's API: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "ca.crt"), env.Config.CAData, 0o600); err != nil {
		return n, err
	}

	if err := n.startControllers(); err != nil {
		return n, err
	}
	if opts.InCluster {
		if err := n.startProxy(); err != nil {
			return n, err
		}
	}
	start = time.Now()
	n.noteHostDirs()
	if err := n.saveState(); err != nil {
		return n, err
	}
	if err := n.startContainerd(); err != nil {
		return n, err
	}
	if err := n.importImages(root, opts.Images); err != nil {
		return n, err
	}
	n.Timings.Images = time.Since(start)
	start = time.Now()
	if err := n.startKubelet(); err != nil {
		return n, err
	}
	if err := n.waitReady(3 * time.Minute); err != nil {
		return n, err
	}
	n.Timings.Ready = time.Since(start)
	return n, nil
}

// startControllers starts kube-controller-manager (with every default
// controller, each under its own service account, signing tokens with
// the API server's key) and kube-scheduler, serving nothing.
func (n *Node) startControllers() error {
	kcm, err := n.kubeconfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	if _, err := n.start("kube-controller-manager", n.bins.controllerManager,
		"--kubeconfig="+kcm,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+filepath.Join(n.Env.CertDir(), "sa-signer.key"),
		"--root-ca-file="+filepath.Join(n.Dir, "pki", "ca.crt"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--v=1",
	); err != nil {
		return err
	}
	sched, err := n.kubeconfig("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	_, err = n.start("kube-scheduler", n.bins.scheduler,
		"--kubeconfig="+sched,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--v=1",
	)
	return err
}

// kubeconfig writes a kubeconfig for the user name in groups and
// returns its path.
func (n *Node) kubeconfig(name, user string, groups ...string) (string, error) {
	kc, err := n.Env.UserKubeconfig(user, groups...)
	if err != nil {
		return "", err
	}
	path := filepath.Join(n.Dir, "pki", name+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// waitReady waits until the Node reports Ready, failing early when the
// kubelet exits.
func (n *Node) waitReady(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	kubelet := n.proc("kubelet")
	last := "not registered"
	for {
		var node corev1.Node
		err := n.Env.Client.Get(ctx, client.ObjectKey{Name: n.Name}, &node)
		if err == nil {
			last = "no Ready condition"
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady {
					if c.Status == corev1.ConditionTrue {
						return nil
					}
					last = fmt.Sprintf("Ready=%s (%s: %s)", c.Status, c.Reason, c.Message)
				}
			}
		}
		select {
		case <-kubelet.done:
			return fmt.Errorf("the kubelet exited before node %s was Ready (%s): %v\n%s", n.Name, last, kubelet.err, kubelet.tail(30))
		case <-ctx.Done():
			return fmt.Errorf("node %s not Ready after %s: %s\n%s", n.Name, timeout, last, kubelet.tail(30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// binaries are the paths of the commands the node runs.
type binaries struct {
	kubelet, controllerManager, scheduler string
	proxy                                 string // kube-proxy
	containerd, shim, runc, ctr, docker   string
}

// findBinaries finds the node's commands, or fails naming the command
// that provides a missing one.
func findBinaries(root string, docker bool) (binaries, error) {
	var b binaries
	dir := filepath.Join(root, "bin", "node")
	for name, p := range map[string]*string{
		"kubelet": &b.kubelet, "kube-controller-manager": &b.controllerManager, "kube-scheduler": &b.scheduler, "kube-proxy": &b.proxy,
		"containerd": &b.containerd, "containerd-shim-runc-v2": &b.shim, "runc": &b.runc, "ctr": &b.ctr,
	} {
		*p = filepath.Join(dir, name)
		if fi, err := os.Stat(*p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return b, fmt.Errorf("%s is missing: run `%s` (it builds kubelet, kube-controller-manager, kube-scheduler, kube-proxy, containerd and runc from Go modules)", *p, MakeTarget)
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			return b, fmt.Errorf("the CNI %s plugin (%s/%s) is not installed: run `%s`", plugin, cniBinDir, plugin, Packages)
		}
	}
	if docker {
		path, err := exec.LookPath("docker")
		if err != nil {
			return b, errors.New("docker is not installed, and the node's images come from it: run `apt-get install -y docker.io` and start dockerd")
		}
		b.docker = path
	}
	return b, nil
}
