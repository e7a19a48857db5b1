package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/listen"
)

// NftPackage is the command that installs nft, which kube-proxy's
// nftables mode runs.
const NftPackage = "apt-get install -y nftables"

// proxyConfig is kube-proxy's KubeProxyConfiguration: nftables mode,
// whose rules live in tables of its own (kube-proxy, in families ip and
// ip6) that Stop deletes whole; the pods' subnet as the cluster's; no
// conntrack sysctl changed (each 0 leaves the machine's value); health
// and metrics on loopback; the host's address on the bridge as the
// node's (kube-proxy would otherwise wait for the Node to read it).
const proxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %[1]q
hostnameOverride: %[2]q
bindAddress: %[6]s
clusterCIDR: %[3]q
healthzBindAddress: 127.0.0.1:%[4]d
metricsBindAddress: 127.0.0.1:%[5]d
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`

// proxyFamilies are the nftables families kube-proxy makes a
// "kube-proxy" table in.
var proxyFamilies = []string{"ip", "ip6"}

// startProxy starts kube-proxy as system:kube-proxy (bound to
// system:node-proxier by the API server's default policy) and waits
// until it has written the kubernetes Service's rules.
func (n *Node) startProxy() error {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return fmt.Errorf("nft is not installed, and kube-proxy's nftables mode runs it: run `%s`", NftPackage)
	}
	kc, err := n.kubeconfig("kube-proxy", "system:kube-proxy")
	if err != nil {
		return err
	}
	ports, err := listen.FreePorts("127.0.0.1", 2)
	if err != nil {
		return err
	}
	healthz, metrics := ports[0], ports[1]
	cfg := filepath.Join(n.Dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, proxyConfig, kc, n.Name, n.subnet()+".0/24", healthz, metrics, n.HostIP), 0o600); err != nil {
		return err
	}
	p, err := n.start("kube-proxy", n.bins.proxy, "--config="+cfg, "--v=2")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		out, _ := exec.Command(nft, "list", "table", "ip", "kube-proxy").CombinedOutput()
		if bytes.Contains(out, []byte("10.0.0.1")) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("kube-proxy exited: %v\n%s", p.err, p.tail(20))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-proxy wrote no rule for the kubernetes Service (10.0.0.1) within a minute:\n%s", p.tail(20))
		}
	}
}

// proxyTablesFree fails when kube-proxy's tables exist: another node
// with Options.InCluster runs on this machine (a stale one's were
// removed by reapStale), or a cluster's kube-proxy does.
func proxyTablesFree() error {
	if t := proxyTables(); len(t) > 0 {
		return fmt.Errorf("nftables tables %s exist: another node with InCluster (or a cluster's kube-proxy) runs on this machine, and only one kube-proxy can", strings.Join(t, ", "))
	}
	return nil
}

// proxyTables lists the kube-proxy tables that exist, as "FAMILY kube-proxy".
func proxyTables() []string {
	var have []string
	for _, fam := range proxyFamilies {
		if exec.Command("nft", "list", "table", fam, "kube-proxy").Run() == nil {
			have = append(have, fam+" kube-proxy")
		}
	}
	return have
}

// removeProxyTables deletes kube-proxy's tables, its every rule, when
// the node ran it.
func (n *Node) removeProxyTables() error {
	if !n.inCluster {
		return nil
	}
	for _, t := range proxyTables() {
		args := append([]string{"delete", "table"}, strings.Fields(t)...)
		if out, err := exec.Command("nft", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("nft delete table %s: %v: %s", t, err, bytes.TrimSpace(out))
		}
	}
	return nil
}
