package git

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// smartHTTP talks git's smart HTTP protocol to one repository in this
// process, instead of git and the processes it starts (the HTTP helper,
// send-pack or fetch-pack, pack-objects or index-pack, the credential
// helper). It takes the common case only.
//
// push sends one commit of a clone: a commit made in the clone on top of
// what was fetched, so that the objects to send are the loose ones
// reachable from it (a fetch leaves packs; a commit, its trees and the
// blobs git add stored are loose). clone (httpclone.go) makes a shallow
// clone of one branch.
//
// errLeftToGit (wrapped) says git should do it instead: the URL, the
// environment (a proxy, a certificate authority of its own), the server
// or the repository is not the common case, or the server refused the
// push (objects packed in the clone it lacks, a hook, a race), which git
// push then tries and explains. The one other error of push is the
// lease's: the branch is not where the push expected it.
type smartHTTP struct {
	g      *Git
	url    string
	client *http.Client
	// own: the client's transport is its own (not one of transports),
	// and is closed with it.
	own bool
}

// release closes the connections of the client's own transport; a shared
// one keeps them for the next client (idleHTTP).
func (p *smartHTTP) release() {
	if p.own {
		p.client.CloseIdleConnections()
	}
}

var errLeftToGit = errors.New("left to git")

// declined wraps errLeftToGit with why.
func declined(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errLeftToGit}, args...)...)
}

// maxHTTPPushBytes bounds the objects a push holds in memory; a larger
// push streams through git.
const maxHTTPPushBytes = 32 << 20

