package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/payload"
	statetemporal "github.com/fleetlift/fleetlift/internal/state/temporal"
)

// DefaultAddress is where fleetlift looks for Temporal, and where the
// embedded server listens.
const defaultAddress = "127.0.0.1:7233"

// temporalFlags are the connection flags every command that talks to
// Temporal has.
type temporalFlags struct {
	address   string
	namespace string
	stateDir  string
	tls       temporalTLSFlags
	// log and metrics, set by long-running commands (see observe), are
	// where the Temporal SDK's client and workers log and report; nil:
	// their logs are discarded, their metrics not kept.
	log     *slog.Logger
	metrics client.MetricsHandler
	// embedded is set once dialOrEmbed has started the embedded server
	// in this process: runs stop with it.
	embedded bool
}

// temporalTLSFlags say how a client proves itself to Temporal and checks
// the server: the install's credential from the state directory by
// default, or the operator's files and API key for an external cluster.
type temporalTLSFlags struct {
	cert, key, ca, serverName string
	// mode is auto (TLS when a credential is found), true (TLS even
	// without one: a server the system's authorities vouch for) or false
	// (plaintext: an external cluster without TLS).
	mode      string
	apiKeyEnv string
}

func (f *temporalFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.address, "temporal-address", defaultAddress, "Temporal frontend host:port")
	fl.StringVar(&f.namespace, "namespace", devserver.Namespace, "Temporal namespace")
	fl.StringVar(&f.stateDir, "state-dir", defaultStateDir(), "where the embedded server's database, its credentials (tls/) and local sandboxes live")
	fl.StringVar(&f.tls.cert, "temporal-tls-cert", "", "client certificate (PEM) for Temporal (default: the install's, in --state-dir/tls)")
	fl.StringVar(&f.tls.key, "temporal-tls-key", "", "the client certificate's private key (PEM)")
	fl.StringVar(&f.tls.ca, "temporal-tls-ca", "", "authorities (PEM) trusted for the Temporal server's certificate (default: the system's)")
	fl.StringVar(&f.tls.serverName, "temporal-tls-server-name", "", "name the Temporal server's certificate must carry (default: the host of --temporal-address)")
	fl.StringVar(&f.tls.mode, "temporal-tls", "auto", "TLS to Temporal: auto (with a credential from the flags or --state-dir), true (also without a client certificate), false (plaintext, for a cluster without TLS)")
	fl.Lookup("temporal-tls").NoOptDefVal = "true"
	fl.StringVar(&f.tls.apiKeyEnv, "temporal-api-key-env", "FLEETLIFT_TEMPORAL_API_KEY", "environment variable holding an API key sent to Temporal as a bearer token (over TLS); unset or empty: none")
}

// defaultStateDir is $XDG_STATE_HOME/fleetlift or ~/.local/state/fleetlift.
func defaultStateDir() string {
	if d := os.Getenv("FLEETLIFT_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "fleetlift")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "fleetlift")
	}
	return filepath.Join(os.TempDir(), "fleetlift")
}

// credentialDir is where the embedded server started with stateDir keeps
// the install's authority and client credential.
func credentialDir(stateDir string) string { return filepath.Join(stateDir, "tls") }

// temporalConn is how a client connects: its TLS configuration (nil:
// plaintext), its credentials (an API key), and what they came from, for
// error messages.
type temporalConn struct {
	tls    *tls.Config
	creds  client.Credentials
	source string
}

// conn decides how to connect, in this order: plaintext when
// --temporal-tls=false; the operator's certificate files when given; TLS
// with the system's authorities for an API key; the install's credential
// when --state-dir holds one; TLS without a client certificate when
// --temporal-tls=true; otherwise plaintext.
func (f *temporalFlags) conn() (temporalConn, error) {
	t := f.tls
	var c temporalConn
	if t.apiKeyEnv != "" {
		if key := os.Getenv(t.apiKeyEnv); key != "" {
			c.creds = client.NewAPIKeyStaticCredentials(key)
		}
	}
	files := t.cert != "" || t.key != "" || t.ca != ""
	switch t.mode {
	case "false":
		if files || t.serverName != "" {
			return c, errors.New("--temporal-tls=false contradicts --temporal-tls-cert/-key/-ca/-server-name")
		}
		if c.creds != nil {
			return c, fmt.Errorf("--temporal-tls=false: the API key in $%s is sent only over TLS", t.apiKeyEnv)
		}
		c.source = "plaintext (--temporal-tls=false)"
		return c, nil
	case "auto", "true":
	default:
		return c, fmt.Errorf("--temporal-tls %q: want auto, true or false", t.mode)
	}
	if files {
		cfg, err := credential.ClientConfig(t.cert, t.key, t.ca, t.serverName)
		if err != nil {
			return c, fmt.Errorf("temporal TLS: %w", err)
		}
		c.tls, c.source = cfg, "the certificate files from --temporal-tls-*"
		return c, nil
	}
	if c.creds != nil {
		c.tls, c.source = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}, "the API key in $"+t.apiKeyEnv
		return c, nil
	}
	dir := credentialDir(f.stateDir)
	cfg, err := credential.LoadClient(dir)
	switch {
	case err == nil:
		cfg.ServerName = t.serverName
		c.tls, c.source = cfg, "the install's credential in "+dir
		return c, nil
	case !errors.Is(err, fs.ErrNotExist):
		return c, err
	}
	if t.mode == "true" || t.serverName != "" {
		c.tls, c.source = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.serverName}, "TLS without a client certificate"
		return c, nil
	}
	c.source = "no credential (none in " + dir + ")"
	return c, nil
}

