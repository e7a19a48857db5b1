package webhook

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Server serves a Handler over HTTP at /webhook, and "ok" at /healthz
// for probes.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Listen serves h on addr (host:port) until Close. A request's headers
// must arrive within 10s and the whole request within 30s, so that a
// slow client holds no connection longer.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/webhook", h)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	s := &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address s listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops s, letting requests in flight finish for up to 5s.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.srv.Shutdown(ctx)
}
