package webui

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/server_options"
)

// Options say where the UI listens and which Temporal frontend it shows.
type Options struct {
	// Listen is the UI's host:port, e.g. 127.0.0.1:8233.
	Listen string
	// Temporal is the frontend's host:port.
	Temporal string
	// Namespace is the namespace the UI opens on.
	Namespace string
	// CertFile, KeyFile and CAFile are the client credential the UI
	// presents to the frontend, and the authority it checks the
	// frontend's certificate with (PEM files); empty: plaintext.
	CertFile, KeyFile, CAFile string
	// ServerName is the name the frontend's certificate must carry;
	// empty: the host of Temporal.
	ServerName string
}

// Server is a running UI.
type Server struct {
	srv  *uiserver.Server
	addr string
	done chan struct{}
}

// Start starts the UI and returns once it accepts connections, or with
// the error that stopped it.
func Start(o Options) (*Server, error) {
	host, portS, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("web UI address %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port <= 0 {
		return nil, fmt.Errorf("web UI address %q: want a port number", o.Listen)
	}
	// Refuse a taken port here: the UI server's own start ends the
	// process when it cannot listen.
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("web UI: %w", err)
	}
	ln.Close()
	cfg := &uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: o.Temporal,
		EnableUI:            true,
		DefaultNamespace:    o.Namespace,
		DisableNewsFetch:    true,
		NotifyOnNewVersion:  false,
		HideLogs:            true,
		Distribution:        "cli",
		CORS:                uiconfig.CORS{CookieInsecure: true},
		// Read-only: the UI has no login of its own and presents the
		// install's client certificate, so anyone who reaches its port
		// (the work in a local sandbox included) would otherwise signal,
		// terminate or start workflows with the install's rights, and a
		// decision signal is how a change gets approved. Approvals go
		// through fleetlift approve or Git.
		DisableWriteActions: true,
	}
	if o.CertFile != "" || o.CAFile != "" {
		serverName := o.ServerName
		if serverName == "" {
			serverName, _, _ = net.SplitHostPort(o.Temporal)
		}
		cfg.TLS = uiconfig.TLS{CertFile: o.CertFile, KeyFile: o.KeyFile, CaFile: o.CAFile,
			ServerName: serverName, EnableHostVerification: true}
	}
	s := &Server{srv: uiserver.NewServer(server_options.WithConfigProvider(cfg)), addr: o.Listen, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Start()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", o.Listen, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, errors.New("web UI: stopped while starting")
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("web UI: not listening on %s after 10s", o.Listen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Address is where the UI listens.
func (s *Server) Address() string { return s.addr }

// URL is the UI's address for a browser.
func (s *Server) URL() string { return "http://" + s.addr }

// Stop stops the UI.
func (s *Server) Stop() {
	s.srv.Stop()
	<-s.done
}
