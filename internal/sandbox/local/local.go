package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

var _ sandbox.Provider = (*Provider)(nil)

// Options configure a Provider.
type Options struct {
	// Root holds one directory per sandbox: Root/<id>/workspace,
	// Root/<id>/home, Root/<id>/sandbox.json and, unless Stdout and Stderr
	// are set, Root/<id>/agent.log. Required. One worker at a time may use
	// a Root.
	Root string
	// AgentCommand is the agent's argv; the provider appends
	// "serve --workspace <workspace>". A bare name is looked up in Path.
	// Required.
	AgentCommand []string
	// Path is PATH inside sandboxes; empty means the worker's PATH.
	Path string
	// Stdout and Stderr receive the agent's output; nil means
	// Root/<id>/agent.log, which Cleanup removes. A writer that is not an
	// *os.File is fed through a pipe that ends with this Provider: an agent
	// that outlives a restarted worker then loses that output, so prefer
	// files or the default when workers may restart.
	Stdout io.Writer
	Stderr io.Writer
	// StopGrace is how long Cleanup and the sandbox timeout wait after
	// SIGTERM before sending SIGKILL; zero means 10s.
	StopGrace time.Duration
	// AgentGOMAXPROCS, when above 0, is the GOMAXPROCS the agent starts
	// with. Its commands run with the sandbox environment's own, which
	// the agent finds in protocol.EnvCommandGOMAXPROCS: a Go program
	// that lowers its GOMAXPROCS after it started throws away the
	// memory the processors it drops had cached (about 90 page faults
	// for the agent).
	AgentGOMAXPROCS int
	// ServeArgs follow "serve --workspace <workspace>" on the agent's
	// command line: fleetlift-agent's --hide and --isolation.
	ServeArgs []string
	// CommandsEndWithAgent says the agent ends whatever it runs before it
	// exits: fleetlift-agent jailing the work (its default isolation,
	// package jail), each command in a PID namespace the kernel empties
	// when the jail ends, and each jail ending with the agent. Cleanup
	// then looks for no other process of a sandbox whose agent this
	// Provider started and saw exit by itself: no read of every process's
	// environment on the machine, as for a sandbox whose agent was killed,
	// that an earlier Provider started, or in which Exec ran a process.
	CommandsEndWithAgent bool
	// OrphanAfter, when positive, makes every sandbox end itself once no
	// Provider on its Root has watched it for that long: the Provider
	// touches Root/<id>/lease while it runs, and passes the agent
	// "--lease <that file> --orphan-after <OrphanAfter>". A worker that
	// comes back in time finds its sandboxes still running.
	OrphanAfter time.Duration
	// ReuseAgents lets an agent that finished a sandbox serve a sandbox
	// provisioned after it with the same environment, rather than exit
	// and leave the next one to a new agent: a short unit of work then
	// costs no start and exit of an agent. It needs CommandsEndWithAgent
	// (the agent's commands jailed, so that no process of the finished
	// sandbox is left when the agent says it is idle) and an agent that
	// speaks fleetlift-agent's --next-fd (protocol.Next). Cleanup hands
	// on only an agent that said it is idle and a sandbox in which Exec
	// started nothing; an agent nobody takes within agentIdleFor exits,
	// as every idle one does when its Provider closes or its worker dies.
	ReuseAgents bool
	// Egress, when set, is served on the Unix socket Root/.egress.sock
	// (a name no sandbox id takes) while the Provider is open, and every
	// agent is told of it (fleetlift-agent's --egress-socket): the egress
	// proxy (package egress) through which the sandboxes' jailed commands
	// reach the network, and the only way they do.
	Egress http.Handler
	// Gateway, when set, is the gateway the sandboxes' agents clone
	// their task's repositories through and their agent CLIs reach their
	// model through: served on Root/.gateway.sock while the Provider is
	// open (fleetlift-agent's --gateway), with a key of each sandbox's own
	// in its protocol directory (protocol.GatewayKeyFile), its budget the
	// limits.max_tokens of the manifest there, and what it used written
	// beside it (protocol.UsageFile). Neither the API key nor the forge's
	// token enters a sandbox.
	Gateway *gateway.Gateway
}

