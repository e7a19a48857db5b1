package agent

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git"
)

// gitGateway is how the agent clones the repositories at the forge when
// the worker serves a gateway (Options.GitGateway): over HTTP to a port
// on loopback that the agent relays to the gateway's socket, with the
// sandbox's own key as the password; the gateway adds the forge's token.
// No token for the forge is in the sandbox.
type gitGateway struct {
	*loopbackRelay
	git *git.Git
}

// loopbackRelay is a port of the agent's loopback (base, its URL) that
// leads to the gateway's Unix socket, for the agent's git and an unjailed
// agent CLI; close stops it.
type loopbackRelay struct {
	ln   net.Listener
	base string
	wg   sync.WaitGroup
}

// newLoopbackRelay relays a new port of loopback to the socket sock.
func newLoopbackRelay(sock string) (*loopbackRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway relay: %w", err)
	}
	r := &loopbackRelay{ln: ln, base: "http://" + ln.Addr().String()}
	r.wg.Go(func() { relay(ln, &r.wg, func() (net.Conn, error) { return net.Dial("unix", sock) }) })
	return r, nil
}

// close stops the relay and waits for its connections.
func (r *loopbackRelay) close() {
	r.ln.Close()
	r.wg.Wait()
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
	lr, err := newLoopbackRelay(sock)
	if err != nil {
		return nil, err
	}
	gw := &gitGateway{loopbackRelay: lr}
	// Git sends the key, as its token, to the relay alone.
	tokenVar := r.g.TokenVariable()
	env := slices.DeleteFunc(slices.Clone(r.o.Env), func(kv string) bool { return strings.HasPrefix(kv, tokenVar+"=") })
	gw.git = &git.Git{
		Binary: r.g.Binary, Env: append(env, tokenVar+"="+key),
		TokenEnv: r.g.TokenEnv, TokenOrigins: []string{gw.base}, ScratchDir: r.g.ScratchDir,
	}
	return gw, nil
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
// forwards included.
type GatewayRelay struct {
	// Socket is the socket's path.
	Socket string
	dir    string
	ln     net.Listener
	wg     sync.WaitGroup
}

// NewGatewayRelay relays a new socket to the gateway at raw, an
// http://host:port URL with no path.
func NewGatewayRelay(raw string) (*GatewayRelay, error) {
	u, err := ParseGatewayURL(raw)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleetlift-gateway-")
	if err != nil {
		return nil, fmt.Errorf("gateway relay: %w", err)
	}
	sock := filepath.Join(dir, "gateway.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("gateway relay: %w", err)
	}
	r := &GatewayRelay{Socket: sock, dir: dir, ln: ln}
	d := net.Dialer{Timeout: 10 * time.Second}
	r.wg.Go(func() { relay(ln, &r.wg, func() (net.Conn, error) { return d.Dial("tcp", u.Host) }) })
	return r, nil
}

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
// socket.
func (r *GatewayRelay) Close() {
	r.ln.Close()
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
// named, Git.TokenOrigins), raw itself otherwise.
func (gw *gitGateway) route(r *runner, name, raw string) (string, *git.Git) {
	if gw == nil {
		return raw, r.g
	}
	o, err := git.Origin(raw)
	if err != nil || !slices.Contains(r.g.TokenOrigins, o) {
		return raw, r.g
	}
	return gw.base + gateway.GitPrefix + url.PathEscape(name), gw.git
}