// proxyEnv are the variables that send git's HTTP through a proxy: with
// any of them set, git pushes.
var proxyEnv = []string{"http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}

// newSmartHTTP returns the in-process client of the repository at rawURL,
// or an error wrapping errLeftToGit when git should talk to it.
func (g *Git) newSmartHTTP(rawURL string) (*smartHTTP, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, declined("not a plain URL")
	}
	// Plain http only to this machine, as git is allowed it (environ).
	if !strings.EqualFold(u.Scheme, "https") && !isLoopbackHTTP(rawURL) {
		return nil, declined("not https, nor http to this machine")
	}
	for _, name := range proxyEnv {
		if g.getenv(name) != "" {
			return nil, declined("%s is set", name)
		}
	}
	tr, shared, err := g.transport(u)
	if err != nil {
		return nil, err
	}
	return &smartHTTP{g: g, url: strings.TrimSuffix(rawURL, "/"), own: !shared, client: &http.Client{
		Transport: tr,
		// The token goes to the URL's origin alone: a redirect is git's
		// to follow (its own rules), not this client's.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}, nil
}

// transports are the HTTP transports of in-process clones and pushes
// that trust the system's certificate authorities, one per origin: a
// push after a clone of the same repository goes over the connection,
// and the TLS session, the clone left open, when it comes within
// idleHTTP. A transport with authorities of git's own (GIT_SSL_CAINFO,
// GIT_SSL_CAPATH) is made for the one client, with those files as they
// are then. A transport holds no credential: each request carries its
// own.
var transports sync.Map // origin -> *http.Transport

// idleHTTP is how long a connection of an in-process clone or push stays
// open, idle, for the next one to the same origin.
const idleHTTP = time.Second

// transport is the HTTP transport for the repository at u, and whether
// it is one of transports.
func (g *Git) transport(u *url.URL) (tr *http.Transport, shared bool, err error) {
	https := strings.EqualFold(u.Scheme, "https")
	caFile, caDir := g.getenv("GIT_SSL_CAINFO"), g.getenv("GIT_SSL_CAPATH")
	shared = !https || (caFile == "" && caDir == "")
	origin := strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
	if shared {
		if v, ok := transports.Load(origin); ok {
			return v.(*http.Transport), true, nil
		}
	}
	tr = &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 30 * time.Second, IdleConnTimeout: idleHTTP}
	if https {
		// The certificate authorities git trusts: GIT_SSL_CAINFO and
		// GIT_SSL_CAPATH in place of the system's, as curl takes them.
		roots, err := caRoots(caFile, caDir)
		if err != nil {
			return nil, false, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	if shared {
		got, _ := transports.LoadOrStore(origin, tr)
		return got.(*http.Transport), true, nil
	}
	return tr, false, nil
}

// caRoots are the certificates in file and in the files of dir; nil
// (the system's) when both are empty.
func caRoots(file, dir string) (*x509.CertPool, error) {
	if file == "" && dir == "" {
		return nil, nil
	}
	pool := x509.NewCertPool()
	var files []string
	if file != "" {
		files = append(files, file)
	}
	if dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, declined("GIT_SSL_CAPATH: %v", err)
		}
		for _, e := range entries {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	for _, f := range files {
		// Certificate files are often links (/etc/ssl/certs).
		var data []byte
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Size() <= 16<<20 {
			data, _ = os.ReadFile(f)
		}
		if data == nil && f == file {
			return nil, declined("GIT_SSL_CAINFO %s cannot be read", f)
		}
		pool.AppendCertsFromPEM(data)
	}
	return pool, nil
}

// do sends one request, with the token when its origin may have it, and
// reads an answer of at most a megabyte.
func (p *smartHTTP) do(ctx context.Context, method, path, contentType string, body []byte) ([]byte, error) {
	resp, err := p.send(ctx, method, path, contentType, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, declined("read the answer: %v", err)
	}
	return data, nil
}

// send sends one request, with the token when its origin may have it; the
// answer's status is 200 and its body is the caller's to close.
func (p *smartHTTP) send(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, p.url+path, rd)
	if err != nil {
		return nil, declined("request: %v", err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("User-Agent", "git/fleetlift")
	if p.g.tokenAllowed(p.url) {
		if token := p.g.token(); token != "" {
			// As the credential helper answers (credentialConfig).
			user := p.g.getenv(UsernameEnv)
			if user == "" {
				user = "x-access-token"
			}
			req.SetBasicAuth(user, token)
		}
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// The error names the URL, never the header.
		return nil, declined("%s", p.g.redact(err.Error()))
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, declined("%s %s: %s", method, Redact(path), resp.Status)
	}
	return resp, nil
}

// push sends u (Src a full object id) from the clone whose objects
// directory is objects, and reports whether it made u.Dst.
func (p *smartHTTP) push(ctx context.Context, objects string, u RefUpdate) (bool, error) {
	adv, err := p.do(ctx, http.MethodGet, "/info/refs?service=git-receive-pack", "", nil)
	if err != nil {
		return false, err
	}
	refs, caps, err := parseAdvertisement(adv, "git-receive-pack")
	if err != nil {
		return false, err
	}
	if !caps["report-status"] || caps["object-format=sha256"] || len(u.Src) != 40 {
		return false, declined("the server or the object format is not the common case")
	}
	old, exists := refs[u.Dst]
	if exists && old == u.Src {
		return false, nil // up to date, whatever the lease
	}
	if !u.Lease {
		// Whether it fast-forwards is git push's to check.
		return false, declined("a push without a lease")
	}
	if old != u.Expect {
		if !exists {
			old = "nothing"
		}
		return false, fmt.Errorf("push to %s: %s is at %s, not %s as leased: stale info", Redact(p.url), u.Dst, old, leaseWord(u.Expect))
	}
	if !exists {
		old = zeroID
	}
	pack, err := packLoose(objects, u.Src)
	if err != nil {
		return false, err
	}
	// Only capabilities the server advertised (agent= says it takes a
	// client's agent string).
	want := "report-status"
	for c := range caps {
		if strings.HasPrefix(c, "agent=") {
			want += " agent=git/fleetlift"
			break
		}
	}
	var body bytes.Buffer
	writePktLine(&body, fmt.Sprintf("%s %s %s\x00%s\n", old, u.Src, u.Dst, want))
	body.WriteString("0000")
	body.Write(pack)
	res, err := p.do(ctx, http.MethodPost, "/git-receive-pack", "application/x-git-receive-pack-request", body.Bytes())
	if err != nil {
		return false, err
	}
	return !exists, parseReportStatus(res, u.Dst)
}

const zeroID = "0000000000000000000000000000000000000000"

func leaseWord(expect string) string {
	if expect == "" {
		return "absent"
	}
	return expect
}

// pktLines splits git's pkt-line framing; a flush packet is "".
func pktLines(data []byte) ([]string, error) {
	var out []string
	r := bytes.NewReader(data)
	var buf []byte
	for r.Len() > 0 {
		line, flush, err := readPktLine(r, &buf)
		if err != nil {
			return nil, err
		}
		if flush {
			out = append(out, "")
			continue
		}
		out = append(out, strings.TrimSuffix(string(line), "\n"))
	}
	return out, nil
}

// readPktLine reads one pkt-line from r into *buf (reused from call to
// call): its payload, or flush for a flush packet.
func readPktLine(r io.Reader, buf *[]byte) (payload []byte, flush bool, err error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, false, declined("a cut pkt-line")
	}
	n, err := strconv.ParseUint(string(hdr[:]), 16, 16)
	if err != nil || (n > 0 && n < 4) {
		return nil, false, declined("a bad pkt-line length %q", hdr[:])
	}
	if n == 0 {
		return nil, true, nil
	}
	*buf = slices.Grow((*buf)[:0], int(n)-4)[:n-4]
	if _, err := io.ReadFull(r, *buf); err != nil {
		return nil, false, declined("a cut pkt-line")
	}
	return *buf, false, nil
}

func writePktLine(w *bytes.Buffer, s string) {
	fmt.Fprintf(w, "%04x%s", len(s)+4, s)
}

// parseAdvertisement reads the ref advertisement of service
// (git-receive-pack, git-upload-pack).
func parseAdvertisement(data []byte, service string) (map[string]string, map[string]bool, error) {
	lines, err := pktLines(data)
	if err != nil {
		return nil, nil, err
	}
	if len(lines) < 2 || lines[0] != "# service="+service || lines[1] != "" {
		return nil, nil, declined("not a %s advertisement", service)
	}
	refs, caps := map[string]string{}, map[string]bool{}
	for i, line := range lines[2:] {
		if line == "" {
			break
		}
		if i == 0 {
			l, c, ok := strings.Cut(line, "\x00")
			if !ok {
				return nil, nil, declined("no capabilities advertised")
			}
			for _, cap := range strings.Fields(c) {
				caps[cap] = true
			}
			line = l
		}
		id, name, ok := strings.Cut(line, " ")
		if !ok || !IsObjectID(id) {
			return nil, nil, declined("a bad advertised ref %q", line)
		}
		if name != "capabilities^{}" {
			refs[name] = id
		}
	}
	return refs, caps, nil
}

// parseReportStatus reads receive-pack's report for ref.
func parseReportStatus(data []byte, ref string) error {
	lines, err := pktLines(data)
	if err != nil {
		return err
	}
	if len(lines) == 0 || lines[0] != "unpack ok" {
		// Objects it lacks (packed in the clone, say): git finds them.
		return declined("the server did not take the objects: %q", strings.Join(lines, "; "))
	}
	for _, line := range lines[1:] {
		switch {
		case line == "ok "+ref:
			return nil
		case strings.HasPrefix(line, "ng "+ref+" "):
			// Refused (objects missing, a hook, a race): git push tries
			// again and says why in its own words.
			return declined("refused: %s", strings.TrimPrefix(line, "ng "+ref+" "))
		}
	}
	return declined("no report for %s", ref)
}

// packLoose packs the loose objects reachable from commit through loose
// objects alone: a packed object (and what it reaches) came with the
// fetch, so the remote has it.
func packLoose(objects, commit string) ([]byte, error) {
	type object struct {
		typ  int
		data []byte
	}
	var found []object
	seen := map[string]bool{}
	total := 0
	stack := []string{commit}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		typ, data, ok, err := readLoose(objects, id)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if total += len(data); total > maxHTTPPushBytes {
			return nil, declined("more than %d bytes to send", maxHTTPPushBytes)
		}
		found = append(found, object{typ, data})
		switch typ {
		case objCommit:
			tree, parents, err := commitLinks(data)
			if err != nil {
				return nil, err
			}
			stack = append(append(stack, parents...), tree)
		case objTree:
			ids, err := treeLinks(data)
			if err != nil {
				return nil, err
			}
			stack = append(stack, ids...)
		}
	}
	var pack bytes.Buffer
	pack.WriteString("PACK")
	_ = binary.Write(&pack, binary.BigEndian, uint32(2))
	_ = binary.Write(&pack, binary.BigEndian, uint32(len(found)))
	for _, o := range found {
		// Type and size: 3 bits of type and 4 of size, then 7 bits of
		// size a byte, lowest first, each byte but the last flagged.
		size := len(o.data)
		b := byte(o.typ<<4) | byte(size&0x0f)
		size >>= 4
		for size > 0 {
			pack.WriteByte(b | 0x80)
			b = byte(size & 0x7f)
			size >>= 7
		}
		pack.WriteByte(b)
		if err := writeZlib(&pack, total < storeBelow, o.data); err != nil {
			return nil, err
		}
	}
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	return pack.Bytes(), nil
}

// Pack object types.
const (
	objCommit = 1
	objTree   = 2
	objBlob   = 3
	objTag    = 4
)

// readLoose reads loose object id from objects; ok is false when it is
// not loose there. Its id is checked against its content.
func readLoose(objects, id string) (typ int, data []byte, ok bool, err error) {
	if !IsObjectID(id) || len(id) != 40 {
		return 0, nil, false, declined("object id %q", id)
	}
	path := filepath.Join(objects, id[:2], id[2:])
	// Only a regular file: a link or a FIFO planted in a clone is git's
	// to deal with.
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil, false, nil
	}
	if err != nil || !fi.Mode().IsRegular() {
		return 0, nil, false, declined("object %s is not a regular file", id)
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, false, declined("read object %s: %v", id, err)
	}
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return 0, nil, false, declined("read object %s: %v", id, err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, maxHTTPPushBytes+64))
	if err != nil {
		return 0, nil, false, declined("read object %s: %v", id, err)
	}
	header, body, found := bytes.Cut(raw, []byte{0})
	name, size, _ := strings.Cut(string(header), " ")
	if n, err := strconv.Atoi(size); !found || err != nil || n != len(body) {
		return 0, nil, false, declined("object %s is malformed", id)
	}
	if sum := sha1.Sum(raw); hex.EncodeToString(sum[:]) != id {
		return 0, nil, false, declined("object %s does not hash to its id", id)
	}
	switch name {
	case "commit":
		typ = objCommit
	case "tree":
		typ = objTree
	case "blob":
		typ = objBlob
	case "tag":
		typ = objTag
	default:
		return 0, nil, false, declined("object %s has type %q", id, name)
	}
	return typ, body, true, nil
}

