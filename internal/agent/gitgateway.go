package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git"
)

// gitGateway is how the agent clones the repositories at the forge when
// the worker serves a gateway (Options.GitGateway): over HTTP to a port
// on loopback that the agent relays to the gateway's socket, adding the
// sandbox's own key to each request; the gateway adds the forge's token.
// No token for the forge is in the sandbox, and the agent's git holds no
// key either.
type gitGateway struct {
	*loopbackRelay
	git *git.Git
}

// loopbackRelay is a port of the agent's loopback (base, its URL) that
// leads to the gateway's Unix socket, each request carrying the key:
// git needs no credential of its own, so it neither asks a credential
// helper (a shell, twice a clone) nor sends each clone's first request
// twice (once without, answered 401). close stops it.
type loopbackRelay struct {
	srv  *http.Server
	base string
}

// newLoopbackRelay relays a new port of loopback to the socket sock,
// with key as the password of the basic authentication of each request
// that carries no key of its own.
func newLoopbackRelay(sock, key string) (*loopbackRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway relay: %w", err)
	}
	d := &net.Dialer{Timeout: relayTimeout}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", "gateway", "gateway"
			if pr.Out.Header.Get("Authorization") == "" && pr.Out.Header.Get("X-Api-Key") == "" {
				// git's requests; an agent CLI's carry its key.
				pr.Out.SetBasicAuth("agent", key)
			}
		},
		Transport: &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			http.Error(w, "fleetlift gateway relay: the worker's gateway does not answer", http.StatusBadGateway)
		},
	}
	r := &loopbackRelay{srv: &http.Server{Handler: proxy, ReadHeaderTimeout: relayTimeout}, base: "http://" + ln.Addr().String()}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// close stops the relay and its connections.
func (r *loopbackRelay) close() {
	_ = r.srv.Close()
}

// openGitGateway starts the relay, when the agent has a gateway and its
// sandbox a key to it; nil otherwise.
func (r *runner) openGitGateway() (*gitGateway, error) {
	sock := r.o.GitGateway
	if sock == "" {
		return nil, nil
	}
	key, err := r.gatewayKey()
	if key == "" || err != nil {
		return nil, err
	}
	lr, err := newLoopbackRelay(sock, key)
	if err != nil {
		return nil, err
	}
	// The relay adds the key: git gets no token at all.
	tokenVar := r.g.TokenVariable()
	env := slices.DeleteFunc(slices.Clone(r.o.Env), func(kv string) bool { return strings.HasPrefix(kv, tokenVar+"=") })
	return &gitGateway{loopbackRelay: lr, git: &git.Git{Binary: r.g.Binary, Env: env, TokenEnv: r.g.TokenEnv, ScratchDir: r.g.ScratchDir}}, nil
}

// relay hands each connection ln accepts to one dial makes, until ln is
// closed; wg counts the connections.
func relay(ln net.Listener, wg *sync.WaitGroup, dial func() (net.Conn, error)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			defer c.Close()
			u, err := dial()
			if err != nil {
				var refused relayRefusal
				if errors.As(err, &refused) {
					_, _ = c.Write(refused.reply())
				}
				return
			}
			defer u.Close()
			done := make(chan struct{})
			go func() {
				_, _ = io.Copy(u, c)
				if cw, ok := u.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
				close(done)
			}()
			_, _ = io.Copy(c, u)
			_ = c.Close()
			<-done
		})
	}
}

// GatewayRelay is a Unix socket in the agent's own directory that relays
// to a worker's gateway at a network address: Kubernetes sandboxes reach
// their worker's gateway over the pod network, and the agent then uses
// the socket as it uses a local provider's (serve's --gateway), its jail
// forwards included. It may relay a second socket to the worker's egress
// proxy, through the gateway (serve's --egress-socket).
//
// The gateway's address is read for each connection: the one the
// sandbox's protocol directory names (protocol.GatewayURLFile), which a
// worker that took the sandbox over from another writes there, else the
// one the relay was made with. So is the sandbox's key, for each request
// (see serveGateway).
type GatewayRelay struct {
	// Socket is the socket's path.
	Socket string
	// Egress is the egress proxy's socket, "" unless asked for.
	Egress string
	url    *url.URL
	pdir   string
	dir    string
	lns    []net.Listener
	srv    *http.Server
	wg     sync.WaitGroup
}

