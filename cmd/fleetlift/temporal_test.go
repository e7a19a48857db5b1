package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/fleetlift/fleetlift/internal/devserver/credential"
)

// TestTemporalFlagsChooseCredential: which credential a command presents
// to Temporal, from its flags, its environment and its state directory.
func TestTemporalFlagsChooseCredential(t *testing.T) {
	install := t.TempDir()
	if _, err := credential.Ensure(credentialDir(install)); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if _, err := credential.Ensure(credentialDir(other)); err != nil {
		t.Fatal(err)
	}
	cert, key, ca := filepath.Join(credentialDir(other), credential.ClientCertFile), filepath.Join(credentialDir(other), credential.ClientKeyFile), filepath.Join(credentialDir(other), credential.CAFile)
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		tls     bool // TLS at all
		cert    bool // with a client certificate
		apiKey  bool
		source  string
		wantErr string
	}{
		{name: "no credential: plaintext", args: []string{"--state-dir", t.TempDir()}, source: "no credential"},
		{name: "the install's credential", args: []string{"--state-dir", install}, tls: true, cert: true, source: "install's credential in " + credentialDir(install)},
		{name: "files given win over the install's", args: []string{"--state-dir", install, "--temporal-tls-cert", cert, "--temporal-tls-key", key, "--temporal-tls-ca", ca}, tls: true, cert: true, source: "--temporal-tls-*"},
		{name: "files from the environment", args: []string{"--state-dir", t.TempDir()}, env: map[string]string{"FLEETLIFT_TEMPORAL_TLS_CERT": cert, "FLEETLIFT_TEMPORAL_TLS_KEY": key, "FLEETLIFT_TEMPORAL_TLS_CA": ca}, tls: true, cert: true, source: "--temporal-tls-*"},
		{name: "an authority alone", args: []string{"--state-dir", t.TempDir(), "--temporal-tls-ca", ca}, tls: true, source: "--temporal-tls-*"},
		{name: "a certificate without its key", args: []string{"--state-dir", t.TempDir(), "--temporal-tls-cert", cert}, wantErr: "both its certificate and its key"},
		{name: "an API key means TLS", args: []string{"--state-dir", install}, env: map[string]string{"FLEETLIFT_TEMPORAL_API_KEY": "not-a-real-key"}, tls: true, apiKey: true, source: "API key in $FLEETLIFT_TEMPORAL_API_KEY"},
		{name: "API key from a variable the operator names", args: []string{"--state-dir", t.TempDir(), "--temporal-api-key-env", "MY_TEMPORAL_KEY"}, env: map[string]string{"MY_TEMPORAL_KEY": "not-a-real-key"}, tls: true, apiKey: true, source: "$MY_TEMPORAL_KEY"},
		{name: "TLS without a certificate", args: []string{"--state-dir", t.TempDir(), "--temporal-tls"}, tls: true, source: "without a client certificate"},
		{name: "plaintext despite the install's credential", args: []string{"--state-dir", install, "--temporal-tls=false"}, source: "plaintext"},
		{name: "plaintext contradicts files", args: []string{"--temporal-tls=false", "--temporal-tls-ca", ca}, wantErr: "contradicts"},
		{name: "no API key in plaintext", args: []string{"--temporal-tls=false"}, env: map[string]string{"FLEETLIFT_TEMPORAL_API_KEY": "not-a-real-key"}, wantErr: "only over TLS"},
		{name: "unknown mode", args: []string{"--temporal-tls=maybe"}, wantErr: "want auto, true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"FLEETLIFT_TEMPORAL_TLS_CERT", "FLEETLIFT_TEMPORAL_TLS_KEY", "FLEETLIFT_TEMPORAL_TLS_CA", "FLEETLIFT_TEMPORAL_TLS_SERVER_NAME", "FLEETLIFT_TEMPORAL_TLS", "FLEETLIFT_TEMPORAL_API_KEY"} {
				t.Setenv(k, tc.env[k])
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var f temporalFlags
			cmd := &cobra.Command{}
			f.register(cmd)
			if err := cmd.ParseFlags(tc.args); err != nil {
				t.Fatal(err)
			}
			if err := flagsFromEnv(cmd); err != nil {
				t.Fatal(err)
			}
			conn, err := f.conn()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (conn.tls != nil) != tc.tls {
				t.Errorf("TLS %v, want %v", conn.tls != nil, tc.tls)
			}
			if conn.tls != nil && (len(conn.tls.Certificates) > 0) != tc.cert {
				t.Errorf("client certificate %v, want %v", len(conn.tls.Certificates) > 0, tc.cert)
			}
			if (conn.creds != nil) != tc.apiKey {
				t.Errorf("API key %v, want %v", conn.creds != nil, tc.apiKey)
			}
			if !strings.Contains(conn.source, tc.source) {
				t.Errorf("source %q, want it to mention %q", conn.source, tc.source)
			}
			if strings.Contains(conn.source, "not-a-real-key") {
				t.Errorf("source %q shows the API key", conn.source)
			}
		})
	}
}

// TestCommandsPresentInstallCredential: a command pointed at the state
// directory of the install whose embedded server runs gets in; without
// it, or with another install's, it is refused, and the error says what
// to pass.
func TestCommandsPresentInstallCredential(t *testing.T) {
	addr, state := freeAddr(t), filepath.Join(t.TempDir(), "state")
	startServer(t, addr, state)
	other := t.TempDir()
	if _, err := credential.Ensure(credentialDir(other)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // in the output; empty: success
	}{
		{"the install's state directory", []string{"--state-dir", state}, nil},
		{"no credential", []string{"--state-dir", t.TempDir()}, []string{"requires TLS and a client certificate", "--state-dir", "--temporal-tls-cert"}},
		{"another install's credential", []string{"--state-dir", other}, []string{"with the install's credential in " + credentialDir(other), "--state-dir"}},
		{"another install's certificate, the server unchecked", []string{"--state-dir", t.TempDir(),
			"--temporal-tls-cert", filepath.Join(credentialDir(other), credential.ClientCertFile),
			"--temporal-tls-key", filepath.Join(credentialDir(other), credential.ClientKeyFile),
			"--temporal-tls-ca", filepath.Join(credentialDir(state), credential.CAFile)}, []string{"refused the client certificate"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runCLI(t, append([]string{"status", "--temporal-address", addr}, tc.args...)...)
			if len(tc.want) == 0 {
				if code != 0 {
					t.Fatalf("exit %d:\n%s", code, out)
				}
				return
			}
			if code == 0 {
				t.Fatalf("connected:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("error lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// A frontend on this machine's loopback is dialled without gzip; one
// elsewhere keeps it.
func TestOnLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7233": true, "127.0.0.2:7233": true, "[::1]:7233": true, "localhost:7233": true,
		"10.0.0.5:7233": false, "temporal.example.com:7233": false, "[2001:db8::1]:7233": false, "127.0.0.1": false,
	} {
		if got := onLoopback(addr); got != want {
			t.Errorf("onLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
