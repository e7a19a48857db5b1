package git

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// DefaultTokenEnv is the environment variable that holds an HTTPS token
// for git remotes unless Git.TokenEnv names another.
const DefaultTokenEnv = "FLEETLIFT_GIT_TOKEN"

// UsernameEnv optionally holds the user name sent with the token; the
// default, x-access-token, suits GitHub and Gitea tokens.
const UsernameEnv = "FLEETLIFT_GIT_USERNAME"

// Git runs the git command line with fleetlift's safe configuration. The
// zero value is ready to use.
type Git struct {
	// Binary is the git executable; empty means "git" found on PATH.
	Binary string
	// Env is the environment git starts from; nil means os.Environ().
	// Variables that change what git reads or runs (GIT_DIR, GIT_CONFIG_*,
	// GIT_EXEC_PATH, ...) are dropped from it.
	Env []string
	// TokenEnv names the variable holding an HTTPS token; empty means
	// DefaultTokenEnv.
	TokenEnv string
	// TokenOrigins are the origins (scheme://host[:port], see Origin) the
	// token may be sent to: the operator's forge and campaigns
	// repository, never a host a definition names. The token reaches git
	// only for remotes at one of them; with none, it reaches no remote.
	TokenOrigins []string
	// ScratchDir is where scratch repositories are made (NewScratch),
	// itself made when missing; empty means the system's temporary
	// directory. An agent makes them in its sandbox's protocol
	// directory, which its commands cannot see and the sandbox's removal
	// takes with it, also when the agent was killed before it could
	// remove them.
	ScratchDir string
	// Slots, when set, bounds the commands that talk to a remote over
	// the network (clone, fetch, push, ls-remote; not a local path): each
	// waits for a slot of it first and gives it back when it ends. The
	// worker's bound is the forge account's parallel_clones, shared with
	// every other worker (dispatch.ForgeSlots).
	Slots Slots
}

// Slots bounds how many transfers run at once (see Git.Slots).
type Slots interface {
	// Acquire returns once the caller may start a transfer, with the
	// func that gives the slot back; it fails when ctx ends first.
	Acquire(ctx context.Context) (release func(), err error)
}

// safeConfig is passed with -c to every invocation.
func safeConfig() []string {
	return []string{
		"core.hooksPath=/dev/null",
		"core.fsmonitor=false",
		"protocol.ext.allow=never",
		"protocol.fd.allow=never",
		"submodule.recurse=false",
		"core.symlinks=true",
		// No credential helper but the one scoped to the remote (below).
		"credential.helper=",
		"commit.gpgSign=false",
		"tag.gpgSign=false",
		"core.pager=cat",
		// Neither attributes nor ignore rules from a home directory,
		// which in a sandbox the work may write ($XDG_CONFIG_HOME/git/).
		"core.attributesFile=/dev/null",
		"core.excludesFile=/dev/null",
		"advice.detachedHead=false",
		"init.defaultBranch=main",
		// No reflogs: nobody reads them in a sandbox or a scratch, and
		// each is files and directories to write and remove.
		"core.logAllRefUpdates=false",
		// No housekeeping after a fetch, commit or push: the
		// repositories are clones and scratches that live for one task,
		// and each check is another process or two (measured: 4.5 a
		// repository of a task, a third of the git processes).
		"maintenance.auto=false",
		"gc.auto=0",
	}
}

// keptGitEnv are the GIT_* variables passed through to git: how to reach
// remotes, never what to read or run.
var keptGitEnv = map[string]bool{
	"GIT_SSH":         true,
	"GIT_SSH_COMMAND": true,
	"GIT_SSH_VARIANT": true,
	"GIT_SSL_CAINFO":  true,
	"GIT_SSL_CAPATH":  true,
}

// secretWords mark environment variables whose values are secrets.
var secretWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE_KEY", "CREDENTIAL"}

// SecretName reports whether an environment variable's name says it
// holds a secret (*TOKEN*, *SECRET*, *PASSWORD*, *API_KEY*, ...).
func SecretName(name string) bool {
	up := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(up, w) {
			return true
		}
	}
	return false
}

var tokenEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// TokenVariable is the name of the environment variable holding the
// HTTPS token.
func (g *Git) TokenVariable() string { return g.tokenEnv() }

func (g *Git) tokenEnv() string {
	if g.TokenEnv != "" && tokenEnvName.MatchString(g.TokenEnv) {
		return g.TokenEnv
	}
	return DefaultTokenEnv
}

func (g *Git) baseEnv() []string {
	if g.Env != nil {
		return g.Env
	}
	return os.Environ()
}

func (g *Git) token() string { return g.getenv(g.tokenEnv()) }

