package giteatest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/listen"
)

const (
	// pinnedVersion is the Gitea version internal/forge/giteatest/gitea pins, used to find
	// Gitea's source in the module cache when bin/gitea.version does not
	// say.
	pinnedVersion = "v1.26.0"
	modulePath    = "github.com/fleetlift/fleetlift"
	adminName     = "fleetlift-admin"
	// startTimeout bounds the wait for /api/v1/version to answer.
	startTimeout = 60 * time.Second
)

// Server is a running Gitea. Its methods that take a testing.TB fail that
// test on any error.
type Server struct {
	bin      string
	dir      string
	config   string
	url      string
	admin    User
	client   *http.Client
	maxItems int
	host     string
	tls      *TLS

	// ready and adminAfter are how long Gitea took to answer, and to
	// have its administrator.
	ready, adminAfter time.Duration

	cmd  *exec.Cmd
	done chan struct{} // closed when the gitea process has exited
}

// User is a Gitea account with a password and an access token of scope
// "all".
type User struct {
	Name     string
	Password string
	Token    string
}

// Start runs a fresh Gitea for the test and stops it when the test ends.
// It fails the test when bin/gitea is missing or Gitea does not come up.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch(Options{Dir: t.TempDir()})
	if s != nil {
		t.Cleanup(func() {
			s.Close()
			if t.Failed() {
				s.dumpLogs(t)
			}
		})
	}
	if err != nil {
		t.Fatalf("giteatest: %v", err)
	}
	t.Logf("giteatest: gitea at %s ready in %s, admin after %s", s.url, s.ready.Round(time.Millisecond), s.adminAfter.Round(time.Millisecond))
	return s
}

// Options configure Launch.
type Options struct {
	// Dir holds Gitea's configuration, database, repositories and logs.
	// Required; Launch fills it and leaves it for its caller to remove.
	Dir string
	// MaxResponseItems is Gitea's [api] MAX_RESPONSE_ITEMS, the largest
	// page a listing answers with; 0 keeps Gitea's default, 50.
	MaxResponseItems int
	// Host is the address Gitea serves on, 127.0.0.1 when empty: a
	// real node's Node.HostIP, say, for pods to clone from and for a
	// worker in a pod to open pull requests on.
	Host string
	// TLS, when set, makes Gitea serve HTTPS with a certificate for
	// Host: fleetlift sends tokens over plain HTTP to loopback alone.
	TLS *TLS
}

// TLS is Gitea's serving certificate and key, and the CA that issued
// them, as PEM files; the Server's own requests and GitEnv trust CA.
type TLS struct {
	CertFile, KeyFile, CAFile string
}

// Launch runs a fresh Gitea in opts.Dir with a site administrator, as
// Start does for a test, for programs such as the benchmarks; Close stops
// it. On an error after Gitea started, the returned Server is not nil:
// Close it (its logs are in opts.Dir/log).
func Launch(opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("launch gitea: Options.Dir is required")
	}
	bin, err := binary()
	if err != nil {
		return nil, err
	}
	static, err := staticRoot(bin)
	if err != nil {
		return nil, err
	}
	s := &Server{
		bin:      bin,
		dir:      opts.Dir,
		maxItems: opts.MaxResponseItems,
		host:     cmp.Or(opts.Host, "127.0.0.1"),
		tls:      opts.TLS,
		client:   &http.Client{Timeout: 30 * time.Second},
	}
	if opts.TLS != nil {
		ca, err := os.ReadFile(opts.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("launch gitea: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("launch gitea: no certificate in %s", opts.TLS.CAFile)
		}
		s.client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	}
	s.config = filepath.Join(s.dir, "app.ini")

	began := time.Now()
	for attempt := 1; ; attempt++ {
		err = s.start(static)
		if err == nil {
			break
		}
		// The free port can be taken between choosing and binding it.
		if attempt < 3 && s.lostPortRace() {
			continue
		}
		return s, fmt.Errorf("start gitea: %w", err)
	}
	s.ready = time.Since(began)

	out, err := s.gitea("admin", "user", "create",
		"--admin", "--username", adminName, "--password", password(),
		"--email", adminName+"@example.com", "--must-change-password=false",
		"--access-token", "--access-token-name", "giteatest", "--access-token-scopes", "all")
	if err != nil {
		return s, fmt.Errorf("create admin user: %v\n%s", err, out)
	}
	const marker = "Access token was successfully created... "
	_, token, ok := strings.Cut(string(out), marker)
	if !ok {
		return s, errors.New("create admin user: no access token in its output")
	}
	s.admin = User{Name: adminName, Token: strings.TrimSpace(token)}
	s.adminAfter = time.Since(began)
	return s, nil
}

