package agent

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/git"
)

// gitGateway is how the agent clones the repositories at the forge when
// the worker serves a gateway (Options.GitGateway): over HTTP to a port
// on loopback that the agent relays to the gateway's socket, with the
// sandbox's own key as the password; the gateway adds the forge's token.
// No token for the forge is in the sandbox.
type gitGateway struct {
	ln   net.Listener
	base string
	git  *git.Git
	wg   sync.WaitGroup
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gateway relay: %w", err)
	}
	gw := &gitGateway{ln: ln, base: "http://" + ln.Addr().String()}
	// Git sends the key, as its token, to the relay alone.
	tokenVar := r.g.TokenVariable()
	env := slices.DeleteFunc(slices.Clone(r.o.Env), func(kv string) bool { return strings.HasPrefix(kv, tokenVar+"=") })
	gw.git = &git.Git{
		Binary: r.g.Binary, Env: append(env, tokenVar+"="+key),
		TokenEnv: r.g.TokenEnv, TokenOrigins: []string{gw.base}, ScratchDir: r.g.ScratchDir,
	}
	gw.wg.Go(func() { gw.relay(sock) })
	return gw, nil
}

// relay hands each connection to the gateway's socket until closed.
func (gw *gitGateway) relay(sock string) {
	for {
		c, err := gw.ln.Accept()
		if err != nil {
			return
		}
		gw.wg.Go(func() {
			defer c.Close()
			u, err := net.Dial("unix", sock)
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

// close stops the relay and waits for its connections.
func (gw *gitGateway) close() {
	if gw == nil {
		return
	}
	gw.ln.Close()
	gw.wg.Wait()
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