// getenv is the value of name in the environment git starts from (the
// last one, when it is there twice), "" when it is not there.
func (g *Git) getenv(name string) string {
	var v string
	for _, kv := range g.baseEnv() {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// invocation is one run of git.
type invocation struct {
	dir  string
	args []string
	// gitDir, when set, is exported as GIT_DIR.
	gitDir string
	stdin  io.Reader
	// stdout, when set, receives the output instead of the returned string.
	stdout io.Writer
	// remote is the URL the command talks to; only such commands see the
	// token.
	remote string
	// config is extra -c key=value.
	config []string
	// env is extra environment.
	env []string
}

func (g *Git) environ(inv invocation) []string {
	tokenEnv := g.tokenEnv()
	base := g.baseEnv()
	env := make([]string, 0, len(base)+12)
	hasSSH := false
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == tokenEnv:
			if !g.tokenAllowed(inv.remote) {
				continue
			}
		case k == UsernameEnv:
		case SecretName(k), strings.HasPrefix(k, "FLEETLIFT_"):
			// No secret but the token, and that only for its remote:
			// git's children (ssh, remote helpers) have environments a
			// process of the same user can read.
			continue
		case strings.HasPrefix(k, "GIT_") && !keptGitEnv[k]:
			continue
		case k == "LC_ALL" || k == "LANGUAGE":
			continue
		}
		if k == "GIT_SSH" || k == "GIT_SSH_COMMAND" {
			hasSSH = true
		}
		env = append(env, kv)
	}
	protocols := "file:https:ssh"
	if inv.remote != "" && isLoopbackHTTP(inv.remote) {
		protocols += ":http"
	}
	env = append(env,
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ALLOW_PROTOCOL="+protocols,
		// Set but empty: no askpass program, not even core.askPass.
		"GIT_ASKPASS=",
		// Objects are what they are: no refs/replace/ left in a
		// repository swaps one for another.
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C",
	)
	if !hasSSH {
		// No ssh configuration: ~/.ssh/config (in a sandbox, a home the
		// work may write) could name a ProxyCommand to run.
		env = append(env, "GIT_SSH_COMMAND=ssh -F /dev/null -o BatchMode=yes")
	}
	if inv.gitDir != "" {
		env = append(env, "GIT_DIR="+inv.gitDir)
	}
	return append(env, inv.env...)
}

// tokenAllowed reports whether the token may go with a command that talks
// to remote: an http(s) URL at one of TokenOrigins.
func (g *Git) tokenAllowed(remote string) bool {
	if remote == "" || !isHTTP(remote) {
		return false
	}
	origin, err := Origin(remote)
	if err != nil {
		return false
	}
	for _, o := range g.TokenOrigins {
		if allowed, err := Origin(o); err == nil && allowed == origin {
			return true
		}
	}
	return false
}