// gatewaySocket is the name of Options.Gateway's socket under Root.
const gatewaySocket = ".gateway.sock"

// egressSocket is the name of Options.Egress's socket under Root.
const egressSocket = ".egress.sock"

// Provider runs sandboxes as local processes. Create it with New; it is
// safe for concurrent use.
type Provider struct {
	root   string
	agent  []string // agent[0] resolved to an absolute path
	path   string
	stdout io.Writer
	stderr io.Writer
	grace  time.Duration
	serve  []string
	orphan time.Duration
	procs  int // Options.AgentGOMAXPROCS
	// ends is Options.CommandsEndWithAgent.
	ends bool
	// reuse is Options.ReuseAgents.
	reuse bool
	// egress serves Options.Egress, nil without it.
	egress *http.Server
	// gatewaySrv serves Options.Gateway; gwKeys hands the sandboxes
	// their keys to it (nil without one).
	gatewaySrv *http.Server
	gwKeys     *gateway.Keys
	// stopLeases ends the touching of leases (Close).
	stopLeases chan struct{}
	closeOnce  sync.Once

	mu    sync.Mutex
	boxes map[string]*box
	locks map[string]*idLock
	// idle are the agents that finished a sandbox and wait for another
	// (ReuseAgents), in the order they became idle.
	idle []*agentProc
}

// box is what this Provider knows about one sandbox beyond its record on
// disk.
type box struct {
	id        string
	dir       string
	workspace string
	home      string

	// pid is the agent's process id (and process group), zero when
	// unknown; startTicks tells it from a later process with the same id.
	pid        int
	startTicks uint64
	// proc is the agent this Provider started (or handed the sandbox);
	// nil when another (earlier) Provider started it.
	proc *agentProc
	// execd says Exec started a process in the sandbox.
	execd atomic.Bool

	stateMu sync.Mutex // serialises read-modify-write of sandbox.json
	// cache is the record as last read by find.
	cache recordCache

	timer *time.Timer // guarded by Provider.mu
}

// idLock serialises lifecycle changes of one sandbox: Provision, Cleanup
// and the timeout hold it exclusively; Exec holds it shared while starting
// a process so that Cleanup cannot miss that process.
type idLock struct {
	mu   sync.RWMutex
	refs int
}

const (
	recordFile   = "sandbox.json"
	agentLogFile = "agent.log"
	workspaceDir = "workspace"
	homeDir      = "home"
	execDirName  = "exec"

	defaultGrace = 10 * time.Second
	// killWait bounds the wait for processes to vanish after SIGKILL.
	killWait = 5 * time.Second
	// pipeDelay bounds how long a finished process's pipes are drained
	// when a process it started still holds them.
	pipeDelay = time.Second
)