// Close stops Gitea and everything it started, and waits for them.
func (s *Server) Close() { s.stop() }

// Pid is the process id of the gitea process, 0 once stopped.
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// URL is the root URL, with a trailing slash: http://127.0.0.1:PORT/
// (https:// with Options.TLS, Options.Host for 127.0.0.1 when set).
func (s *Server) URL() string { return s.url }

// APIURL is the base of the REST API, with a trailing slash, as go-github's
// BaseURL wants it: http://127.0.0.1:PORT/api/v1/.
func (s *Server) APIURL() string { return s.url + "api/v1/" }

// Admin is the site administrator Start created. It has no password.
func (s *Server) Admin() User { return s.admin }

// AdminToken is the access token of the site administrator.
func (s *Server) AdminToken() string { return s.admin.Token }

// CloneURL is the HTTP clone URL of owner/repo, without credentials.
func (s *Server) CloneURL(owner, repo string) string {
	return s.url + url.PathEscape(owner) + "/" + url.PathEscape(repo) + ".git"
}

// CreateUser creates an active user that need not change its password,
// with the email name@example.com and an access token of scope "all".
func (s *Server) CreateUser(t testing.TB, name string) User {
	t.Helper()
	u := User{Name: name, Password: password()}
	mustChange := false
	s.Do(t, s.admin.Token, http.MethodPost, "admin/users", map[string]any{
		"username":             name,
		"email":                name + "@example.com",
		"password":             u.Password,
		"must_change_password": &mustChange,
	}, nil)

	// Tokens are created with the user's own password (basic auth).
	var tok struct {
		SHA1 string `json:"sha1"`
	}
	body, err := json.Marshal(map[string]any{"name": "giteatest", "scopes": []string{"all"}})
	if err != nil {
		t.Fatalf("giteatest: %v", err)
	}
	status, resp, err := s.request(http.MethodPost, "users/"+url.PathEscape(name)+"/tokens", body, func(r *http.Request) {
		r.SetBasicAuth(u.Name, u.Password)
	})
	if err != nil {
		t.Fatalf("giteatest: create token for %s: %v", name, err)
	}
	if status != http.StatusCreated {
		t.Fatalf("giteatest: create token for %s: %d %s", name, status, resp)
	}
	if err := json.Unmarshal(resp, &tok); err != nil || tok.SHA1 == "" {
		t.Fatalf("giteatest: create token for %s: unexpected answer %s", name, resp)
	}
	u.Token = tok.SHA1
	return u
}

// CreateOrg creates a public organisation owned by the administrator.
func (s *Server) CreateOrg(t testing.TB, name string) {
	t.Helper()
	s.Do(t, s.admin.Token, http.MethodPost, "orgs", map[string]any{
		"username":   name,
		"visibility": "public",
	}, nil)
}

// CreateTeam creates team in org with permission ("read", "write" or
// "admin") on code, pull requests and issues of all the org's
// repositories, and returns its ID.
func (s *Server) CreateTeam(t testing.TB, org, team, permission string) int64 {
	t.Helper()
	var out struct {
		ID int64 `json:"id"`
	}
	s.Do(t, s.admin.Token, http.MethodPost, "orgs/"+url.PathEscape(org)+"/teams", map[string]any{
		"name":                      team,
		"permission":                permission,
		"includes_all_repositories": true,
		"units":                     []string{"repo.code", "repo.pulls", "repo.issues"},
	}, &out)
	return out.ID
}

