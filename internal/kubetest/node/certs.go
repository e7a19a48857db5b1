package node

import (
	"os"
	"path/filepath"

	"github.com/fleetlift/fleetlift/internal/kubetest"
)

// kubeletClientUser is the user the API server is when it calls the
// kubelet (logs, exec), bound to system:kubelet-api-admin.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// writeKubeletClientCerts writes, into dir, a CA the kubelet trusts for
// client certificates (kubelet-client-ca.crt) and the API server's client
// certificate and key from it (kubelet-client.{crt,key}).
func writeKubeletClientCerts(dir string) error {
	ca, err := kubetest.NewCA("fleetlift-node-kubelet-client-ca")
	if err != nil {
		return err
	}
	crt, key, err := ca.Issue(kubeletClientUser)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"kubelet-client-ca.crt": ca.CertPEM(),
		"kubelet-client.crt":    crt,
		"kubelet-client.key":    key,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