// New returns a Provider keeping its sandboxes under opts.Root. It finds
// the sandboxes an earlier Provider left there and re-arms their timeouts.
func New(opts Options) (*Provider, error) {
	if opts.Root == "" {
		return nil, errors.New("new local sandbox provider: Root is required")
	}
	if len(opts.AgentCommand) == 0 || opts.AgentCommand[0] == "" {
		return nil, errors.New("new local sandbox provider: AgentCommand is required")
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("new local sandbox provider: root %s: %w", opts.Root, err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("new local sandbox provider: %w", err)
	}
	// Physical paths, so that what the provider reports as a sandbox's
	// WorkingDir is what processes inside see from getcwd.
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("new local sandbox provider: %w", err)
	}
	spreadSandboxes(root)
	path := opts.Path
	if path == "" {
		path = os.Getenv("PATH")
	}
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	agent := append([]string(nil), opts.AgentCommand...)
	bin, err := lookPath(agent[0], path)
	if err != nil {
		return nil, fmt.Errorf("new local sandbox provider: agent command: %w", err)
	}
	if !filepath.IsAbs(bin) {
		if bin, err = filepath.Abs(bin); err != nil {
			return nil, fmt.Errorf("new local sandbox provider: agent command: %w", err)
		}
	}
	agent[0] = bin
	if opts.ReuseAgents && !opts.CommandsEndWithAgent {
		return nil, errors.New("new local sandbox provider: ReuseAgents needs CommandsEndWithAgent: an agent hands on only a sandbox its work left no process in")
	}
	if opts.ReuseAgents && (opts.Stdout == nil) != (opts.Stderr == nil) {
		return nil, errors.New("new local sandbox provider: ReuseAgents needs both Stdout and Stderr, or neither (each sandbox's log)")
	}
	grace := opts.StopGrace
	if grace <= 0 {
		grace = defaultGrace
	}
	p := &Provider{
		root:       root,
		agent:      agent,
		path:       path,
		stdout:     opts.Stdout,
		stderr:     opts.Stderr,
		grace:      grace,
		serve:      append([]string(nil), opts.ServeArgs...),
		orphan:     opts.OrphanAfter,
		procs:      opts.AgentGOMAXPROCS,
		ends:       opts.CommandsEndWithAgent,
		reuse:      opts.ReuseAgents,
		stopLeases: make(chan struct{}),
		boxes:      map[string]*box{},
		locks:      map[string]*idLock{},
	}
	if opts.Egress != nil {
		srv, err := p.serveSocket(egressSocket, opts.Egress, "--egress-socket")
		if err != nil {
			return nil, fmt.Errorf("new local sandbox provider: egress proxy: %w", err)
		}
		p.egress = srv
	}
	if opts.Gateway != nil {
		srv, err := p.serveSocket(gatewaySocket, opts.Gateway, "--gateway")
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("new local sandbox provider: model gateway: %w", err)
		}
		p.gatewaySrv, p.gwKeys = srv, p.gatewayKeys(opts.Gateway)
		for _, api := range opts.Gateway.APIs() {
			p.serve = append(p.serve, "--gateway-api", api)
		}
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("new local sandbox provider: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && checkID(e.Name()) == nil {
			// A directory without a readable record is a Provision that
			// never finished; Provision or Cleanup of its id clears it.
			if b, _, err := p.find(e.Name()); err == nil {
				// A sandbox an earlier Provider made calls the
				// gateway with the key it was given, if it has one.
				p.gwKeys.Adopt(context.Background(), b.id)
			}
		}
	}
	if p.orphan > 0 {
		p.touchLeases()
		go p.keepLeases()
	}
	return p, nil
}

// leaseFile is the file whose age tells a sandbox's agent whether a worker
// still watches it (Options.OrphanAfter).
const leaseFile = "lease"

// keepLeases touches the lease of every sandbox this Provider knows, often
// enough that none looks orphaned while it runs, until Close.
func (p *Provider) keepLeases() {
	t := time.NewTicker(min(p.orphan/4, 30*time.Second))
	defer t.Stop()
	for {
		select {
		case <-p.stopLeases:
			return
		case <-t.C:
			p.touchLeases()
		}
	}
}

func (p *Provider) touchLeases() {
	p.mu.Lock()
	dirs := make([]string, 0, len(p.boxes))
	for _, b := range p.boxes {
		dirs = append(dirs, b.dir)
	}
	p.mu.Unlock()
	now := time.Now()
	for _, d := range dirs {
		// A sandbox removed meanwhile has no lease to touch.
		_ = os.Chtimes(filepath.Join(d, leaseFile), now, now)
	}
}

// Close stops what this Provider does in the background (touching the
// sandboxes' leases): its sandboxes then end themselves after
// Options.OrphanAfter unless another Provider on the same Root takes them
// over. The sandboxes keep running until then; the idle agents
// (ReuseAgents) exit at once.
func (p *Provider) Close() error {
	p.closeOnce.Do(func() { close(p.stopLeases) })
	p.closeIdle()
	for _, srv := range []*http.Server{p.egress, p.gatewaySrv} {
		if srv != nil {
			srv.Close()
		}
	}
	return nil
}

// serveSocket serves h on the Unix socket name under Root, replacing one
// an earlier Provider left, and tells every agent of it with flag.
func (p *Provider) serveSocket(name string, h http.Handler, flag string) (*http.Server, error) {
	sock := filepath.Join(p.root, name)
	srv, err := sandbox.ServeUnix(sock, h, 0o600)
	if err != nil {
		return nil, err
	}
	p.serve = append(p.serve, flag, sock)
	return srv, nil
}

// gatewayKeys hands the sandboxes their keys to gw, in their protocol
// directories on this host.
func (p *Provider) gatewayKeys(gw *gateway.Gateway) *gateway.Keys {
	pdir := func(id string) string { return filepath.Join(p.newBox(id).workspace, protocol.Dir) }
	return &gateway.Keys{
		Gateway: gw,
		Read: func(_ context.Context, id, name string) ([]byte, error) {
			return os.ReadFile(filepath.Join(pdir(id), name))
		},
		Write: func(_ context.Context, id, name string, data []byte) error {
			if err := os.MkdirAll(pdir(id), 0o755); err != nil {
				return err
			}
			return writeFileAtomic(filepath.Join(pdir(id), name), data)
		},
	}
}

// Name returns "local".
func (p *Provider) Name() string { return "local" }

// Sandboxes are the ids of the sandboxes the provider holds, those an
// earlier provider on the same root made and it took over among them.
func (p *Provider) Sandboxes() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.boxes))
}

// Provision creates Root/<id>/ and starts the agent there, or returns the
// sandbox already provisioned under opts.ID, also one an earlier Provider on
// the same Root started. It does not restart an agent that has exited: the
// sandbox then reports failed or succeeded until Cleanup.
//
// The agent runs with the environment opts.Env plus PATH (Options.Path,
// unless opts.Env sets it), HOME=Root/<id>/home and opts.Secrets; neither
// may set HOME. The record on disk holds opts.Env, never opts.Secrets.
// Image, Resources, Labels and the Kubernetes fields are ignored; the
// sandbox lists opts.SecretRefs' variables as IgnoredSecretRefs.
func (p *Provider) Provision(ctx context.Context, opts sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	sb, err := p.provision(ctx, opts)
	return sandbox.Ignoring(sb, opts), err
}

