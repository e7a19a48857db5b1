package devserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

// TestTemporalRefusesClientWithoutInstallCredential: every port the
// embedded server listens on (its frontend and its history and matching
// services) refuses a client without a certificate from the
// install's authority — in plaintext, over TLS with no certificate, and
// with a certificate from another authority — so a process on the same
// machine cannot start, signal or read workflows. A client holding the
// install's credential gets through to each of them.
func TestTemporalRefusesClientWithoutInstallCredential(t *testing.T) {
	before := tcpListeners(t)
	e := start(t)
	var opened []string
	for _, l := range tcpListeners(t) {
		if !slices.Contains(before, l) {
			opened = append(opened, l)
		}
	}
	if !slices.Contains(opened, e.srv.Address()) {
		t.Fatalf("listeners %v lack the frontend %s", opened, e.srv.Address())
	}
	// The frontend and the two internal services; no HTTP API, no
	// system worker.
	if len(opened) != 3 {
		t.Errorf("the server listens on %v; want the frontend and two internal services", opened)
	}

	other, err := credential.New()
	if err != nil {
		t.Fatal(err)
	}
	otherTLS := presentAlways(other.ClientTLS())
	otherTLS.InsecureSkipVerify = true
	strangers := []struct {
		name  string
		creds credentials.TransportCredentials
		tls   *tls.Config
	}{
		{"plaintext", insecure.NewCredentials(), nil},
		{"TLS without a certificate", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}), &tls.Config{InsecureSkipVerify: true}},
		{"certificate of another authority", credentials.NewTLS(otherTLS), otherTLS},
	}
	for _, addr := range opened {
		for _, s := range strangers {
			if code := healthCheck(t, addr, s.creds); code != codes.Unavailable {
				t.Errorf("%s, %s: health check answered %s; want the connection refused", addr, s.name, code)
			}
		}
		if code := healthCheck(t, addr, credentials.NewTLS(e.srv.ClientTLS())); code == codes.Unavailable {
			t.Errorf("%s: refused a client holding the install's credential", addr)
		}
	}

	// What a transform would try: any Temporal client at the frontend.
	for _, s := range strangers {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := client.DialContext(ctx, client.Options{HostPort: e.srv.Address(), Namespace: devserver.Namespace,
			ConnectionOptions: client.ConnectionOptions{TLS: s.tls}})
		cancel()
		if err == nil {
			_, serr := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "intruder-" + s.name, TaskQueue: workflow.TaskQueue}, "Intrude")
			c.Close()
			t.Errorf("%s: an SDK client connected (starting a workflow: %v)", s.name, serr)
		}
	}
	// The install's credential works end to end.
	if _, err := e.c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "insider", TaskQueue: "nobody-polls"}, "Inside"); err != nil {
		t.Fatalf("start a workflow with the install's credential: %v", err)
	}
}

// TestTemporalCredentialSurvivesRestart: a second start on the same
// state reuses the install's authority, so a client made with the first
// start's credential connects to the second; the key files are private.
func TestTemporalCredentialSurvivesRestart(t *testing.T) {
	root := t.TempDir()
	db := filepath.Join(root, "temporal.db")
	srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
	if err != nil {
		t.Fatal(err)
	}
	first := srv.ClientTLS()
	srv.Stop()
	for _, name := range []string{credential.CAKeyFile, credential.ClientKeyFile} {
		fi, err := os.Stat(filepath.Join(root, "tls", name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o, want 0600", name, fi.Mode().Perm())
		}
	}
	srv, err = devserver.Start(devserver.Options{DatabaseFile: db})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: first}})
	if err != nil {
		t.Fatalf("the first start's credential after a restart: %v", err)
	}
	defer c.Close()
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "after-restart", TaskQueue: "nobody-polls"}, "Inside"); err != nil {
		t.Fatalf("start a workflow after a restart: %v", err)
	}
	fromFiles, err := credential.LoadClient(filepath.Join(root, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	if code := healthCheck(t, srv.Address(), credentials.NewTLS(fromFiles)); code == codes.Unavailable {
		t.Error("refused a client reading the credential files")
	}
}

// presentAlways makes cfg present its certificate even when the server
// asks for one from other authorities (a Go client otherwise sends none),
// as a client trying its luck would.
func presentAlways(cfg *tls.Config) *tls.Config {
	cert := cfg.Certificates[0]
	cfg.Certificates = nil
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	return cfg
}

// healthCheck asks addr's gRPC health service, with a deadline, and
// returns the status code: Unavailable when the connection was refused.
func healthCheck(t *testing.T, addr string, creds credentials.TransportCredentials) codes.Code {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	code := status.Code(err)
	if code == codes.DeadlineExceeded {
		// A connection that never became ready ends in a deadline.
		code = codes.Unavailable
	}
	return code
}

// tcpListeners lists the TCP addresses this process listens on, from
// /proc: the sockets among its open files that are in state LISTEN.
func tcpListeners(t *testing.T) []string {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	mine := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			mine[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	var out []string
	for _, table := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Scan() // header
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			const listen = "0A"
			if len(f) < 10 || f[3] != listen || !mine[f[9]] {
				continue
			}
			out = append(out, procAddr(t, f[1]))
		}
	}
	return out
}

// procAddr decodes /proc/net/tcp's "0100007F:1F91" (an address in
// host-order 32-bit words, a port in hex) to "127.0.0.1:8081".
func procAddr(t *testing.T, s string) string {
	t.Helper()
	hexIP, hexPort, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(hexIP)
	if err != nil {
		t.Fatal(err)
	}
	ip := make(net.IP, len(raw))
	for i := 0; i < len(raw); i += 4 {
		ip[i], ip[i+1], ip[i+2], ip[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(hexPort, 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(port))
}