// AddTeamMember adds user to the team of org named team.
func (s *Server) AddTeamMember(t testing.TB, org, team, user string) {
	t.Helper()
	var teams []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	s.Do(t, s.admin.Token, http.MethodGet, "orgs/"+url.PathEscape(org)+"/teams?limit=50", nil, &teams)
	for _, tm := range teams {
		if tm.Name == team {
			s.Do(t, s.admin.Token, http.MethodPut,
				"teams/"+strconv.FormatInt(tm.ID, 10)+"/members/"+url.PathEscape(user), nil, nil)
			return
		}
	}
	t.Fatalf("giteatest: add %s to team %s/%s: no such team", user, org, team)
}

// CreateRepo creates the public repository owner/name, owned by a user or
// an organisation, with default branch main, and returns its clone URL.
// With autoInit the repository starts with a commit holding a README.
func (s *Server) CreateRepo(t testing.TB, owner, name string, autoInit bool) string {
	t.Helper()
	var out struct {
		CloneURL string `json:"clone_url"`
	}
	s.Do(t, s.admin.Token, http.MethodPost, "admin/users/"+url.PathEscape(owner)+"/repos", map[string]any{
		"name":           name,
		"auto_init":      autoInit,
		"default_branch": "main",
		"readme":         "Default",
	}, &out)
	return out.CloneURL
}

// AddCollaborator gives user permission ("read", "write" or "admin") on
// owner/repo.
func (s *Server) AddCollaborator(t testing.TB, owner, repo, user, permission string) {
	t.Helper()
	s.Do(t, s.admin.Token, http.MethodPut,
		"repos/"+url.PathEscape(owner)+"/"+url.PathEscape(repo)+"/collaborators/"+url.PathEscape(user),
		map[string]any{"permission": permission}, nil)
}

// Do calls the API at path (relative to APIURL, e.g. "repos/o/r/pulls")
// with token, sending in as JSON unless it is nil and decoding the answer
// into out unless it is nil. It fails the test on an answer other than
// 2xx.
func (s *Server) Do(t testing.TB, token, method, path string, in, out any) {
	t.Helper()
	if err := s.Call(token, method, path, in, out); err != nil {
		t.Fatalf("giteatest: %v", err)
	}
}

// Call is Do for programs: it returns what Do fails the test with.
func (s *Server) Call(token, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	auth := func(r *http.Request) {
		if token != "" {
			r.Header.Set("Authorization", "token "+token)
		}
	}
	status, resp, err := s.request(method, path, body, auth)
	// Gitea on SQLite can hold a GET of a pull request it has just
	// merged without ever answering, while the same GET asked again is
	// answered: a read that timed out is asked again, twice at most.
	for try := 0; try < readRetries && method == http.MethodGet && isTimeout(err); try++ {
		status, resp, err = s.request(method, path, body, auth)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status/100 != 2 {
		return fmt.Errorf("%s %s: %d %s", method, path, status, bytes.TrimSpace(resp))
	}
	if out != nil {
		if err := json.Unmarshal(resp, out); err != nil {
			return fmt.Errorf("%s %s: decode %s: %w", method, path, resp, err)
		}
	}
	return nil
}

// readRetries is how many times Call asks again a GET that timed out.
const readRetries = 2

// isTimeout reports whether err is a request that timed out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// GitEnv is the environment for a git command that talks to this server
// as u: the current environment plus u's token as an http.extraHeader in
// GIT_CONFIG_* variables (so it is in no URL, argument or file), no
// prompts, and u as author and committer.
func (s *Server) GitEnv(u User) []string {
	env := make([]string, 0, len(os.Environ())+12)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_CONFIG_") {
			env = append(env, kv)
		}
	}
	if s.tls != nil {
		env = append(env, "GIT_SSL_CAINFO="+s.tls.CAFile)
	}
	return append(env,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_COUNT=2",
		"GIT_CONFIG_KEY_0=http.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: token "+u.Token,
		"GIT_CONFIG_KEY_1=init.defaultBranch",
		"GIT_CONFIG_VALUE_1=main",
		"GIT_AUTHOR_NAME="+u.Name,
		"GIT_AUTHOR_EMAIL="+u.Name+"@example.com",
		"GIT_COMMITTER_NAME="+u.Name,
		"GIT_COMMITTER_EMAIL="+u.Name+"@example.com",
	)
}

