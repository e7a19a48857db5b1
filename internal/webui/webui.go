package webui

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
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
	srv   *uiserver.Server
	front *http.Server
	addr  string
	done  chan struct{}
}

// Start starts the UI and returns once it accepts connections, or with
// the error that stopped it. The UI server itself listens on a port of
// its own on 127.0.0.1; what listens at o.Listen is a guard in front of
// it (see guard).
func Start(o Options) (*Server, error) {
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		return nil, fmt.Errorf("web UI address %q: %w", o.Listen, err)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("web UI: %w", err)
	}
	// The UI server's own start ends the process when it cannot listen:
	// give it a port that was free a moment ago.
	innerLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("web UI: %w", err)
	}
	inner := innerLn.Addr().(*net.TCPAddr)
	innerLn.Close()
	cfg := &uiconfig.Config{
		Host:                inner.IP.String(),
		Port:                inner.Port,
		TemporalGRPCAddress: o.Temporal,
		EnableUI:            true,
		DefaultNamespace:    o.Namespace,
		DisableNewsFetch:    true,
		NotifyOnNewVersion:  false,
		HideLogs:            true,
		Distribution:        "cli",
		CORS:                uiconfig.CORS{CookieInsecure: true},
		// Read-only, twice over (the guard allows only GET and HEAD):
		// the UI has no login of its own and presents the install's
		// client certificate, so whoever reaches its port would
		// otherwise signal, terminate or start workflows with the
		// install's rights, and a decision signal is how a change gets
		// approved. Approvals go through fleetlift approve or Git.
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
	s := &Server{srv: uiserver.NewServer(server_options.WithConfigProvider(cfg)), addr: ln.Addr().String(), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = s.srv.Start()
	}()
	innerAddr := inner.String()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", innerAddr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-s.done:
			ln.Close()
			return nil, errors.New("web UI: stopped while starting")
		default:
		}
		if time.Now().After(deadline) {
			ln.Close()
			s.srv.Stop()
			<-s.done
			return nil, fmt.Errorf("web UI: not listening on %s after 10s", innerAddr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: innerAddr})
	s.front = &http.Server{Handler: guard(o.Listen, proxy), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.front.Serve(ln) }()
	return s, nil
}

// guard passes to next only what a person reading the UI in a browser
// asks: GET and HEAD (405 otherwise, whatever the path: the UI server's
// own write blocker let a POST through whose path held an encoded
// /query/), with a Host header that names this server, so that a web
// page elsewhere cannot reach it through a name of its own that resolves
// to this address (DNS rebinding): the host of listen, or a loopback
// name (localhost, 127.0.0.1, [::1]) on any port, which is what an ssh
// or kubectl port-forward presents (421 otherwise).
func guard(listen string, next http.Handler) http.Handler {
	next = OwnNames(listen, "the Web UI", next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the Web UI is read-only", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// OwnNames passes to next only requests whose Host names the server
// listening at listen (what, named in the refusal): the host of listen,
// or a loopback name on any port (421 otherwise). A page elsewhere in a
// browser cannot read it through a name of its own that resolves to this
// address (DNS rebinding).
func OwnNames(listen, what string, next http.Handler) http.Handler {
	listenHost, _, _ := net.SplitHostPort(listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(strings.ToLower(host), "[]")
		switch {
		case host == "localhost", host == strings.Trim(strings.ToLower(listenHost), "[]") && host != "" && !unspecified(host):
		case net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback():
		default:
			http.Error(w, what+" answers only to its own address or a loopback name", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unspecified reports whether host is 0.0.0.0 or ::, which no request
// names.
func unspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// Address is where the UI listens.
func (s *Server) Address() string { return s.addr }

// URL is the UI's address for a browser.
func (s *Server) URL() string { return "http://" + s.addr }

// Stop stops the UI.
func (s *Server) Stop() {
	if s.front != nil {
		s.front.Close()
	}
	s.srv.Stop()
	<-s.done
}
