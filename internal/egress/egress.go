package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Rule is one entry of the allowlist: a host name (or, with a leading
// "*.", any name below a domain) and a port, 0 meaning 80 and 443.
type Rule struct {
	Host string
	Port int
}

func (r Rule) String() string {
	if r.Port == 0 {
		return r.Host
	}
	return net.JoinHostPort(r.Host, strconv.Itoa(r.Port))
}

// ParseRules reads an operator's allowlist: entries such as
// registry.npmjs.org, proxy.golang.org:443 or *.pythonhosted.org.
func ParseRules(entries []string) ([]Rule, error) {
	var rules []Rule
	for _, e := range entries {
		e = strings.TrimSpace(strings.ToLower(e))
		if e == "" {
			continue
		}
		r := Rule{Host: e}
		if h, p, err := net.SplitHostPort(e); err == nil {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return nil, fmt.Errorf("egress rule %q: the port must be from 1 to 65535", e)
			}
			r = Rule{Host: h, Port: n}
		}
		name := strings.TrimPrefix(r.Host, "*.")
		if name == "" || strings.ContainsAny(name, "*/@ ") || strings.HasSuffix(name, ".") {
			return nil, fmt.Errorf("egress rule %q: want a host name, *.domain, or either with :port", e)
		}
		if a, err := netip.ParseAddr(name); err == nil && Forbidden(a) {
			return nil, fmt.Errorf("egress rule %q: %s is never reachable from a sandbox (loopback, private or link-local)", e, a)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// allows reports whether some rule allows host:port.
func allows(rules []Rule, host string, port int) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, r := range rules {
		if r.Port == 0 && port != 80 && port != 443 || r.Port != 0 && r.Port != port {
			continue
		}
		if domain, ok := strings.CutPrefix(r.Host, "*."); ok {
			if strings.HasSuffix(host, "."+domain) {
				return true
			}
		} else if host == r.Host {
			return true
		}
	}
	return false
}

// Forbidden reports whether a is an address no sandbox may reach: the
// unspecified address, loopback, private (RFC 1918, unique local), shared
// (100.64.0.0/10), link-local (cloud metadata services among them) or
// multicast. IPv4-mapped IPv6 addresses are judged as the IPv4 address.
func Forbidden(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsValid() || a.IsUnspecified() || a.IsLoopback() || a.IsPrivate() ||
		a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() || a.IsMulticast() ||
		shared.Contains(a) || a.Is4() && a.As4()[0] == 0
}

var shared = netip.MustParsePrefix("100.64.0.0/10")

// Resolver looks names up; net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Proxy is the egress proxy, an http.Handler: serve it on the Unix socket
// the jails forward to.
type Proxy struct {
	// Rules are the hosts the work may reach; none: nothing.
	Rules []Rule
	// Resolver looks up allowed names; nil: net.DefaultResolver.
	Resolver Resolver
	// Refuse reports the addresses never dialled; nil: Forbidden. Tests
	// alone set it, to reach a server of their own on loopback.
	Refuse func(netip.Addr) bool
	// Dialer dials the checked addresses; nil: 10 s to connect.
	Dialer *net.Dialer
	// Refused, when set, is told every request refused and why.
	Refused func(host string, port int, reason string)
}

// errRefused is a destination the proxy will not reach.
var errRefused = errors.New("refused")

// dial connects to host:port after checking both against the rules and
// every address host resolves to against Refuse; it dials the first
// address allowed, never resolving again.
func (p *Proxy) dial(ctx context.Context, host string, port int) (net.Conn, error) {
	if !allows(p.Rules, host, port) {
		return nil, fmt.Errorf("%w: %s is not on the operator's egress allowlist", errRefused, net.JoinHostPort(host, strconv.Itoa(port)))
	}
	refuse := p.Refuse
	if refuse == nil {
		refuse = Forbidden
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		r := p.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("look up %s: %w", host, err)
		}
	}
	d := p.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: 10 * time.Second}
	}
	var last error = fmt.Errorf("%w: %s resolves only to addresses a sandbox may never reach", errRefused, host)
	for _, a := range addrs {
		if refuse(a) {
			continue
		}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

// ServeHTTP tunnels a CONNECT and forwards an absolute-form http request,
// each only to an allowed destination; anything else is refused.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		p.forward(w, r)
	default:
		http.Error(w, "fleetlift egress proxy: only CONNECT and http:// requests", http.StatusBadRequest)
	}
}

// destination is the host and port a request names, with def as the port
// when it names none.
func destination(hostport string, def int) (string, int, error) {
	host, port := hostport, def
	if h, ps, err := net.SplitHostPort(hostport); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil || n <= 0 || n > 65535 {
			return "", 0, fmt.Errorf("bad port in %q", hostport)
		}
		host, port = h, n
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	return host, port, nil
}

func (p *Proxy) refused(w http.ResponseWriter, host string, port int, err error) {
	code := http.StatusBadGateway
	if errors.Is(err, errRefused) {
		code = http.StatusForbidden
		if p.Refused != nil {
			p.Refused(host, port, err.Error())
		}
	}
	http.Error(w, "fleetlift egress proxy: "+err.Error(), code)
}

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := destination(r.Host, 443)
	if err != nil {
		http.Error(w, "fleetlift egress proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	up, err := p.dial(r.Context(), host, port)
	if err != nil {
		p.refused(w, host, port, err)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "fleetlift egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() {
		// What the client sent after its CONNECT, already buffered.
		if n := buf.Reader.Buffered(); n > 0 {
			data, _ := buf.Reader.Peek(n)
			if _, err := up.Write(data); err != nil {
				done <- struct{}{}
				return
			}
		}
		_, _ = io.Copy(up, c)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	go func() {
		_, _ = io.Copy(c, up)
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}()
	<-done
	<-done
}

func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	host, port, err := destination(r.URL.Host, 80)
	if err != nil {
		http.Error(w, "fleetlift egress proxy: "+err.Error(), http.StatusBadRequest)
		return
	}
	// Checked before any byte goes out; the transport dials the same way.
	if !allows(p.Rules, host, port) {
		p.refused(w, host, port, fmt.Errorf("%w: %s is not on the operator's egress allowlist", errRefused, net.JoinHostPort(host, strconv.Itoa(port))))
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = pr.In.URL
			pr.Out.Host = pr.In.URL.Host
		},
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return p.dial(ctx, host, port)
			},
			ResponseHeaderTimeout: time.Minute,
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			p.refused(w, host, port, err)
		},
	}
	rp.ServeHTTP(w, r)
}
