package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fleetlift/fleetlift/internal/agent"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/jail"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
)

// localLimits are the --sandbox-memory, -processes, -cpu, -tmp-size,
// -file-size and -disk-reserve flags.
type localLimits struct {
	memory, cpu, tmp, file string
	diskReserve            string
	processes              int
}

// serveArgs are the agent's flags that bound each jailed command.
func (l localLimits) serveArgs() ([]string, error) {
	var args []string
	for _, q := range []struct{ flag, value, arg string }{
		{"--sandbox-memory", l.memory, "--max-memory"},
		{"--sandbox-tmp-size", l.tmp, "--tmp-size"},
		{"--sandbox-file-size", l.file, "--max-file-size"},
		{"--sandbox-disk-reserve", l.diskReserve, "--disk-reserve"},
	} {
		if q.value == "" || q.value == "0" {
			continue
		}
		n, err := sandbox.ParseMemory(q.value)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", q.flag, q.value, err)
		}
		args = append(args, q.arg, strconv.FormatInt(n, 10))
	}
	if l.cpu != "" && l.cpu != "0" {
		nano, err := sandbox.ParseCPU(l.cpu)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-cpu %q: %w", l.cpu, err)
		}
		args = append(args, "--max-cpu", strconv.FormatFloat(float64(nano)/1e9, 'f', -1, 64))
	}
	if l.processes < 0 {
		return nil, fmt.Errorf("--sandbox-processes %d: want 0 (no bound) or more", l.processes)
	}
	if l.processes > 0 {
		args = append(args, "--max-processes", strconv.Itoa(l.processes))
	}
	return args, nil
}

// localProvider makes the local provider: sandboxes under the state
// directory's sandboxes/ whose agent is fleetlift-agent (or this
// executable). Unless --sandbox-isolation=none, it first makes sure the
// agent can jail the work it runs, and refuses to start when it cannot.
func (w *workerFlags) localProvider(tf *temporalFlags) (sandbox.Provider, error) {
	agentArgv, err := agentCommand()
	if err != nil {
		return nil, err
	}
	root := w.sandboxDir(tf.stateDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("create sandbox directory: %w", err)
	}
	hidden, err := w.hidden(tf)
	if err != nil {
		return nil, err
	}
	var serve []string
	switch w.isolation {
	case protocol.IsolationNamespaces:
		self := append(append([]string{}, agentArgv...), "jail")
		if p := ownJailProgram(); p != "" {
			// The agents jail with it too, told so rather than each
			// asking it for its protocol at start.
			self = []string{p}
			serve = append(serve, "--jail-program", p)
		}
		j := &jail.Jail{Self: self, Spec: jail.Spec{
			Writable: []string{root}, Hidden: hidden, Scratch: jail.DefaultScratch,
		}}
		if err := j.Check(); err != nil {
			return nil, fmt.Errorf("local sandboxes cannot isolate the work they run (%v): allow unprivileged user namespaces (sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone), or accept running untrusted work unisolated with --sandbox-isolation=%s", err, protocol.IsolationNone)
		}
		for _, h := range hidden {
			serve = append(serve, "--hide", h)
		}
		if home, err := os.UserHomeDir(); err == nil {
			_, shown := local.HomeView(home, os.Getenv("PATH"))
			for _, p := range shown {
				serve = append(serve, "--show", p)
			}
		}
		limits, err := w.limits.serveArgs()
		if err != nil {
			return nil, err
		}
		serve = append(serve, limits...)
	case protocol.IsolationNone:
		serve = []string{"--isolation", protocol.IsolationNone}
	default:
		return nil, fmt.Errorf("--sandbox-isolation %q: want %s or %s", w.isolation, protocol.IsolationNamespaces, protocol.IsolationNone)
	}
	var proxy http.Handler
	if len(w.egress) > 0 {
		p, err := w.egressProxy()
		if err != nil {
			return nil, err
		}
		proxy = p
	}
	gw, err := w.gateway()
	if err != nil {
		return nil, err
	}
	orphan := w.orphan
	if orphan <= 0 {
		orphan = agent.DefaultOrphanAfter
	}
	return local.New(local.Options{
		Gateway:      gw,
		Egress:       proxy,
		Root:         root,
		AgentCommand: agentArgv,
		ServeArgs:    serve,
		OrphanAfter:  orphan,
		// The agent runs on one processor (agentcmd's serve): it starts
		// so.
		AgentGOMAXPROCS: 1,
		// Jailed, the work ends with the agent (see package jail).
		CommandsEndWithAgent: w.isolation == protocol.IsolationNamespaces,
		// And so an agent that finished a sandbox serves the next one
		// with the same environment: one start of an agent for a run
		// of short units, not one per unit.
		ReuseAgents: w.isolation == protocol.IsolationNamespaces,
	})
}

// hidden is what the work in local sandboxes must not see: the state
// directory (the embedded server's database and credentials, every
// sandbox), the Temporal client credential files, credentials in this
// user's home, container engines' sockets, and --sandbox-hide.
func (w *workerFlags) hidden(tf *temporalFlags) ([]string, error) {
	state, err := filepath.Abs(tf.stateDir)
	if err != nil {
		return nil, err
	}
	out := []string{state}
	for _, p := range []string{tf.tls.cert, tf.tls.key} {
		if p != "" {
			if abs, err := filepath.Abs(p); err == nil {
				out = append(out, abs)
			}
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		h, _ := local.HomeView(home, os.Getenv("PATH"))
		out = append(out, h...)
	}
	out = append(out, "/run/docker.sock", "/var/run/docker.sock", "/run/containerd", "/run/user")
	for _, p := range w.hide {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("--sandbox-hide %s: %w", p, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// agentCommand is the agent that local sandboxes run: $FLEETLIFT_AGENT_BINARY,
// else fleetlift-agent beside this executable, else this executable's
// hidden agent command. The slim fleetlift-agent starts in a tenth of the
// time and memory: this binary links the Temporal server.
func agentCommand() ([]string, error) {
	if p := os.Getenv("FLEETLIFT_AGENT_BINARY"); p != "" {
		return []string{p}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable for the agent: %w", err)
	}
	slim := filepath.Join(filepath.Dir(exe), "fleetlift-agent")
	if fi, err := os.Stat(slim); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return []string{slim}, nil
	}
	return []string{exe, "agent"}, nil
}

// ownJailProgram is the fleetlift-jail beside this executable when it
// speaks this build's jail protocol (jail.Program), "" otherwise
// or when FLEETLIFT_AGENT_BINARY names an agent of another build, which
// finds its own.
func ownJailProgram() string {
	if os.Getenv("FLEETLIFT_AGENT_BINARY") != "" {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return jail.Program(filepath.Dir(exe))
}
