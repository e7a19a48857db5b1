package credential

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// File names inside an install's credential directory.
const (
	CAFile         = "ca.pem"
	CAKeyFile      = "ca-key.pem"
	ClientCertFile = "client.pem"
	ClientKeyFile  = "client-key.pem"
)

const (
	// authorityLifetime bounds the authority and the client certificate
	// it issues once: an install lives about as long as its machine.
	authorityLifetime = 10 * 365 * 24 * time.Hour
	// serverLifetime is short: the server's certificate is issued anew
	// on every start.
	serverLifetime = 365 * 24 * time.Hour
	// backdate tolerates clocks a little behind the issuer's.
	backdate = time.Hour
)

// Authority is an install's certificate authority together with the
// client credential it issued.
type Authority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	client  tls.Certificate
}

// New makes an authority and its client credential in memory only, for
// a server that keeps no state.
func New() (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate authority key: %w", err)
	}
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("generate authority name: %w", err)
	}
	now := time.Now()
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"fleetlift"}, CommonName: "fleetlift install CA " + hex.EncodeToString(id)},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(authorityLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create authority certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse authority certificate: %w", err)
	}
	a := &Authority{cert: cert, certPEM: pemBlock("CERTIFICATE", der), key: key}
	certPEM, keyPEM, err := a.issue(&x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"fleetlift"}, CommonName: "fleetlift client"},
		NotAfter:    cert.NotAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("issue client certificate: %w", err)
	}
	if a.client, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("load client certificate: %w", err)
	}
	return a, nil
}

// Ensure reads the install's credentials from dir, making them first
// when dir does not exist. Clients holding the credential made on the
// first start still connect after any later one.
func Ensure(dir string) (*Authority, error) {
	a, err := Load(dir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return a, err
	}
	if a, err = New(); err != nil {
		return nil, err
	}
	switch err := a.write(dir); {
	case errors.Is(err, fs.ErrExist):
		// Another process made them first: theirs are the install's.
		return Load(dir)
	case err != nil:
		return nil, err
	}
	return a, nil
}

// Load reads the install's credentials from dir. The error wraps
// fs.ErrNotExist only when dir does not exist; a directory missing some
// of its files is an error of its own, since making a new authority
// would lock out every client that holds the old one.
func Load(dir string) (*Authority, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("read temporal credentials: %w", err)
	}
	caPEM, err := readFile(dir, CAFile)
	if err != nil {
		return nil, err
	}
	caKeyPEM, err := readPrivate(dir, CAKeyFile)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(caPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("read temporal credentials in %s: %s and %s do not match: %w", dir, CAFile, CAKeyFile, err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("read temporal credentials in %s: %s is not an ECDSA key", dir, CAKeyFile)
	}
	cert := pair.Leaf
	if !cert.IsCA {
		return nil, fmt.Errorf("read temporal credentials in %s: %s is not a certificate authority", dir, CAFile)
	}
	a := &Authority{cert: cert, certPEM: caPEM, key: key}
	clientPEM, err := readFile(dir, ClientCertFile)
	if err != nil {
		return nil, err
	}
	clientKeyPEM, err := readPrivate(dir, ClientKeyFile)
	if err != nil {
		return nil, err
	}
	if a.client, err = tls.X509KeyPair(clientPEM, clientKeyPEM); err != nil {
		return nil, fmt.Errorf("read temporal credentials in %s: %s and %s do not match: %w", dir, ClientCertFile, ClientKeyFile, err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	if _, err := a.client.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("read temporal credentials in %s: %s is not valid under %s: %w", dir, ClientCertFile, CAFile, err)
	}
	return a, nil
}

// CertificatePEM is the authority's certificate, PEM-encoded: what a
// client trusts to verify the server, and the server to verify clients.
func (a *Authority) CertificatePEM() []byte { return a.certPEM }

// ClientTLS is the TLS configuration of a client holding the install's
// credential: it presents the client certificate and trusts only the
// install's authority for the server's.
func (a *Authority) ClientTLS() *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(a.cert)
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		RootCAs:      roots,
		Certificates: []tls.Certificate{a.client},
	}
}

