package credential_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"

	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/internal/devserver/credential"
)

// TestCredentialFilesArePrivate: the directory is 0700 and every file in
// it, keys above all, 0600.
func TestCredentialFilesArePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "tls")
	if _, err := credential.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %04o, want 0700", dir, fi.Mode().Perm())
	}
	for _, name := range []string{credential.CAFile, credential.CAKeyFile, credential.ClientCertFile, credential.ClientKeyFile} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", name, fi.Mode().Perm())
		}
	}
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("beside the credentials: %v, want only tls", entries)
	}
}

// TestCredentialsReusedAcrossStarts: a second start reads the authority
// the first made, so a client holding the first start's credential is
// accepted by a server certificate issued on the second.
func TestCredentialsReusedAcrossStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	first, err := credential.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := readAll(t, dir)
	second, err := credential.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.CertificatePEM(), second.CertificatePEM()) {
		t.Fatal("a second start made a new authority")
	}
	if after := readAll(t, dir); !equalFiles(before, after) {
		t.Fatal("a second start rewrote the credential files")
	}
	if err := handshake(t, second, first.ClientTLS()); err != nil {
		t.Fatalf("client with the first start's credential refused after the second: %v", err)
	}
	fromFiles, err := credential.LoadClient(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, second, fromFiles); err != nil {
		t.Fatalf("client reading the credential files refused: %v", err)
	}
}

// TestServerCertificateRefusesStrangers: a server with the install's
// certificate accepts only clients holding the install's credential.
func TestServerCertificateRefusesStrangers(t *testing.T) {
	install, err := credential.New()
	if err != nil {
		t.Fatal(err)
	}
	other, err := credential.New()
	if err != nil {
		t.Fatal(err)
	}
	// Sent even though the server asks for the install's authority (a
	// Go client otherwise sends none), as a client trying its luck would.
	otherCert := &tls.Config{RootCAs: install.ClientTLS().RootCAs, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &other.ClientTLS().Certificates[0], nil
	}}
	for _, tc := range []struct {
		name   string
		client *tls.Config
		ok     bool
	}{
		{"install credential", install.ClientTLS(), true},
		{"no certificate", &tls.Config{RootCAs: install.ClientTLS().RootCAs}, false},
		{"no certificate, server unverified", &tls.Config{InsecureSkipVerify: true}, false},
		{"certificate of another authority", otherCert, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := handshake(t, install, tc.client)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestCrashWhileCreatingLeavesNoCredentials: files being written go to a
// directory of their own; one left by a crash is not the install's, and
// the next start makes a complete set.
func TestCrashWhileCreatingLeavesNoCredentials(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Join(state, "tls")
	// What a crash after writing the authority but before the rename
	// leaves behind.
	half := filepath.Join(state, ".tls.new-123")
	if err := os.Mkdir(half, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, credential.CAFile), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := credential.Load(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("load after a crash: %v, want not exist", err)
	}
	a, err := credential.Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, a, a.ClientTLS()); err != nil {
		t.Fatal(err)
	}
	if _, err := credential.Load(dir); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedCredentialsAreNotReplaced: a directory missing a file, or
// with a key others can read, is an error: making a new authority would
// lock out every client holding the old credential.
func TestDamagedCredentialsAreNotReplaced(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(dir string) error
		want   string
	}{
		{"key missing", func(dir string) error { return os.Remove(filepath.Join(dir, credential.ClientKeyFile)) }, "client-key.pem is missing"},
		{"key readable by others", func(dir string) error { return os.Chmod(filepath.Join(dir, credential.CAKeyFile), 0o644) }, "chmod 600"},
		{"certificate of another authority", func(dir string) error {
			other, err := credential.New()
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, credential.CAFile), other.CertificatePEM(), 0o600)
		}, "do not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tls")
			if _, err := credential.Ensure(dir); err != nil {
				t.Fatal(err)
			}
			client := readAll(t, dir)[credential.ClientCertFile]
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			_, err := credential.Ensure(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ensure: %v, want an error saying %q", err, tc.want)
			}
			if errors.Is(err, fs.ErrNotExist) {
				t.Errorf("damage reported as absence: %v", err)
			}
			if got := readAll(t, dir)[credential.ClientCertFile]; !bytes.Equal(got, client) {
				t.Error("the install's client certificate was replaced")
			}
		})
	}
}

func TestClientConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	if _, err := credential.Ensure(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := credential.ClientConfig(filepath.Join(dir, credential.ClientCertFile), "", "", ""); err == nil {
		t.Error("a certificate without its key was accepted")
	}
	if _, err := credential.ClientConfig("", "", filepath.Join(dir, credential.ClientKeyFile), ""); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key as the authority: %v", err)
	}
	cfg, err := credential.ClientConfig("", "", "", "temporal.example.com")
	if err != nil || cfg.RootCAs != nil || len(cfg.Certificates) != 0 || cfg.ServerName != "temporal.example.com" {
		t.Errorf("server name only: %+v %v", cfg, err)
	}
	if _, err := credential.LoadClient(t.TempDir()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("load client from an empty directory: %v", err)
	}
}

// handshake serves one TLS connection on loopback with a server
// certificate from a and client verification as the embedded server does
// it, and reports whether client completes an exchange.
func handshake(t *testing.T, a *credential.Authority, client *tls.Config) error {
	t.Helper()
	certPEM, keyPEM, err := a.ServerCertificate([]string{"127.0.0.1", "::1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cas := x509.NewCertPool()
	if !cas.AppendCertsFromPEM(a.CertificatePEM()) {
		t.Fatal("authority certificate unreadable")
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: cas})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if err := c.(*tls.Conn).Handshake(); err != nil {
			return
		}
		io.Copy(c, io.LimitReader(c, 4))
	}()
	c, err := tls.Dial("tcp", l.Addr().String(), client)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	return nil
}

func readAll(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func equalFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