// commitLinks are a commit's tree and parents.
func commitLinks(data []byte) (tree string, parents []string, err error) {
	headers, _, _ := bytes.Cut(data, []byte("\n\n"))
	for _, line := range strings.Split(string(headers), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "tree":
			tree = v
		case "parent":
			parents = append(parents, v)
		}
	}
	if !IsObjectID(tree) {
		return "", nil, declined("a commit without a tree")
	}
	return tree, parents, nil
}

// treeLinks are the trees and blobs a tree names (not the commits of
// submodules, which live elsewhere).
func treeLinks(data []byte) ([]string, error) {
	var ids []string
	err := treeEntries(data, func(mode, _ string, id [hashLen]byte) error {
		if mode != "160000" {
			ids = append(ids, hex.EncodeToString(id[:]))
		}
		return nil
	})
	return ids, err
}

// treeEntries calls fn with each entry of a tree object, in its order:
// the mode, the name and the id; the first error fn returns ends it.
func treeEntries(data []byte, fn func(mode, name string, id [hashLen]byte) error) error {
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp || len(data) < nul+1+hashLen {
			return declined("a malformed tree")
		}
		mode, name, id := string(data[:sp]), string(data[sp+1:nul]), [hashLen]byte(data[nul+1:nul+1+hashLen])
		data = data[nul+1+hashLen:]
		if err := fn(mode, name, id); err != nil {
			return err
		}
	}
	return nil
}
