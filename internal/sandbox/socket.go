package sandbox

import (
	"net"
	"net/http"
	"os"
	"time"
)

// ServeUnix serves h on a Unix socket at path, replacing a socket an
// earlier process left there, readable and writable by mode (a sandbox's
// agent may run as another user): the egress proxy and the model gateway
// that sandboxes' jails forward to. Close the server to stop.
func ServeUnix(path string, h http.Handler, mode os.FileMode) (*http.Server, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, nil
}
