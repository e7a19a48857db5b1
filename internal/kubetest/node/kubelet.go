package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fleetlift/fleetlift/internal/listen"
)

// kubeletConfig is the KubeletConfiguration. This machine is cgroup v1,
// which kubelets from 1.35 refuse unless failCgroupV1 is false. The
// kubelet serves on loopback only, authenticates the API server by its
// client certificate and asks the API server (Webhook) what a caller may
// do. Eviction and image garbage collection thresholds are low so that a
// full disk on a developer's machine does not evict the tests' pods or
// delete their images (which could not be pulled back). The kubelet makes
// no iptables chains (KUBE-FIREWALL and its canaries): nothing here needs
// them, and they would outlive it.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %[1]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[2]d
cgroupDriver: cgroupfs
cgroupRoot: %[3]q
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: %[4]q
podLogsDir: %[5]q
makeIPTablesUtilChains: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[6]q
authorization:
  mode: Webhook
evictionHard:
  memory.available: 50Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`

// startKubelet writes the kubelet's configuration and kubeconfig (the
// identity system:node:NAME, which the Node authorizer and
// NodeRestriction scope to this node) and starts it.
func (n *Node) startKubelet() error {
	ports, err := listen.FreePorts("127.0.0.1", 2)
	if err != nil {
		return err
	}
	port, healthz := ports[0], ports[1]
	if err := n.makeCgroupRoot(); err != nil {
		return err
	}
	if err := n.saveSysctls(); err != nil {
		return err
	}
	if err := n.saveState(); err != nil {
		return err
	}
	cfg := fmt.Sprintf(kubeletConfig, port, healthz, n.cgroupRoot, "unix://"+n.socket(),
		filepath.Join(n.Dir, "pod-logs"), filepath.Join(n.Dir, "pki", "kubelet-client-ca.crt"))
	cfgPath := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return err
	}
	kc, err := n.kubeconfig("kubelet", "system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	_, err = n.start("kubelet", n.bins.kubelet,
		"--config="+cfgPath,
		"--kubeconfig="+kc,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"),
		"--hostname-override="+n.Name,
		"--v=2",
	)
	return err
}
