package gateway

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
)

// serveEgress hands a sandbox's connection to the egress proxy
// (Gateway.Egress): a GET of protocol.GatewayEgressPath with the
// sandbox's key that asks to upgrade to protocol.GatewayEgressUpgrade is
// answered with 101 Switching Protocols, and the proxy then serves the
// connection until it ends or the key is closed. Without a key the
// gateway serves, nothing reaches the proxy: only the sandboxes of this
// worker use it, under its allowlist.
func (g *Gateway) serveEgress(w http.ResponseWriter, r *http.Request) {
	if g.Egress == nil {
		http.Error(w, "fleetlift gateway: this worker serves no egress proxy (its --sandbox-egress allows no host)", http.StatusNotFound)
		return
	}
	g.mu.Lock()
	b := g.boxes[sandboxKey(r)]
	g.mu.Unlock()
	if b == nil {
		http.Error(w, "fleetlift gateway: not a key of a sandbox this gateway serves", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet || !upgrades(r.Header) {
		http.Error(w, "fleetlift gateway: the egress proxy is reached by upgrading a GET to "+protocol.GatewayEgressUpgrade, http.StatusBadRequest)
		return
	}
	c, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "fleetlift gateway: cannot hand the connection to the egress proxy", http.StatusInternalServerError)
		return
	}
	// The gateway's server may have left its deadlines on it.
	_ = c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + protocol.GatewayEgressUpgrade + "\r\n\r\n")); err != nil {
		c.Close()
		return
	}
	conn := &egressConn{Conn: c, r: buf.Reader, done: make(chan struct{})}
	// A closed key ends the sandbox's connections through the proxy.
	stop := context.AfterFunc(b.ctx, func() { conn.Close() })
	defer stop()
	srv := &http.Server{Handler: g.Egress, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	_ = srv.Serve(&oneConn{c: conn})
	<-conn.done
}

// upgrades reports whether h asks to upgrade the connection to the
// egress proxy.
func upgrades(h http.Header) bool {
	if !strings.EqualFold(strings.TrimSpace(h.Get("Upgrade")), protocol.GatewayEgressUpgrade) {
		return false
	}
	for _, v := range h.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// egressConn is a hijacked connection, what was read of it already
// first; done is closed once it is.
type egressConn struct {
	net.Conn
	r    *bufio.Reader
	once sync.Once
	done chan struct{}
}

func (c *egressConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *egressConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { close(c.done) })
	return err
}

// oneConn is a listener that accepts c once, then nothing until c is
// closed: an http.Server serves c alone and returns when it ends.
type oneConn struct {
	c    *egressConn
	once sync.Once
}

func (l *oneConn) Accept() (net.Conn, error) {
	var first net.Conn
	l.once.Do(func() { first = l.c })
	if first != nil {
		return first, nil
	}
	<-l.c.done
	return nil, net.ErrClosed
}

func (l *oneConn) Close() error   { return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }
