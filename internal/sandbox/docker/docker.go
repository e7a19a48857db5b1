package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/seccomp"
)

var _ sandbox.Provider = (*Provider)(nil)

// Defaults of Options.
const (
	// DefaultImage is the sandbox image (seed 003): git, sh and common
	// tools, with the agent user (uid 1000).
	DefaultImage = "fleetlift/sandbox:dev"
	// DefaultAgentImage holds only the static /fleetlift-agent.
	DefaultAgentImage = "fleetlift/agent:dev"
	// DefaultScope names the sandboxes of a provider given no scope.
	DefaultScope = "default"
	// DefaultPidsLimit bounds the processes of one sandbox.
	DefaultPidsLimit = 1024
	// DefaultNetwork is the network mode of sandboxes: none.
	DefaultNetwork = "none"

	defaultGrace = 10 * time.Second
)

// Paths and ids inside every sandbox container.
const (
	// Workspace is the sandbox's workspace, a named volume.
	Workspace = "/workspace"
	// Home is the agent's HOME, a named volume.
	Home = "/home/agent"
	// AgentDir holds the injected agent binary, read-only.
	AgentDir = "/opt/fleetlift"
	// AgentPath is the agent binary in the container.
	AgentPath = AgentDir + "/fleetlift-agent"
	// UID and GID are the agent's and its commands' ids.
	UID = 1000
	GID = 1000
	// ExecGID is the group of commands run through Exec: not the agent's,
	// so that the kernel keeps them out of the agent's /proc entries
	// (ptrace access wants the same uid and gid), where its secrets are.
	ExecGID = 1001
)

// Labels every sandbox container carries.
const (
	LabelSandbox = "fleetlift.io/sandbox"
	LabelScope   = "fleetlift.io/scope"
	LabelTaskID  = "fleetlift.io/task-id"
	// LabelSecretNames lists, comma-separated, the names (never the
	// values) of the variables Exec'd commands must not see.
	LabelSecretNames = "fleetlift.io/secret-names"
	// LabelExpires is when the sandbox's Timeout ends (RFC 3339).
	LabelExpires = "fleetlift.io/expires"
	// LabelTimeout is the sandbox's Timeout, for messages.
	LabelTimeout = "fleetlift.io/timeout"
	// LabelMemory is the memory limit, for the out-of-memory message.
	LabelMemory = "fleetlift.io/memory"
	// LabelAgentImage marks the volume holding an agent image's binary.
	LabelAgentImage = "fleetlift.io/agent-image"
)

// Options configure a Provider.
type Options struct {
	// Client talks to the engine; nil means one from the environment
	// (DOCKER_HOST and friends) with API version negotiation.
	Client *client.Client
	// Image runs sandboxes whose ProvisionOptions.Image is empty; empty
	// means DefaultImage.
	Image string
	// AgentImage is the image the agent binary is taken from (its
	// /fleetlift-agent); empty means DefaultAgentImage.
	AgentImage string
	// AgentBinary, when set, is a static fleetlift-agent on the engine's
	// host that is bind-mounted instead of AgentImage's: for development
	// against a local engine.
	AgentBinary string
	// Scope tells this provider's sandboxes from other providers' on the
	// same engine (another worker host); empty means DefaultScope. A
	// provider sees only its scope's sandboxes.
	Scope string
	// Network is the sandboxes' network mode: "none" (the default),
	// "host", "bridge" or a network's name.
	Network string
	// ReadOnlyRoot mounts the image read-only; /workspace, HOME and a
	// private /tmp stay writable.
	ReadOnlyRoot bool
	// PidsLimit bounds the processes in one sandbox; zero means
	// DefaultPidsLimit.
	PidsLimit int64
	// ServeArgs follow "serve --workspace /workspace" on the agent's
	// command line (--hide, --isolation, polling intervals).
	ServeArgs []string
	// Binds are directories of the engine's host mounted read-write at
	// the same path in every sandbox: the operator's --allow-file-root
	// directories, so that local repositories can be cloned and pushed.
	// The agent runs as uid 1000: it must be able to write them.
	Binds []string
	// ArchiveReads makes CopyFrom always read through the engine's
	// archive endpoint, never from the workspace volume on this host.
	ArchiveReads bool
	// StopGrace is how long Cleanup and the sandbox timeout wait after
	// SIGTERM before SIGKILL; zero means 10s.
	StopGrace time.Duration
	// Egress, when set, is the egress proxy (package egress) through
	// which the sandboxes' jailed commands reach the network, and the
	// only way they do: served on SocketDir/egress.sock while the
	// Provider is open, SocketDir mounted read-only at SocketMount in
	// every sandbox, and the agent told (--egress-socket).
	Egress http.Handler
	// Gateway, when set, is the gateway the sandboxes' agents clone
	// their task's repositories through and their agent CLIs reach their
	// model through: served on SocketDir/gateway.sock (at SocketMount in
	// sandboxes, the agent's --gateway), with a key of each sandbox's own
	// in its protocol directory (protocol.GatewayKeyFile), its budget the
	// limits.max_tokens of the manifest there, and what it used written
	// beside it (protocol.UsageFile). Neither the API key nor the forge's
	// token enters a sandbox.
	Gateway *gateway.Gateway
	// SocketDir is the directory on the engine's host (this host) for
	// the sockets sandboxes reach the worker by; required with Egress or
	// Gateway.
	SocketDir string
}

// SocketMount is where sandboxes see Options.SocketDir.
const SocketMount = "/run/fleetlift"

// Provider runs sandboxes as containers. Create it with New; it is safe for
// concurrent use.
type Provider struct {
	cli        *client.Client
	ownClient  bool
	image      string
	agentImage string
	agentBin   string
	scope      string
	network    string
	readOnly   bool
	pids       int64
	serve      []string
	binds      []string
	// sockets is Options.SocketDir, "" without one; egress serves
	// Options.Egress there.
	sockets string
	egress  *http.Server
	// gatewaySrv serves Options.Gateway; gwKeys hands the sandboxes
	// their keys to it (nil without one).
	gatewaySrv *http.Server
	gwKeys     *gateway.Keys
	grace      time.Duration
	seccomp    string
	// hostReads allows CopyFrom to read volumes on this host.
	hostReads bool

	mu     sync.Mutex
	locks  map[string]*idLock
	timers map[string]*time.Timer
	// mountpoints are the volumes' paths on the engine's host.
	mountpoints map[string]string
	// agentMu guards agentVolumes, the agent volumes known to be
	// complete, by agent image id.
	agentMu      sync.Mutex
	agentVolumes map[string]string
}

// idLock serialises Provision and Cleanup of one sandbox in this process.
type idLock struct {
	mu   sync.Mutex
	refs int
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// New returns a Provider for the engine opts.Client (or the environment's)
// talks to. It does not contact the engine; Check does.
func New(opts Options) (*Provider, error) {
	p := &Provider{
		cli:        opts.Client,
		image:      cmpOr(opts.Image, DefaultImage),
		agentImage: cmpOr(opts.AgentImage, DefaultAgentImage),
		agentBin:   opts.AgentBinary,
		scope:      cmpOr(opts.Scope, DefaultScope),
		network:    cmpOr(opts.Network, DefaultNetwork),
		readOnly:   opts.ReadOnlyRoot,
		pids:       opts.PidsLimit,
		serve:      slices.Clone(opts.ServeArgs),
		grace:      opts.StopGrace,
		hostReads:  !opts.ArchiveReads,
		locks:      map[string]*idLock{},
		timers:     map[string]*time.Timer{},

		mountpoints: map[string]string{},

		agentVolumes: map[string]string{},
	}
	if p.pids <= 0 {
		p.pids = DefaultPidsLimit
	}
	if p.grace <= 0 {
		p.grace = defaultGrace
	}
	if len(p.scope) > 32 || !namePattern.MatchString(p.scope) {
		return nil, fmt.Errorf("new docker sandbox provider: invalid scope %q: want 1 to 32 of [A-Za-z0-9._-], starting with a letter or digit", p.scope)
	}
	if p.agentBin != "" && !strings.HasPrefix(p.agentBin, "/") {
		return nil, fmt.Errorf("new docker sandbox provider: AgentBinary %q must be an absolute path on the engine's host", p.agentBin)
	}
	for _, b := range opts.Binds {
		if !strings.HasPrefix(b, "/") || strings.Contains(b, ":") {
			return nil, fmt.Errorf("new docker sandbox provider: bind %q must be an absolute path without colons", b)
		}
		if b == Workspace || strings.HasPrefix(b, Workspace+"/") || b == Home || strings.HasPrefix(b, Home+"/") || b == AgentDir || strings.HasPrefix(b, AgentDir+"/") {
			return nil, fmt.Errorf("new docker sandbox provider: bind %q overlaps the sandbox's own %s, %s or %s", b, Workspace, Home, AgentDir)
		}
		p.binds = append(p.binds, b)
	}
	profile, err := seccomp.Profile()
	if err != nil {
		return nil, fmt.Errorf("new docker sandbox provider: %w", err)
	}
	p.seccomp = string(profile)
	if opts.Egress != nil {
		srv, err := p.serveSocket(opts.SocketDir, "egress.sock", opts.Egress, "--egress-socket")
		if err != nil {
			return nil, fmt.Errorf("new docker sandbox provider: egress proxy: %w", err)
		}
		p.egress = srv
	}
	if opts.Gateway != nil {
		srv, err := p.serveSocket(opts.SocketDir, "gateway.sock", opts.Gateway, "--gateway")
		if err != nil {
			if p.egress != nil {
				p.egress.Close()
			}
			return nil, fmt.Errorf("new docker sandbox provider: model gateway: %w", err)
		}
		p.gatewaySrv, p.gwKeys = srv, gateway.FileKeys(opts.Gateway, p)
		for _, api := range opts.Gateway.APIs() {
			p.serve = append(p.serve, "--gateway-api", api)
		}
	}
	if p.cli == nil {
		c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("new docker sandbox provider: %w", err)
		}
		p.cli, p.ownClient = c, true
	}
	return p, nil
}

// Close stops the sandbox timers this provider armed and closes the client
// it made. Sandboxes keep running.
func (p *Provider) Close() error {
	p.mu.Lock()
	for id, t := range p.timers {
		t.Stop()
		delete(p.timers, id)
	}
	p.mu.Unlock()
	for _, srv := range []*http.Server{p.egress, p.gatewaySrv} {
		if srv != nil {
			srv.Close()
		}
	}
	if p.ownClient {
		return p.cli.Close()
	}
	return nil
}

// serveSocket serves h on dir/name, which every sandbox reaches at
// SocketMount/name (the directory is mounted, so that a worker started
// again serves the containers it re-attaches to on a new socket there),
// and tells the agents with flag. The agent runs as UID: the directory
// and the socket are open to it.
func (p *Provider) serveSocket(dir, name string, h http.Handler, flag string) (*http.Server, error) {
	if !filepath.IsAbs(dir) || strings.Contains(dir, ":") {
		return nil, fmt.Errorf("SocketDir %q must be an absolute path without colons", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	srv, err := sandbox.ServeUnix(filepath.Join(dir, name), h, 0o666)
	if err != nil {
		return nil, err
	}
	p.sockets = dir
	p.serve = append(p.serve, flag, SocketMount+"/"+name)
	return srv, nil
}

// Name is "docker".
func (p *Provider) Name() string { return "docker" }

// Check reports whether the engine answers and the sandbox image and the
// agent (image or binary) are there.
func (p *Provider) Check(ctx context.Context) error {
	if _, err := p.cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker engine at %s does not answer: %w", p.cli.DaemonHost(), err)
	}
	if _, err := p.cli.ImageInspect(ctx, p.image); err != nil {
		return fmt.Errorf("sandbox image %s: %w", p.image, err)
	}
	if p.agentBin == "" {
		if _, err := p.cli.ImageInspect(ctx, p.agentImage); err != nil {
			return fmt.Errorf("agent image %s: %w", p.agentImage, err)
		}
	}
	return nil
}

// containerName is the container of sandbox id in this provider's scope.
func (p *Provider) containerName(id string) string {
	return "fleetlift-" + p.scope + "-" + id
}

func (p *Provider) workspaceVolume(id string) string { return p.containerName(id) + "-workspace" }
func (p *Provider) homeVolume(id string) string      { return p.containerName(id) + "-home" }

// find inspects sandbox id's container. The error wraps sandbox.ErrNotFound
// when there is none in this scope.
func (p *Provider) find(ctx context.Context, id string) (container.InspectResponse, error) {
	if err := checkID(id); err != nil {
		return container.InspectResponse{}, fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	}
	res, err := p.cli.ContainerInspect(ctx, p.containerName(id), client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return container.InspectResponse{}, fmt.Errorf("sandbox %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return container.InspectResponse{}, fmt.Errorf("sandbox %s: inspect container: %w", id, err)
	}
	c := res.Container
	if c.Config == nil || c.Config.Labels[LabelSandbox] != id || c.Config.Labels[LabelScope] != p.scope {
		return container.InspectResponse{}, fmt.Errorf("sandbox %s: container %s is not this provider's sandbox (labels %v): %w", id, p.containerName(id), labelsOf(c), sandbox.ErrNotFound)
	}
	p.armTimer(id, c)
	return c, nil
}

func labelsOf(c container.InspectResponse) map[string]string {
	if c.Config == nil {
		return nil
	}
	return c.Config.Labels
}

// Status reports the container's state: pending before it starts, running
// while the agent runs, then succeeded (exit code 0) or failed. A sandbox
// whose memory ran out is failed with a message that says so, as is one
// past its Timeout. An unknown id gives ErrNotFound.
func (p *Provider) Status(ctx context.Context, id string) (*sandbox.Status, error) {
	c, err := p.find(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("sandbox status: %w", err)
	}
	if p.expired(c) && c.State != nil && c.State.Running {
		p.expire(id)
		if c, err = p.find(ctx, id); err != nil {
			return nil, fmt.Errorf("sandbox status: %w", err)
		}
	}
	return p.status(c), nil
}

func (p *Provider) status(c container.InspectResponse) *sandbox.Status {
	st := c.State
	if st == nil {
		return &sandbox.Status{Phase: sandbox.PhasePending, Message: "container state unknown"}
	}
	labels := labelsOf(c)
	switch {
	case st.Running || st.Restarting || st.Paused:
		return &sandbox.Status{Phase: sandbox.PhaseRunning, Message: fmt.Sprintf("agent running in container %s", strings.TrimPrefix(c.Name, "/"))}
	case st.Status == container.StateCreated:
		return &sandbox.Status{Phase: sandbox.PhasePending, Message: "container created, not started"}
	}
	out := &sandbox.Status{Phase: sandbox.PhaseFailed, ExitCode: st.ExitCode}
	switch {
	case st.OOMKilled:
		limit := labels[LabelMemory]
		if limit == "" {
			limit = "none set"
		}
		out.Message = fmt.Sprintf("sandbox ran out of memory (limit %s): the kernel killed a process in it; the agent exited with code %d", limit, st.ExitCode)
	case p.expired(c):
		out.Message = fmt.Sprintf("sandbox timed out after %s; the agent exited with code %d", labels[LabelTimeout], st.ExitCode)
	case st.ExitCode == 0:
		out.Phase = sandbox.PhaseSucceeded
		out.Message = "agent exited with code 0"
	case st.ExitCode > 128:
		out.Message = fmt.Sprintf("agent killed by signal %d", st.ExitCode-128)
	default:
		out.Message = fmt.Sprintf("agent exited with code %d", st.ExitCode)
	}
	if st.Error != "" {
		out.Message += ": " + st.Error
	}
	return out
}

// expired reports whether c's Timeout has passed.
func (p *Provider) expired(c container.InspectResponse) bool {
	deadline, ok := expiry(c)
	if !ok {
		return false
	}
	if c.State != nil && !c.State.Running && c.State.FinishedAt != "" {
		if done, err := time.Parse(time.RFC3339Nano, c.State.FinishedAt); err == nil && !done.IsZero() && done.Year() > 1 {
			return !done.Before(deadline)
		}
	}
	return !time.Now().Before(deadline)
}

func expiry(c container.InspectResponse) (time.Time, bool) {
	v := labelsOf(c)[LabelExpires]
	if v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// armTimer stops the sandbox when its Timeout ends, once per id and
// provider (again after a restart, from the label).
func (p *Provider) armTimer(id string, c container.InspectResponse) {
	deadline, ok := expiry(c)
	if !ok || c.State == nil || !c.State.Running {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timers[id] != nil {
		return
	}
	p.timers[id] = time.AfterFunc(time.Until(deadline), func() { p.expire(id) })
}

// expire stops a sandbox past its Timeout. Nobody to report to: Status
// shows the outcome.
func (p *Provider) expire(id string) {
	unlock := p.lock(id)
	defer unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.grace+30*time.Second)
	defer cancel()
	_ = p.stop(ctx, p.containerName(id))
}

// Cleanup stops the container (SIGTERM, then SIGKILL after StopGrace or
// when ctx ends) and removes it and its volumes. Cleaning up an unknown id
// is not an error.
func (p *Provider) Cleanup(ctx context.Context, id string) error {
	if checkID(id) != nil {
		return nil
	}
	unlock := p.lock(id)
	defer unlock()
	p.gwKeys.Close(id)
	p.mu.Lock()
	if t := p.timers[id]; t != nil {
		t.Stop()
		delete(p.timers, id)
	}
	delete(p.mountpoints, p.workspaceVolume(id))
	p.mu.Unlock()

	c, err := p.find(ctx, id)
	switch {
	case err == nil:
		if err := p.stop(ctx, c.ID); err != nil {
			return fmt.Errorf("clean up sandbox %s: %w", id, err)
		}
		_, err := p.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true})
		if err != nil && !cerrdefs.IsNotFound(err) && !cerrdefs.IsConflict(err) {
			return fmt.Errorf("clean up sandbox %s: remove container: %w", id, err)
		}
		if err := p.waitGone(ctx, c.ID); err != nil {
			return fmt.Errorf("clean up sandbox %s: %w", id, err)
		}
	case !errors.Is(err, sandbox.ErrNotFound):
		return fmt.Errorf("clean up sandbox %s: %w", id, err)
	case !p.containerGone(ctx, p.containerName(id)):
		// A container of that name that is not this scope's sandbox:
		// leave it, and the volumes, alone.
		return nil
	}
	// The volumes may outlive a container whose creation failed half-way.
	for _, v := range []string{p.workspaceVolume(id), p.homeVolume(id)} {
		if err := p.removeVolume(ctx, v); err != nil {
			return fmt.Errorf("clean up sandbox %s: %w", id, err)
		}
	}
	return nil
}

// containerGone reports whether no container has the name.
func (p *Provider) containerGone(ctx context.Context, name string) bool {
	_, err := p.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	return cerrdefs.IsNotFound(err)
}

// stop stops a running container: SIGTERM, then SIGKILL after the grace
// period, or at once when ctx ends first.
func (p *Provider) stop(ctx context.Context, ref string) error {
	grace := int(p.grace.Round(time.Second) / time.Second)
	if dl, ok := ctx.Deadline(); ok {
		grace = min(grace, max(0, int(time.Until(dl)/time.Second)-2))
	}
	_, err := p.cli.ContainerStop(ctx, ref, client.ContainerStopOptions{Timeout: &grace})
	if err == nil || cerrdefs.IsNotFound(err) || cerrdefs.IsNotModified(err) {
		return nil
	}
	// A container already stopping or stopped answers with a conflict on
	// some engines.
	if cerrdefs.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("stop container: %w", err)
}

// waitGone waits until the engine no longer knows the container: removal
// by a concurrent Cleanup may still be under way.
func (p *Provider) waitGone(ctx context.Context, ref string) error {
	for {
		_, err := p.cli.ContainerInspect(ctx, ref, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("wait for container removal: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for container removal: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *Provider) removeVolume(ctx context.Context, name string) error {
	for {
		_, err := p.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		// In use: a container being removed still holds it.
		if !cerrdefs.IsConflict(err) {
			return fmt.Errorf("remove volume %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove volume %s: %w", name, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lock takes id's lock and returns its release.
func (p *Provider) lock(id string) func() {
	p.mu.Lock()
	l := p.locks[id]
	if l == nil {
		l = &idLock{}
		p.locks[id] = l
	}
	l.refs++
	p.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		p.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(p.locks, id)
		}
		p.mu.Unlock()
	}
}

// checkID accepts ids that can name a container and its volumes.
func checkID(id string) error {
	if len(id) == 0 || len(id) > 128 || !namePattern.MatchString(id) {
		return fmt.Errorf("invalid sandbox id %q: want 1 to 128 of [A-Za-z0-9._-], starting with a letter or digit", id)
	}
	return nil
}

// checkEnv refuses variables that cannot be set.
func checkEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			return fmt.Errorf("invalid environment variable name %q", k)
		case strings.ContainsRune(v, 0):
			return fmt.Errorf("environment variable %s: value contains NUL", k)
		}
	}
	return nil
}

// envList renders env sorted, as KEY=VALUE.
func envList(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		list = append(list, k+"="+env[k])
	}
	return list
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