// NewGatewayRelay relays a new socket to the gateway at raw, an
// http://host:port URL with no path, or at the one the protocol
// directory pdir names. With egress, it relays another to the gateway's
// egress proxy (protocol.GatewayEgressPath), each connection upgraded
// with the sandbox's key from pdir (protocol.GatewayKeyFile): the work
// holds no key for it.
func NewGatewayRelay(raw, pdir string, egress bool) (*GatewayRelay, error) {
	u, err := ParseGatewayURL(raw)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleetlift-gateway-")
	if err != nil {
		return nil, fmt.Errorf("gateway relay: %w", err)
	}
	r := &GatewayRelay{Socket: filepath.Join(dir, "gateway.sock"), url: u, pdir: pdir, dir: dir}
	if err := r.serveGateway(); err != nil {
		r.Close()
		return nil, err
	}
	if egress {
		r.Egress = filepath.Join(dir, "egress.sock")
		if err := r.listen(r.Egress, r.dialEgress); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// listen relays the socket sock to what dial dials.
func (r *GatewayRelay) listen(sock string, dial func() (net.Conn, error)) error {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("gateway relay: %w", err)
	}
	r.lns = append(r.lns, ln)
	r.wg.Go(func() { relay(ln, &r.wg, dial) })
	return nil
}

// relayTimeout bounds connecting to the gateway, and the egress
// proxy's answer to an upgrade.
const relayTimeout = 10 * time.Second

// host is the gateway's host:port as it is now.
func (r *GatewayRelay) host() string {
	data, err := os.ReadFile(filepath.Join(r.pdir, protocol.GatewayURLFile))
	if err != nil {
		return r.url.Host
	}
	u, err := ParseGatewayURL(strings.TrimSpace(string(data)))
	if err != nil {
		return r.url.Host
	}
	return u.Host
}

// serveGateway serves the socket as a proxy to the gateway that puts
// the sandbox's key as it is now (protocol.GatewayKeyFile) in place of
// the one each request carries: a worker that takes the sandbox over
// gives it a new key, and an agent CLI started before keeps the old one
// in its environment, which no gateway takes afterwards. The CLI gains
// nothing by it: it holds the sandbox's key anyway.
func (r *GatewayRelay) serveGateway() error {
	ln, err := net.Listen("unix", r.Socket)
	if err != nil {
		return fmt.Errorf("gateway relay: %w", err)
	}
	d := &net.Dialer{Timeout: relayTimeout}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			host := r.host()
			pr.Out.URL.Scheme, pr.Out.URL.Host, pr.Out.Host = "http", host, host
			if key := r.key(); key != "" {
				withKey(pr.Out.Header, key)
			}
		},
		Transport: &http.Transport{
			DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", r.host()) },
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		},
		// Streamed answers (a model's events) reach the client as they come.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			http.Error(w, "fleetlift gateway relay: the worker's gateway does not answer", http.StatusBadGateway)
		},
	}
	r.srv = &http.Server{Handler: proxy, ReadHeaderTimeout: relayTimeout}
	r.wg.Go(func() { _ = r.srv.Serve(ln) })
	return nil
}

// key is the sandbox's key to the gateway as its protocol directory
// holds it now; "" when it holds none.
func (r *GatewayRelay) key() string {
	data, err := os.ReadFile(filepath.Join(r.pdir, protocol.GatewayKeyFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// withKey puts key where h carries a key to the gateway: the password of
// basic authentication (git), a bearer token (OpenAI's API), and
// X-Api-Key (the Messages API, and a request that carries none).
func withKey(h http.Header, key string) {
	auth := h.Get("Authorization")
	req := &http.Request{Header: h}
	if user, _, ok := req.BasicAuth(); ok {
		req.SetBasicAuth(user, key)
	} else if strings.HasPrefix(auth, "Bearer ") {
		h.Set("Authorization", "Bearer "+key)
	}
	if h.Get("X-Api-Key") != "" || auth == "" {
		h.Set("X-Api-Key", key)
	}
}

// dialEgress connects to the gateway and upgrades the connection to its
// egress proxy with the sandbox's key.
func (r *GatewayRelay) dialEgress() (net.Conn, error) {
	key := r.key()
	if key == "" {
		return nil, relayRefusal("the sandbox has no key to the worker's gateway yet")
	}
	host := r.host()
	d := net.Dialer{Timeout: relayTimeout}
	c, err := d.Dial("tcp", host)
	if err != nil {
		return nil, relayRefusal("the worker's gateway does not answer")
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+host+protocol.GatewayEgressPath, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", protocol.GatewayEgressUpgrade)
	req.Header.Set("X-Api-Key", key)
	_ = c.SetDeadline(time.Now().Add(relayTimeout))
	br := bufio.NewReader(c)
	if err := req.Write(c); err != nil {
		c.Close()
		return nil, relayRefusal("the worker's gateway does not answer")
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		c.Close()
		return nil, relayRefusal("the worker's gateway does not answer")
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		c.Close()
		return nil, relayRefusal(fmt.Sprintf("the worker's gateway refused: %s: %s", resp.Status, strings.TrimSpace(string(body))))
	}
	_ = c.SetDeadline(time.Time{})
	return &bufferedConn{Conn: c, r: br}, nil
}

// relayRefusal is why a relay could not reach what it leads to: the
// client is told, as a proxy tells it.
type relayRefusal string

func (e relayRefusal) Error() string { return string(e) }

// reply is e as an HTTP proxy's answer.
func (e relayRefusal) reply() []byte {
	msg := "fleetlift egress relay: " + string(e) + "\n"
	return []byte(fmt.Sprintf("HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg))
}

// bufferedConn is a connection whose first bytes were read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// ParseGatewayURL checks that raw is a gateway's address as
// EnvGatewayURL holds it: http://HOST:PORT.
func ParseGatewayURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" || u.Port() == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("gateway %q: want http://HOST:PORT", raw)
	}
	return u, nil
}

// Close stops the relay, waits for its connections and removes its
// sockets.
func (r *GatewayRelay) Close() {
	if r.srv != nil {
		_ = r.srv.Close()
	}
	for _, ln := range r.lns {
		ln.Close()
	}
	r.wg.Wait()
	os.RemoveAll(r.dir)
}

// close stops the relay and waits for its connections.
func (gw *gitGateway) close() {
	if gw == nil {
		return
	}
	gw.loopbackRelay.close()
}

// route is where repository raw is cloned from, and with which git: the
// gateway for an http(s) repository at the forge (an origin the worker
// named, Git.TokenOrigins), and for a local one when the gateway serves
// those (Options.GitGatewayFiles); raw itself otherwise.
func (gw *gitGateway) route(r *runner, name, raw string) (string, *git.Git) {
	if gw == nil {
		return raw, r.g
	}
	if _, local := git.LocalPath(raw); local && r.o.GitGatewayFiles {
		return gw.base + gateway.GitPrefix + url.PathEscape(name), gw.git
	}
	o, err := git.Origin(raw)
	if err != nil || !slices.Contains(r.g.TokenOrigins, o) {
		return raw, r.g
	}
	return gw.base + gateway.GitPrefix + url.PathEscape(name), gw.git
}