// Git runs git with args in dir as u (see GitEnv) and returns its
// combined output. It fails the test if git fails.
func (s *Server) Git(t testing.TB, u User, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = s.GitEnv(u)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("giteatest: git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// request sends body (JSON, if any) to the API and returns the status and
// the answer's body.
func (s *Server) request(method, path string, body []byte, auth func(*http.Request)) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.APIURL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	auth(req)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// start writes the configuration for a free port, starts gitea web and
// waits until its API answers.
func (s *Server) start(static string) error {
	port, err := pickPort(s.host)
	if err != nil {
		return err
	}
	scheme := "http"
	if s.tls != nil {
		scheme = "https"
	}
	s.url = fmt.Sprintf("%s://%s/", scheme, net.JoinHostPort(s.host, strconv.Itoa(port)))
	if err := os.MkdirAll(filepath.Join(s.dir, "log"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(s.config, []byte(config(s.dir, static, s.host, port, s.maxItems, s.tls)), 0o600); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(s.dir, "log", "console.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close() // the child has its own copy

	cmd := exec.Command(s.bin, "web", "--config", s.config, "--work-path", s.dir)
	cmd.Dir = s.dir
	cmd.Env = s.env()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.done)

	deadline := time.Now().Add(startTimeout)
	for {
		if s.answers() {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("gitea exited during start: %v", cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return fmt.Errorf("gitea did not answer %sapi/v1/version within %s", s.url, startTimeout)
		}
	}
}

func (s *Server) answers() bool {
	resp, err := s.client.Get(s.APIURL() + "version")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// lostPortRace reports whether the last start failed because the port was
// taken.
func (s *Server) lostPortRace() bool {
	for _, name := range []string{"console.log", "gitea.log"} {
		b, _ := os.ReadFile(filepath.Join(s.dir, "log", name))
		if bytes.Contains(b, []byte("address already in use")) {
			return true
		}
	}
	return false
}

// stop kills gitea and everything it started, and waits for it.
func (s *Server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
	default:
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// gitea runs a gitea subcommand against this server's configuration.
func (s *Server) gitea(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args = append([]string{"--config", s.config, "--work-path", s.dir}, args...)
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Dir = s.dir
	cmd.Env = s.env()
	return cmd.CombinedOutput()
}

func (s *Server) env() []string {
	env := make([]string, 0, len(os.Environ())+2)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GITEA_") && !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GITEA_WORK_DIR="+s.dir, "HOME="+filepath.Join(s.dir, "home"))
}

// dumpLogs appends Gitea's logs to the test log.
func (s *Server) dumpLogs(t testing.TB) {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(s.dir, "log", "*.log"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			continue
		}
		const limit = 64 << 10
		if len(b) > limit {
			b = append([]byte("...\n"), b[len(b)-limit:]...)
		}
		t.Logf("giteatest: %s:\n%s", filepath.Base(p), b)
	}
}

// binary finds the gitea binary: $FLEETLIFT_GITEA_BINARY, or bin/gitea in
// the module root above the working directory.
func binary() (string, error) {
	if p := os.Getenv("FLEETLIFT_GITEA_BINARY"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("FLEETLIFT_GITEA_BINARY: %w", err)
		}
		return p, nil
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "gitea")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no gitea binary at %s: run `make bin/gitea` in %s (about 6 minutes the first time), or set FLEETLIFT_GITEA_BINARY", p, root)
	}
	return p, nil
}

// moduleRoot walks up from the working directory to the go.mod of
// modulePath.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if strings.TrimSpace(sc.Text()) == "module "+modulePath {
					f.Close()
					return dir, nil
				}
			}
			f.Close()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory: set FLEETLIFT_GITEA_BINARY", modulePath)
		}
		dir = parent
	}
}