// dial connects to Temporal with the credential the flags select.
func (f *temporalFlags) dial(ctx context.Context) (client.Client, error) {
	conn, err := f.conn()
	if err != nil {
		return nil, err
	}
	return f.dialWith(ctx, conn)
}

// dialWith connects to Temporal as conn says, and explains a refusal.
func (f *temporalFlags) dialWith(ctx context.Context, conn temporalConn) (client.Client, error) {
	logger := f.log
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := client.ConnectionOptions{TLS: conn.tls}
	if onLoopback(f.address) {
		// Bytes cost nothing to send on this machine; gzip cost about a
		// twentieth of a `run`'s CPU, on both ends.
		opts.GrpcCompression = &client.GrpcCompressionNone{}
	}
	c, err := client.DialContext(ctx, client.Options{
		HostPort:          f.address,
		Namespace:         f.namespace,
		Credentials:       conn.creds,
		ConnectionOptions: opts,
		DataConverter:     payload.Converter,
		Logger:            sdklog.NewStructuredLogger(logger.With("component", "temporal-sdk")),
		MetricsHandler:    f.metrics,
		// A run's memo carries its spec (state/temporal reads it for the
		// plan's diffs): a campaign of a few dozen repositories passes
		// the SDK's 2 KiB warning at every start. Warn, as for payloads,
		// at 512 KiB, a quarter of the server's default limit.
		PayloadLimits: client.PayloadLimitOptions{MemoSizeWarning: 512 << 10},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Temporal at %s with %s: %w (%s)", f.address, conn.source, err, dialHint(err, conn))
	}
	return c, nil
}

// onLoopback reports whether address (host:port) is on this machine's
// loopback interface.
func onLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dialHint says what to do about a failed connection, judged from the
// error the TLS or gRPC layer gave.
func dialHint(err error, conn temporalConn) string {
	msg := err.Error()
	has := func(parts ...string) bool {
		for _, p := range parts {
			if strings.Contains(msg, p) {
				return true
			}
		}
		return false
	}
	switch {
	case conn.tls == nil && has("server preface", "connection reset", "EOF", "tls:"):
		return "the server requires TLS and a client certificate, as fleetlift's embedded server does: run with --state-dir pointing at the install that started it (its tls/ holds the credential), or pass --temporal-tls-cert/--temporal-tls-key/--temporal-tls-ca"
	case has("first record does not look like a TLS handshake"):
		return "the server does not speak TLS: if it is not an embedded fleetlift server, pass --temporal-tls=false"
	case has("certificate signed by unknown authority", "certificate is not valid for", "doesn't contain any IP SANs", "x509:"):
		return "the server's certificate is not one this client trusts: for another install's embedded server pass that install's --state-dir; for an external cluster pass --temporal-tls-ca (and --temporal-tls-server-name if its certificate names another host)"
	case has("certificate required", "bad certificate", "unknown certificate authority", "unknown certificate", "handshake failure"):
		return "the server refused the client certificate: use the credential of the install that started the server (--state-dir), or the cluster's (--temporal-tls-cert/--temporal-tls-key)"
	case conn.tls != nil && has("broken pipe", "connection reset"):
		// Under TLS 1.3 the client's certificate is judged after the
		// client has finished its handshake: a refusal can reach it as
		// the connection closing under its first write.
		return "the server closed the connection after the TLS handshake, as it does when it refused the client certificate: use the credential of the install that started the server (--state-dir), or the cluster's (--temporal-tls-cert/--temporal-tls-key)"
	}
	return "start one with `fleetlift server`, or pass --temporal-address"
}

// runReader reads runs as status and run show them: a query waits as long
// as the command's context lets it, and no answer is reused.
func runReader(c client.Client, namespace string) *statetemporal.Reader {
	return &statetemporal.Reader{Client: c, Namespace: namespace, QueryTimeout: -1, QueryCache: -1}
}

// dialRun connects to Temporal and resolves a run id given by the user
// (see statetemporal.Reader.Resolve). The caller closes the client.
func (f *temporalFlags) dialRun(ctx context.Context, arg string) (client.Client, string, error) {
	c, err := f.dial(ctx)
	if err != nil {
		return nil, "", err
	}
	id, err := runReader(c, f.namespace).Resolve(ctx, arg)
	if err != nil {
		c.Close()
		return nil, "", err
	}
	return c, id, nil
}

// listening reports whether something accepts connections at addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// dialOrEmbed connects to Temporal at the flags' address; when nothing
// listens there and the address is on this machine's loopback, it starts
// the embedded server there first. A database the server cannot use, a
// server already running on the state directory, or a server that
// starts but cannot serve, is an error: the command stops before it
// does anything. The returned stop function stops what was started.
func (f *temporalFlags) dialOrEmbed(ctx context.Context, logw io.Writer) (client.Client, func(), error) {
	if listening(f.address) {
		c, err := f.dial(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c, c.Close, nil
	}
	// A malformed address says so, before where it points is judged.
	if _, _, err := net.SplitHostPort(f.address); err != nil {
		return nil, nil, fmt.Errorf("--temporal-address %q: %w", f.address, err)
	}
	if !onLoopback(f.address) {
		return nil, nil, fmt.Errorf("nothing listens at --temporal-address %s", f.address)
	}
	srv, err := f.startEmbedded(ctx, logw)
	if err != nil {
		return nil, nil, err
	}
	// The server just started accepts the install's credential, whatever
	// the flags name.
	c, err := f.dialWith(ctx, temporalConn{tls: srv.ClientTLS(), source: "the install's credential in " + credentialDir(f.stateDir)})
	if err != nil {
		srv.Stop()
		return nil, nil, err
	}
	f.embedded = true
	return c, func() { c.Close(); srv.Stop() }, nil
}

// startEmbedded starts the embedded server at the flags' address, on the
// state directory's database, saying so on logw.
func (f *temporalFlags) startEmbedded(ctx context.Context, logw io.Writer) (*devserver.Server, error) {
	host, port, err := net.SplitHostPort(f.address)
	if err != nil {
		return nil, fmt.Errorf("--temporal-address %q: %w", f.address, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("--temporal-address %q: bad port", f.address)
	}
	creds := credentialDir(f.stateDir)
	fmt.Fprintf(logw, "starting the embedded Temporal server on %s (database %s, credentials %s)\n", f.address, f.database(), creds)
	level, logJSON := serverLog(ctx, "error")
	return devserver.Start(devserver.Options{
		DatabaseFile: f.database(),
		TLSDir:       creds,
		IP:           host, Port: p,
		LogFile:  filepath.Join(f.stateDir, "temporal.log"),
		LogLevel: level, LogJSON: logJSON,
	})
}

// database is the embedded server's database in the state directory.
func (f *temporalFlags) database() string { return filepath.Join(f.stateDir, "temporal.db") }

// standIn keeps a server at the flags' address for as long as this
// command needs it, when the one there is another fleetlift process's
// embedded server on this state directory (two `fleetlift run` in two
// terminals): once that process stops it, this one starts the embedded
// server there in its place, on the same database, and its client and
// worker reconnect to it. The returned function ends the watch and
// stops the server it started, if any.
func (f *temporalFlags) standIn(ctx context.Context, logw io.Writer) func() {
	if f.embedded || !onLoopback(f.address) || !devserver.InUse(f.database()) {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var srv *devserver.Server
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if listening(f.address) {
				continue
			}
			fmt.Fprintf(logw, "the Temporal server at %s stopped (the fleetlift that started it ended): this process serves its database now\n", f.address)
			s, err := f.startEmbedded(ctx, logw)
			if err == nil {
				srv = s
				return
			}
			// Another process took it over first, or the port is
			// briefly taken: watch on.
			fmt.Fprintf(logw, "not started here: %v\n", err)
		}
	}()
	return func() {
		cancel()
		<-done
		if srv != nil {
			srv.Stop()
		}
	}
}

var errInterrupted = errors.New("interrupted")

// converterFor is the data converter fleetlift's workflows use.
func converterFor() converter.DataConverter { return payload.Converter }