// ServerCertificate issues a certificate for a server reached at hosts
// (IP addresses or DNS names), good both for serving and for the
// server's own connections between its services, and returns it and its
// key PEM-encoded.
func (a *Authority) ServerCertificate(hosts []string) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"fleetlift"}, CommonName: "fleetlift temporal server"},
		NotAfter:    time.Now().Add(serverLifetime),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	if tmpl.NotAfter.After(a.cert.NotAfter) {
		tmpl.NotAfter = a.cert.NotAfter
	}
	certPEM, keyPEM, err = a.issue(tmpl)
	if err != nil {
		return nil, nil, fmt.Errorf("issue server certificate: %w", err)
	}
	return certPEM, keyPEM, nil
}

// issue signs tmpl, completed with a new key, a serial number and the
// usual fields of a leaf.
func (a *Authority) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	if tmpl.SerialNumber, err = serialNumber(); err != nil {
		return nil, nil, err
	}
	tmpl.NotBefore = time.Now().Add(-backdate)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// write stores the authority and the client credential as dir, all at
// once: the files go to a new directory beside it, which is renamed to
// dir when complete. The error wraps fs.ErrExist when dir has appeared
// meanwhile.
func (a *Authority) write(dir string) (err error) {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("create temporal credentials: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".new-")
	if err != nil {
		return fmt.Errorf("create temporal credentials: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	keyDER, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return fmt.Errorf("create temporal credentials: encode authority key: %w", err)
	}
	clientKeyDER, err := x509.MarshalPKCS8PrivateKey(a.client.PrivateKey)
	if err != nil {
		return fmt.Errorf("create temporal credentials: encode client key: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{CAFile, a.certPEM},
		{CAKeyFile, pemBlock("PRIVATE KEY", keyDER)},
		{ClientCertFile, pemBlock("CERTIFICATE", a.client.Certificate[0])},
		{ClientKeyFile, pemBlock("PRIVATE KEY", clientKeyDER)},
	} {
		if err := writePrivate(filepath.Join(tmp, f.name), f.data); err != nil {
			return fmt.Errorf("create temporal credentials: %w", err)
		}
	}
	if err := syncDir(tmp); err != nil {
		return fmt.Errorf("create temporal credentials: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create temporal credentials in %s: %w", dir, fs.ErrExist)
		}
		return fmt.Errorf("create temporal credentials: %w", err)
	}
	if err := syncDir(parent); err != nil {
		return fmt.Errorf("create temporal credentials: %w", err)
	}
	return nil
}

// ClientConfig is a client's TLS configuration from PEM files: certFile
// and keyFile (both or neither) hold the client's certificate and key;
// caFile, when set, holds the only authorities trusted for the server's
// certificate (otherwise the system's). serverName, when set, is the name
// the server's certificate must carry (otherwise the dialled host).
func ClientConfig(certFile, keyFile, caFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("a client certificate needs both its certificate and its key file")
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate %s: %w", certFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("load server authority: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("load server authority %s: no PEM certificate in it", caFile)
		}
		cfg.RootCAs = roots
	}
	return cfg, nil
}

// LoadClient is the TLS configuration of a client holding the client
// credential in dir (the authority's key is not needed, so a copy of the
// three client files on another machine serves). The error wraps
// fs.ErrNotExist when dir holds no client certificate.
func LoadClient(dir string) (*tls.Config, error) {
	if _, err := os.Stat(filepath.Join(dir, ClientCertFile)); err != nil {
		return nil, fmt.Errorf("read temporal client credential: %w", err)
	}
	return ClientConfig(filepath.Join(dir, ClientCertFile), filepath.Join(dir, ClientKeyFile), filepath.Join(dir, CAFile), "")
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return n, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// readFile reads one file of the credential directory; a missing one is
// reported as damage, not as fs.ErrNotExist (see Load).
func readFile(dir, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read temporal credentials in %s: %s is missing (move the directory away to make a new authority; clients holding the old credential will then be refused)", dir, name)
	}
	if err != nil {
		return nil, fmt.Errorf("read temporal credentials: %w", err)
	}
	return b, nil
}

// readPrivate reads a key file, refusing one that others may read.
func readPrivate(dir, name string) ([]byte, error) {
	path := filepath.Join(dir, name)
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("read temporal credentials: %s is accessible to other users (mode %04o): make it private with chmod 600", path, fi.Mode().Perm())
	}
	return readFile(dir, name)
}

func writePrivate(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