// staticRoot finds Gitea's source tree (templates, options, public), which
// a binary built without the bindata tag reads at run time:
// $FLEETLIFT_GITEA_STATIC_ROOT, or the module cache at the version
// bin/gitea.version records.
func staticRoot(bin string) (string, error) {
	if p := os.Getenv("FLEETLIFT_GITEA_STATIC_ROOT"); p != "" {
		return p, nil
	}
	version := pinnedVersion
	if b, err := os.ReadFile(bin + ".version"); err == nil {
		// "code.gitea.io/gitea@v1.26.0 tags=..."
		f := strings.Fields(string(b))
		if len(f) > 0 {
			if _, v, ok := strings.Cut(f[0], "@"); ok {
				version = v
			}
		}
	}
	cache := os.Getenv("GOMODCACHE")
	if cache == "" {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			return "", fmt.Errorf("find the module cache for gitea's templates: go env GOMODCACHE: %w (set FLEETLIFT_GITEA_STATIC_ROOT)", err)
		}
		cache = strings.TrimSpace(string(out))
	}
	dir := filepath.Join(cache, "code.gitea.io", "gitea@"+version)
	if _, err := os.Stat(filepath.Join(dir, "templates")); err != nil {
		return "", fmt.Errorf("gitea's templates are not in the module cache at %s: run `make bin/gitea`, which downloads them, or set FLEETLIFT_GITEA_STATIC_ROOT", dir)
	}
	return dir, nil
}

// pickPort is the port each start of Gitea tries: a free one (a test
// hands it a taken one to check that Launch tries again).
var pickPort = freePort

// freePort is a port of host no one listens on now.
func freePort(host string) (int, error) {
	ports, err := listen.FreePorts(host, 1)
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return ports[0], nil
}

// password returns a random password that meets Gitea's default rules.
func password() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "Pw1-" + hex.EncodeToString(b)
}

func runUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// config is Gitea's app.ini: SQLite, everything under dir, loopback only,
// no mail, SSH, LFS, actions, indexers or outbound calls, webhooks allowed
// to loopback and sent at once.
func config(dir, static, host string, port, maxItems int, t *TLS) string {
	api := ""
	protocol, scheme := "PROTOCOL = http", "http"
	if t != nil {
		protocol = fmt.Sprintf("PROTOCOL = https\nCERT_FILE = %s\nKEY_FILE = %s", t.CertFile, t.KeyFile)
		scheme = "https"
	}
	if maxItems > 0 {
		api = fmt.Sprintf("\n[api]\nMAX_RESPONSE_ITEMS = %d\n", maxItems)
	}
	root := ""
	if os.Getuid() == 0 {
		// Gitea refuses to run as root without this; CI runs as root.
		root = "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT = true\n"
	}
	return fmt.Sprintf(`APP_NAME = fleetlift giteatest
RUN_MODE = prod
RUN_USER = %[1]s
WORK_PATH = %[2]s
%[5]s
[server]
%[8]s
HTTP_ADDR = %[7]s
HTTP_PORT = %[3]d
DOMAIN = %[7]s
ROOT_URL = %[9]s://%[7]s:%[3]d/
LOCAL_ROOT_URL = %[9]s://%[7]s:%[3]d/
STATIC_ROOT_PATH = %[4]s
APP_DATA_PATH = %[2]s/data
OFFLINE_MODE = true
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false
LFS_JWT_SECRET = Tv_MjmZuHqpIY6GFl12ebgkRAMt4RlWt0v4EHKSXO0w

[database]
DB_TYPE = sqlite3
PATH = %[2]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[2]s/repositories
DEFAULT_BRANCH = main

[repository.signing]
SIGNING_KEY = none

[security]
INSTALL_LOCK = true
SECRET_KEY = giteatest-not-a-secret
INTERNAL_TOKEN = eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJuYmYiOjE0OTI3OTU5ODN9.OQkH5UmzID2XBdwQ9TAI6Jj2t1X-wElVTjbE7aoN4I8

[oauth2]
JWT_SECRET = KZb_QLUd4fYVyxetjxC4eZkrBgWM2SndOOWDNtgUUko

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
REGISTER_EMAIL_CONFIRM = false
ENABLE_NOTIFY_MAIL = false
DEFAULT_KEEP_EMAIL_PRIVATE = false
DEFAULT_ALLOW_CREATE_ORGANIZATION = true
NO_REPLY_ADDRESS = noreply.example.org

[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 10

[queue]
TYPE = immediate

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[mailer]
ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[actions]
ENABLED = false

[packages]
ENABLED = false

[picture]
DISABLE_GRAVATAR = true
ENABLE_FEDERATED_AVATAR = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = file
LEVEL = Info
ROOT_PATH = %[2]s/log
%[6]s`, runUser(), dir, port, static, root, api, host, protocol, scheme)
}