// Origin is the origin of an http(s) URL as the token check compares it:
// the scheme and host in lower case, with the port unless it is the
// scheme's default ("https://Git.Example.com:443/x" is
// "https://git.example.com").
func Origin(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("origin of %s: %w", Redact(raw), err)
	}
	scheme := strings.ToLower(u.Scheme)
	if (scheme != "https" && scheme != "http") || u.Hostname() == "" {
		return "", fmt.Errorf("origin of %s: not an http(s) URL with a host", Redact(raw))
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		return scheme + "://" + host, nil
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// credentialConfig hands the token to git for remote's origin only, when
// that is one of TokenOrigins, so neither a definition's repository
// elsewhere nor a URL rewritten elsewhere (url.*.insteadOf) receives it.
func (g *Git) credentialConfig(remote string) []string {
	if !g.tokenAllowed(remote) || g.token() == "" {
		return nil
	}
	u, err := url.Parse(remote)
	if err != nil || u.Host == "" {
		return nil
	}
	origin := u.Scheme + "://" + u.Host
	helper := fmt.Sprintf(`!f() { test "$1" = get || return 0; echo "username=${%s:-x-access-token}"; echo "password=${%s}"; }; f`,
		UsernameEnv, g.tokenEnv())
	return []string{"credential." + origin + ".helper=" + helper}
}

// Error is a git command that failed.
type Error struct {
	// Command is the git subcommand ("clone", "push").
	Command string
	// ExitCode is git's exit status, or -1 when it did not exit by itself.
	ExitCode int
	// Stderr is the end of git's error output, redacted.
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("git %s: %v", e.Command, e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// exitCode is the exit status of a failed git command, or -1.
func exitCode(err error) int {
	var ge *Error
	if errors.As(err, &ge) {
		return ge.ExitCode
	}
	return -1
}

func (g *Git) binary() string {
	if g.Binary != "" {
		return g.Binary
	}
	return "git"
}

// localPackFlag is the --upload-pack or --receive-pack option of git
// command sub (clone, fetch, ls-remote, push) that talks to the local
// repository at path: the program git runs there, with that repository's
// hooks off and the repository trusted whoever owns it (safe.directory).
// The caller allowed the repository (CheckLocal, --allow-file-root);
// without this, git refuses a repository of another user (a worker's
// repositories that a container's user clones), and runs the repository's
// own hooks, as the user that pushes, whatever -c says to the command
// that started it. Empty for other commands.
func (g *Git) localPackFlag(sub, path string) string {
	var flag, prog string
	switch sub {
	case "clone", "fetch", "ls-remote":
		flag, prog = "--upload-pack", "upload-pack"
	case "push":
		flag, prog = "--receive-pack", "receive-pack"
	default:
		return ""
	}
	dirs := []string{path}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != path {
		dirs = append(dirs, real)
	}
	var b strings.Builder
	// Neither hooks nor housekeeping in a repository it serves or
	// receives into: a push to a local repository runs no gc after it.
	b.WriteString(shellQuote(g.binary()) + " -c core.hooksPath=/dev/null -c receive.autogc=false")
	for _, d := range dirs {
		for _, dir := range []string{d, filepath.Join(d, ".git")} {
			b.WriteString(" -c " + shellQuote("safe.directory="+dir))
		}
	}
	return flag + "=" + b.String() + " " + prog
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// run runs git and returns its standard output, redacted when it talked to
// a remote.
func (g *Git) run(ctx context.Context, inv invocation) (string, error) {
	// Global options (-c, --git-dir, --exec-path) after the safe
	// configuration would override it: the first argument is the command.
	if len(inv.args) == 0 || strings.HasPrefix(inv.args[0], "-") {
		return "", fmt.Errorf("git: the first argument must be a git command, not %q", strings.Join(inv.args, " "))
	}
	args := make([]string, 0, 2*(len(safeConfig())+len(inv.config)+1)+len(inv.args))
	for _, kv := range safeConfig() {
		args = append(args, "-c", kv)
	}
	if inv.remote != "" {
		for _, kv := range g.credentialConfig(inv.remote) {
			args = append(args, "-c", kv)
		}
	}
	for _, kv := range inv.config {
		args = append(args, "-c", kv)
	}
	if p, ok := LocalPath(inv.remote); ok {
		if flag := g.localPackFlag(inv.args[0], p); flag != "" {
			args = append(args, inv.args[0], flag)
			inv.args = inv.args[1:]
		}
	}
	args = append(args, inv.args...)

	if _, local := LocalPath(inv.remote); g.Slots != nil && inv.remote != "" && !local {
		release, err := g.Slots.Acquire(ctx)
		if err != nil {
			return "", fmt.Errorf("git %s: wait for a transfer slot: %w", inv.args[0], err)
		}
		defer release()
	}
	cmd := exec.CommandContext(ctx, g.binary(), args...)
	cmd.Dir = inv.dir
	cmd.Env = g.environ(inv)
	cmd.Stdin = inv.stdin
	var stdout bytes.Buffer
	if inv.stdout != nil {
		cmd.Stdout = inv.stdout
	} else {
		cmd.Stdout = &stdout
	}
	stderr := &tail{max: 4096}
	cmd.Stderr = stderr
	setProcessGroup(cmd)

	sub := ""
	if len(inv.args) > 0 {
		sub = inv.args[0]
	}
	if err := cmd.Run(); err != nil {
		code := -1
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			code = ee.ExitCode()
		}
		if ctx.Err() != nil {
			err = ctx.Err()
			code = -1
		}
		return "", &Error{
			Command:  sub,
			ExitCode: code,
			Stderr:   strings.TrimSpace(g.redact(stderr.String())),
			Err:      err,
		}
	}
	out := stdout.String()
	if inv.remote != "" {
		out = g.redact(out)
	}
	return out, nil
}

// Run runs a git subcommand in dir with the safe configuration and returns
// its standard output. It never sees the token: use Clone, Push, LsRemote
// or a Scratch for commands that talk to a remote.
func (g *Git) Run(ctx context.Context, dir string, args ...string) (string, error) {
	return g.run(ctx, invocation{dir: dir, args: args})
}

// RunInput is Run with stdin.
func (g *Git) RunInput(ctx context.Context, dir string, stdin io.Reader, args ...string) (string, error) {
	return g.run(ctx, invocation{dir: dir, args: args, stdin: stdin})
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.buf) }
