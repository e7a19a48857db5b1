package gateway

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
)

// GitReads serves sandboxes' agents the clones and fetches of the
// repositories their task names, under GitPrefix: git's smart HTTP
// protocol, reads only (upload-pack), with the worker's credential added
// on the way, so that no token for the forge is in a sandbox.
type GitReads struct {
	// Credential is the Authorization header to send to the repository
	// at url (the forge's token for the forge's own origin), "" for
	// none.
	Credential func(url string) string
	// Transport makes the upstream requests; nil: http.DefaultTransport.
	Transport http.RoundTripper
}

// GitPrefix is where the gateway serves GitReads: GitPrefix + the
// repository's name in the manifest, path-escaped, is the URL to clone.
const GitPrefix = "/git/"

// gitKey is the sandbox key of a git request: git sends it as the
// password of basic authentication.
func gitKey(r *http.Request) string {
	_, pass, _ := r.BasicAuth()
	return pass
}

// serveGit serves a git read of one of the box's repositories, or refuses
// it: anything but upload-pack (403), a repository the task does not
// name (404).
func (g *Gateway) serveGit(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	b := g.boxes[gitKey(r)]
	g.mu.Unlock()
	if b == nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="fleetlift gateway"`)
		http.Error(w, "fleetlift gateway: not a key of a sandbox this gateway serves", http.StatusUnauthorized)
		return
	}
	if g.Git == nil {
		http.Error(w, "fleetlift gateway: this worker serves no repositories", http.StatusServiceUnavailable)
		return
	}
	rest := strings.TrimPrefix(r.URL.EscapedPath(), GitPrefix)
	escaped, op, ok := strings.Cut(rest, "/")
	name, err := url.PathUnescape(escaped)
	if !ok || err != nil {
		http.Error(w, "fleetlift gateway: not a repository path", http.StatusNotFound)
		return
	}
	switch {
	case op == "info/refs" && r.Method == http.MethodGet && r.URL.Query().Get("service") == "git-upload-pack":
	case op == "git-upload-pack" && r.Method == http.MethodPost:
	default:
		http.Error(w, "fleetlift gateway: sandboxes only read repositories (git-upload-pack)", http.StatusForbidden)
		return
	}
	var raw string
	if b.Repositories != nil {
		raw = b.Repositories()[name]
	}
	base, err := url.Parse(strings.TrimSuffix(raw, "/"))
	if raw == "" || err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || base.User != nil {
		http.Error(w, "fleetlift gateway: the task names no repository "+name+" served over HTTP", http.StatusNotFound)
		return
	}
	target := *base
	target.Path = strings.TrimSuffix(base.Path, "/") + "/" + op
	target.RawPath = ""
	target.RawQuery = r.URL.RawQuery
	cred := ""
	if g.Git.Credential != nil {
		cred = g.Git.Credential(raw)
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &target
			pr.Out.Host = target.Host
			// The sandbox's key goes nowhere; the worker's credential
			// goes only to the repository it is for.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Cookie")
			if cred != "" {
				pr.Out.Header.Set("Authorization", cred)
			}
		},
		Transport: g.Git.Transport,
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, _ error) {
			http.Error(w, "fleetlift gateway: the repository did not answer", http.StatusBadGateway)
		},
	}
	proxy.ServeHTTP(w, r)
}
