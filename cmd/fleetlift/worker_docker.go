package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
)

// dockerFlags configure the Docker sandbox provider; image and
// agentImage (--sandbox-image, --sandbox-agent-image) serve the
// Kubernetes ones too.
type dockerFlags struct {
	image, agentImage, agentBinary, network, scope string
	readOnly                                       bool
}

// dockerProvider makes the Docker provider. The work is isolated by the
// agent in each container (its jail needs what the container allows,
// which the agent checks before every run); the worker's own check of
// local sandboxes does not apply.
//
// With a state directory, the worker's egress proxy (--sandbox-egress)
// and model gateway are served in stateDir/docker for the containers to
// mount.
func (w *workerFlags) dockerProvider(stateDir string) (*docker.Provider, error) {
	opts := docker.Options{
		Image:        w.docker.image,
		AgentImage:   w.docker.agentImage,
		AgentBinary:  w.docker.agentBinary,
		Scope:        w.slot.scope(w.docker.scope),
		Network:      w.docker.network,
		ReadOnlyRoot: w.docker.readOnly,
	}
	switch w.isolation {
	case protocol.IsolationNamespaces:
	case protocol.IsolationNone:
		opts.ServeArgs = []string{"--isolation", protocol.IsolationNone}
	default:
		return nil, fmt.Errorf("--sandbox-isolation %q: want %s or %s", w.isolation, protocol.IsolationNamespaces, protocol.IsolationNone)
	}
	// Local repositories are cloned from and pushed to where the worker
	// allows them: the same paths, bind-mounted read-write.
	for _, r := range w.fileRoots {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, fmt.Errorf("--allow-file-root %s: %w", r, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("--allow-file-root %s: not a directory to mount into sandboxes", r)
		}
		opts.Binds = append(opts.Binds, abs)
	}
	if stateDir != "" {
		abs, err := filepath.Abs(filepath.Join(stateDir, w.slot.name("docker")))
		if err != nil {
			return nil, err
		}
		opts.SocketDir = abs
		if len(w.egress) > 0 {
			if opts.Egress, err = w.egressProxy(); err != nil {
				return nil, err
			}
		}
		if opts.Gateway, err = w.gateway(); err != nil {
			return nil, err
		}
	}
	return docker.New(opts)
}

// defaultScope is this host's name, cut to what a scope may hold.
func defaultScope() string {
	host, err := os.Hostname()
	if err != nil {
		return docker.DefaultScope
	}
	return docker.HostScope(host)
}