func (p *Provider) provision(ctx context.Context, opts sandbox.ProvisionOptions) (*sandbox.Sandbox, error) {
	id := opts.ID
	if err := checkID(id); err != nil {
		return nil, sandbox.Refused(err)
	}
	if err := checkEnv(opts.Env); err != nil {
		return nil, sandbox.Refused(err)
	}
	if err := checkEnv(opts.Secrets); err != nil {
		return nil, sandbox.Refused(fmt.Errorf("secrets: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	unlock := p.lock(id)
	defer unlock()

	b, rec, err := p.find(id)
	if err == nil {
		return p.sandboxOf(b, rec), nil
	}
	if !errors.Is(err, sandbox.ErrNotFound) {
		return nil, err
	}

	b = p.newBox(id)
	// A directory without a record is left from a Provision that never
	// finished: stop whatever it started and start over.
	if _, err := os.Lstat(b.dir); err == nil {
		if err := p.stop(context.WithoutCancel(ctx), b); err != nil {
			return nil, fmt.Errorf("clear unfinished sandbox: %w", err)
		}
		if err := removeAll(b.dir); err != nil {
			return nil, fmt.Errorf("clear unfinished sandbox: %w", err)
		}
	}
	if err := os.Mkdir(b.dir, 0o700); err != nil {
		return nil, err
	}
	rec, err = p.start(b, opts)
	if err != nil {
		// Nothing started survives a failed start; clear the directory.
		_ = removeAll(b.dir)
		return nil, err
	}

	p.mu.Lock()
	p.boxes[id] = b
	p.armTimer(b, rec)
	p.mu.Unlock()
	return p.sandboxOf(b, rec), nil
}

// start creates the sandbox's directories, starts the agent (or hands
// the sandbox to an idle one, ReuseAgents) and writes the record. On
// error the agent, if it started, has been stopped.
func (p *Provider) start(b *box, opts sandbox.ProvisionOptions) (*record, error) {
	for _, d := range []string{b.workspace, b.home} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	if err := p.gwKeys.Open(context.Background(), b.id); err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	env := map[string]string{"PATH": p.path}
	for k, v := range opts.Env {
		env[k] = v
	}
	env["HOME"] = b.home
	procEnv := map[string]string{}
	for k, v := range opts.Secrets {
		procEnv[k] = v
	}
	for k, v := range env {
		procEnv[k] = v
	}
	if p.procs > 0 {
		procEnv[protocol.EnvCommandGOMAXPROCS] = env["GOMAXPROCS"]
		procEnv["GOMAXPROCS"] = strconv.Itoa(p.procs)
	}
	lease := ""
	if p.orphan > 0 {
		lease = filepath.Join(b.dir, leaseFile)
		if err := os.WriteFile(lease, nil, 0o600); err != nil {
			return nil, fmt.Errorf("create lease: %w", err)
		}
	}
	rec := &record{ID: b.id, Env: env, Created: time.Now().UTC(), Timeout: opts.Timeout}
	key := ""
	if p.reuse {
		key = agentKey(procEnv)
		// An idle agent that is gone (it exited, or was killed) makes
		// way for the next, or a new one.
		for proc := p.takeIdle(key); proc != nil; proc = p.takeIdle(key) {
			if handed, err := p.handTo(proc, b, rec, lease); handed {
				return rec, err
			}
		}
	}

	stdout, stderr := p.stdout, p.stderr
	if stdout == nil || stderr == nil {
		log, err := os.OpenFile(filepath.Join(b.dir, agentLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open agent log: %w", err)
		}
		// The child holds its own copy once started.
		defer log.Close()
		if stdout == nil {
			stdout = log
		}
		if stderr == nil {
			stderr = log
		}
	}

	args := append(append([]string(nil), p.agent[1:]...), "serve", "--workspace", b.workspace)
	args = append(args, p.serve...)
	if lease != "" {
		args = append(args, "--lease", lease, "--orphan-after", p.orphan.String())
	}
	var ctl, agentEnd *os.File
	if p.reuse {
		fds, err := cloexecSocketpair()
		if err != nil {
			return nil, fmt.Errorf("agent control socket: %w", err)
		}
		// This end non-blocking, so that closing it ends the read
		// listen waits in (and the agent's, which then exits).
		if err := syscall.SetNonblock(fds[0], true); err != nil {
			syscall.Close(fds[0])
			syscall.Close(fds[1])
			return nil, fmt.Errorf("agent control socket: %w", err)
		}
		ctl, agentEnd = os.NewFile(uintptr(fds[0]), "agent-control"), os.NewFile(uintptr(fds[1]), "agent-control")
		// The child holds its own copy once started.
		defer agentEnd.Close()
		args = append(args, "--next-fd", "3")
	}
	// Not CommandContext: the agent outlives the Provision call.
	cmd := exec.Command(p.agent[0], args...)
	cmd.Dir = b.workspace
	cmd.Env = envList(procEnv)
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	if agentEnd != nil {
		cmd.ExtraFiles = []*os.File{agentEnd}
	}
	// A session of its own, which leads its own process group: under a
	// terminal, neither the agent nor anything it runs has it as its
	// controlling terminal. Its standard input is /dev/null.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.WaitDelay = pipeDelay
	if err := cmd.Start(); err != nil {
		if ctl != nil {
			ctl.Close()
		}
		return nil, fmt.Errorf("start agent: %w", err)
	}
	rec.PID = cmd.Process.Pid
	// The agent is our unreaped child: its /proc entry is there even if it
	// has already exited.
	ticks, _, err := procStat(rec.PID)
	if err == nil {
		rec.StartTicks = ticks
		err = writeRecord(b.dir, rec)
	}
	if err != nil {
		_ = syscall.Kill(-rec.PID, syscall.SIGKILL)
		_ = cmd.Wait()
		if ctl != nil {
			ctl.Close()
		}
		return nil, fmt.Errorf("record agent: %w", err)
	}

	proc := &agentProc{pid: rec.PID, startTicks: rec.StartTicks, done: make(chan struct{}), ctl: ctl, key: key, owner: b}
	b.pid, b.startTicks, b.proc = proc.pid, proc.startTicks, proc
	if ctl != nil {
		proc.idle = make(chan struct{}, 1)
		go proc.listen()
	}
	go func() {
		waitErr := cmd.Wait()
		proc.exited = cmd.ProcessState != nil && cmd.ProcessState.Exited()
		code, desc := exitOf(cmd.ProcessState, waitErr)
		// The directory may be gone (Cleanup); then there is nothing to
		// record.
		if o := proc.serving(); o != nil {
			_ = o.update(func(r *record) { r.Exit = &exitRecord{Code: code, Description: desc} })
		}
		proc.close()
		close(proc.done)
	}()
	return rec, nil
}

// Status reports running while the agent lives; once it has exited,
// succeeded (exit code 0) or failed, with ExitCode 128+n for an agent killed
// by signal n and -1 when the agent exited while no Provider watched it. A
// sandbox past its Timeout is failed, with a message saying so. An agent
// that finished the sandbox and waits for another (ReuseAgents) has
// succeeded, as one that exited 0.
func (p *Provider) Status(ctx context.Context, id string) (*sandbox.Status, error) {
	b, rec, err := p.find(id)
	if err != nil {
		return nil, fmt.Errorf("sandbox status: %w", err)
	}
	st, _ := p.status(b, rec)
	return st, nil
}

// status computes a sandbox's status and whether its agent runs. rec may be
// stale; it is reloaded after the liveness check when needed.
func (p *Provider) status(b *box, rec *record) (*sandbox.Status, bool) {
	alive := b.agentAlive()
	if !alive {
		// Reload: the agent's exit is recorded before done is closed.
		if fresh, err := readRecord(b.dir); err == nil {
			rec = fresh
		}
	}
	st := &sandbox.Status{Phase: sandbox.PhaseRunning}
	switch {
	case alive && !rec.Expired && b.proc != nil && b.proc.finishedWith(b):
		st.Phase = sandbox.PhaseSucceeded
		st.Message = fmt.Sprintf("agent (pid %d) finished; it waits for the next sandbox", rec.PID)
	case rec.Expired:
		st.Phase = sandbox.PhaseFailed
		st.Message = fmt.Sprintf("sandbox timed out after %s", rec.Timeout)
		st.ExitCode = -1
		if rec.Exit != nil {
			st.ExitCode = rec.Exit.Code
			st.Message += "; " + rec.Exit.Description
		}
	case alive:
		st.Message = fmt.Sprintf("agent running as pid %d", rec.PID)
	case rec.Exit != nil:
		st.ExitCode = rec.Exit.Code
		st.Message = rec.Exit.Description
		st.Phase = sandbox.PhaseFailed
		if rec.Exit.Code == 0 {
			st.Phase = sandbox.PhaseSucceeded
		}
	default:
		st.Phase = sandbox.PhaseFailed
		st.ExitCode = -1
		st.Message = "agent exited while no worker watched it; its exit code is unknown"
	}
	return st, alive
}

// Cleanup stops the agent and every process of the sandbox (SIGTERM, then
// SIGKILL after Options.StopGrace or when ctx ends) and removes Root/<id>.
// Processes are found by their process group and by HOME=Root/<id>/home in
// their environment; a process that left its group and changed HOME escapes.
// Cleanup of an unknown id, or of one that cannot name a sandbox, is a no-op.
func (p *Provider) Cleanup(ctx context.Context, id string) error {
	if checkID(id) != nil {
		return nil
	}
	unlock := p.lock(id)
	defer unlock()

	b, _, err := p.find(id)
	if err != nil {
		// No record, or an unreadable one: stop what can be found and
		// remove whatever is there.
		p.mu.Lock()
		b = p.boxes[id]
		p.mu.Unlock()
		if b == nil {
			b = p.newBox(id)
			if _, err := os.Lstat(b.dir); errors.Is(err, os.ErrNotExist) {
				return nil
			}
		}
	}
	p.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	p.mu.Unlock()
	p.gwKeys.Close(id)
	if p.keepAgent(ctx, b) {
		// Idle, the agent serves b no more and left nothing in it: it
		// waits for the next sandbox once b is gone.
		if err := removeAll(b.dir); err != nil {
			b.proc.close()
			return fmt.Errorf("clean up sandbox %s: %w", id, err)
		}
		p.forget(b)
		p.park(b.proc)
		return nil
	}
	if err := p.stop(ctx, b); err != nil {
		return fmt.Errorf("clean up sandbox %s: %w", id, err)
	}
	if err := removeAll(b.dir); err != nil {
		return fmt.Errorf("clean up sandbox %s: %w", id, err)
	}
	p.forget(b)
	return nil
}

// forget drops b, removed, from the sandboxes this Provider knows.
func (p *Provider) forget(b *box) {
	p.mu.Lock()
	if p.boxes[b.id] == b {
		delete(p.boxes, b.id)
	}
	p.mu.Unlock()
}

// stop ends the sandbox's processes: SIGTERM, then SIGKILL after the grace
// period or when ctx ends.
//
// The agent goes first, on its own: it leads its own process group, and
// what it runs is in that group or in a jail that ends with it. Only once
// it has exited are the sandbox's other processes looked for (a read of
// every process's environment), so that stopping a sandbox whose agent
// is still about to exit (the usual case: its work is done) costs one
// such scan, not one per signal and wait.
func (p *Provider) stop(ctx context.Context, b *box) error {
	deadline := time.Now().Add(p.grace)
	if b.agentAlive() {
		_ = syscall.Kill(-b.pid, syscall.SIGTERM)
		b.waitExit(ctx, deadline)
	}
	if p.leftNothing(b) {
		return nil
	}
	gone := func() bool {
		return !b.agentAlive() && noHomeProcesses(b.home)
	}
	signal := func(sig syscall.Signal) {
		if b.agentAlive() {
			// The agent leads its own process group (Setpgid).
			_ = syscall.Kill(-b.pid, sig)
		}
		for _, pid := range homeProcesses(b.home) {
			// One by one: such a process may have joined any group.
			_ = syscall.Kill(pid, sig)
		}
	}
	if gone() {
		return p.reaped(b)
	}
	signal(syscall.SIGTERM)
	if !poll(ctx, time.Until(deadline), gone) {
		deadline := time.Now().Add(killWait)
		for !gone() {
			if time.Now().After(deadline) {
				return fmt.Errorf("processes still running after SIGKILL: %v", homeProcesses(b.home))
			}
			signal(syscall.SIGKILL)
			time.Sleep(10 * time.Millisecond)
		}
	}
	return p.reaped(b)
}

// leftNothing reports whether b's agent has exited by itself, reaped by
// this Provider, in a sandbox where nothing but the agent started a
// process, and the agent ends what it runs (Options.CommandsEndWithAgent):
// then no process of the sandbox is left.
func (p *Provider) leftNothing(b *box) bool {
	if !p.ends || b.proc == nil || b.execd.Load() {
		return false
	}
	select {
	case <-b.proc.done:
		return b.proc.exited
	default:
		return false
	}
}

// reaped waits until this Provider has recorded the exit of an agent it
// started, so that nothing writes into the directory after Cleanup.
func (p *Provider) reaped(b *box) error {
	if b.proc == nil || waitDone(b.proc.done, killWait) {
		return nil
	}
	return errors.New("agent killed but not reaped")
}

// poll reports whether cond became true within d; it gives up early when
// ctx ends.
func poll(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// armTimer enforces rec.Timeout. Call with p.mu held.
func (p *Provider) armTimer(b *box, rec *record) {
	if rec.Timeout <= 0 || rec.Expired || b.timer != nil {
		return
	}
	b.timer = time.AfterFunc(time.Until(rec.Created.Add(rec.Timeout)), func() { p.expire(b) })
}

// expire stops a sandbox whose Timeout has elapsed and marks it failed.
func (p *Provider) expire(b *box) {
	unlock := p.lock(b.id)
	defer unlock()
	p.mu.Lock()
	current := p.boxes[b.id] == b
	p.mu.Unlock()
	if !current {
		return
	}
	if !b.agentAlive() {
		return
	}
	if err := b.update(func(r *record) { r.Expired = true }); err != nil {
		return
	}
	// Nobody to report to: Status shows the outcome, and Cleanup retries
	// whatever survives.
	_ = p.stop(context.Background(), b)
}

// find returns the sandbox id and its record, attaching to one an earlier
// Provider on the same Root made. The error wraps sandbox.ErrNotFound when
// there is no such sandbox.
func (p *Provider) find(id string) (*box, *record, error) {
	if err := checkID(id); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	}
	p.mu.Lock()
	b := p.boxes[id]
	p.mu.Unlock()
	if b == nil {
		b = p.newBox(id)
	}
	rec, err := b.cache.read(b.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if known := p.boxes[id]; known != nil {
		return known, rec, nil
	}
	b.pid, b.startTicks = rec.PID, rec.StartTicks
	p.boxes[id] = b
	p.armTimer(b, rec)
	return b, rec, nil
}

func (p *Provider) newBox(id string) *box {
	dir := filepath.Join(p.root, id)
	return &box{
		id:        id,
		dir:       dir,
		workspace: filepath.Join(dir, workspaceDir),
		home:      filepath.Join(dir, homeDir),
	}
}

func (p *Provider) sandboxOf(b *box, rec *record) *sandbox.Sandbox {
	st, _ := p.status(b, rec)
	return &sandbox.Sandbox{ID: b.id, Provider: p.Name(), WorkingDir: b.workspace, Phase: st.Phase}
}

// waitExit waits until the agent has exited, deadline has passed or ctx
// has ended.
func (b *box) waitExit(ctx context.Context, deadline time.Time) {
	if b.proc == nil {
		// Started by an earlier Provider: not a child to wait for.
		poll(ctx, time.Until(deadline), func() bool { return !b.agentAlive() })
		return
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-b.proc.done:
	case <-ctx.Done():
	case <-t.C:
	}
}

// agentAlive reports whether the agent runs.
func (b *box) agentAlive() bool {
	if b.proc != nil {
		select {
		case <-b.proc.done:
			return false
		default:
			return true
		}
	}
	return b.pid > 0 && procAlive(b.pid, b.startTicks)
}

// update applies change to the sandbox's record on disk.
func (b *box) update(change func(*record)) error {
	b.stateMu.Lock()
	defer b.stateMu.Unlock()
	rec, err := readRecord(b.dir)
	if err != nil {
		return err
	}
	change(rec)
	return writeRecord(b.dir, rec)
}

// lock takes id's lock exclusively and returns its release.
func (p *Provider) lock(id string) func() {
	l := p.idLock(id)
	l.mu.Lock()
	return func() { l.mu.Unlock(); p.releaseIDLock(id, l) }
}

// rlock takes id's lock shared and returns its release.
func (p *Provider) rlock(id string) func() {
	l := p.idLock(id)
	l.mu.RLock()
	return func() { l.mu.RUnlock(); p.releaseIDLock(id, l) }
}

func (p *Provider) idLock(id string) *idLock {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.locks[id]
	if l == nil {
		l = &idLock{}
		p.locks[id] = l
	}
	l.refs++
	return l
}

func (p *Provider) releaseIDLock(id string, l *idLock) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.refs--
	if l.refs == 0 {
		delete(p.locks, id)
	}
}

// checkID accepts names safe as a single path element.
func checkID(id string) error {
	if !validID(id) {
		return fmt.Errorf("invalid sandbox id %q: want 1 to 128 of [A-Za-z0-9._-], starting with a letter or digit", id)
	}
	return nil
}

// validID reports whether id is 1 to 128 of [A-Za-z0-9._-], starting
// with a letter or digit. (Every read of a sandbox's files checks its id:
// a regular expression took a tenth of the worker's reading of an
// agent's status.)
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && (c == '.' || c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// checkEnv refuses variables that cannot be set or that would hide a
// process from Cleanup (HOME marks the sandbox's processes).
func checkEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return fmt.Errorf("invalid environment variable name %q", k)
		case strings.ContainsRune(v, 0):
			return fmt.Errorf("environment variable %s: value contains NUL", k)
		case k == "HOME":
			return errors.New("environment may not set HOME: the sandbox's home is Root/<id>/home")
		}
	}
	return nil
}

func envList(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	sort.Strings(list)
	return list
}

// exitOf describes how a process ended: its exit code, or 128+n when
// signal n killed it, as container runtimes report it.
func exitOf(ps *os.ProcessState, waitErr error) (int, string) {
	if ps == nil {
		return -1, fmt.Sprintf("agent lost: %v", waitErr)
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Sprintf("agent killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
	}
	return ps.ExitCode(), fmt.Sprintf("agent exited with code %d", ps.ExitCode())
}

// removeAll removes dir, making read-only directories inside writable
// first if needed (Go's module cache, for one, is read-only).
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// cloexecSocketpair is a pair of connected Unix stream sockets that no
// process started meanwhile inherits: made and marked close-on-exec
// under syscall.ForkLock, as os/exec does where the flag cannot be given
// at creation (macOS).
func cloexecSocketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}
