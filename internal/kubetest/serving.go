package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Serving says where kube-apiserver serves, when not on loopback alone,
// and for which names its certificate holds: what a control plane needs
// for pods to reach it as they reach a cluster's, through the
// kubernetes Service.
type Serving struct {
	// Address is the address kube-apiserver binds and advertises (the
	// kubernetes Service's endpoint); clients, Env.Config's included,
	// reach it there.
	Address string
	// Names are more names and addresses the serving certificate
	// holds, besides localhost, 127.0.0.1 and Address: the kubernetes
	// Service's cluster IP and DNS names, for clients in pods.
	Names []string
}

// Service is what pods know the API server by in a cluster whose service
// range is envtest's, 10.0.0.0/24: the kubernetes Service's cluster IP
// and DNS names.
var Service = []string{"10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}

// ServiceCIDR is envtest's service cluster IP range.
const ServiceCIDR = "10.0.0.0/24"

// CA is a certificate authority for a test's control plane.
type CA struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	serial atomic.Int64
}

// NewCA makes a CA named name, valid for a day.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{cert: cert, key: key}
	ca.serial.Store(1)
	return ca, nil
}

// CertPEM is the CA's certificate.
func (c *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.cert.Raw})
}

// Issue makes a key and a certificate for it from the CA, for the
// common name cn, valid for a day: a client certificate when names is
// empty, else a serving certificate for names (DNS names or IP
// addresses). It returns both PEM-encoded.
func (c *CA) Issue(cn string, names ...string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(c.serial.Add(1)),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if len(names) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		for _, n := range names {
			if ip := net.ParseIP(n); ip != nil {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			} else {
				tmpl.DNSNames = append(tmpl.DNSNames, n)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// freePort is a port nothing listens on at host, as a string.
func freePort(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// serveCerts writes into a new directory what envtest would make for
// kube-apiserver, with a serving certificate for s's names: envtest
// keeps the files of a certificate directory that has them. It returns
// the directory and the serving CA.
func serveCerts(s Serving) (dir string, caPEM []byte, err error) {
	dir, err = os.MkdirTemp("", "fleetlift-apiserver-")
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	ca, err := NewCA("fleetlift-kubetest-serving-ca")
	if err != nil {
		return "", nil, err
	}
	names := append([]string{"localhost", "127.0.0.1", s.Address}, s.Names...)
	crt, key, err := ca.Issue("kube-apiserver", names...)
	if err != nil {
		return "", nil, err
	}
	// The service accounts' token signer: a key and its certificate,
	// named as envtest names them.
	signer, err := NewCA("fleetlift-kubetest-sa-signer")
	if err != nil {
		return "", nil, err
	}
	signerKey, err := x509.MarshalECPrivateKey(signer.key)
	if err != nil {
		return "", nil, err
	}
	for name, data := range map[string][]byte{
		"apiserver.crt": crt,
		"apiserver.key": key,
		"sa-signer.crt": signer.CertPEM(),
		"sa-signer.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: signerKey}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return dir, ca.CertPEM(), nil
}
