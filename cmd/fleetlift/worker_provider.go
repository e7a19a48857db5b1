package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Sandbox providers --sandbox names.
const (
	sandboxLocal  = "local"
	sandboxDocker = "docker"
)

// provider makes the sandbox provider --sandbox names, choosing one when
// it names none, and logs the choice; kind is the provider's --sandbox.
func (w *workerFlags) provider(ctx context.Context, logw io.Writer, tf *temporalFlags) (_ sandbox.Provider, kind string, _ error) {
	kind, why := w.providerName, "--sandbox "+w.providerName
	if kind == "" {
		kind, why = w.recordedSandbox(ctx, tf.stateDir)
	} else if err := recordSandbox(tf.stateDir, kind); err != nil {
		return nil, "", err
	}
	switch kind {
	case sandboxLocal:
		p, err := w.localProvider(tf)
		if err != nil {
			return nil, "", err
		}
		fmt.Fprintf(logw, "sandboxes: local processes under %s (%s)\n", w.sandboxDir(tf.stateDir), why)
		w.sayGateway(logw)
		return p, kind, nil
	case sandboxDocker:
		p, err := w.dockerProvider(tf.stateDir)
		if err != nil {
			return nil, "", err
		}
		checkCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := p.Check(checkCtx); err != nil {
			p.Close()
			return nil, "", fmt.Errorf("--sandbox docker: %w: start the engine, or build the images with `make images`, or run tasks as local processes with --sandbox local", err)
		}
		fmt.Fprintf(logw, "sandboxes: docker containers of scope %s, images %s and agent %s, network %s (%s); the agent checks in each sandbox that it can isolate the work, and fails the task when it cannot\n",
			w.slot.scope(w.docker.scope), w.docker.image, cmp.Or(w.docker.agentBinary, w.docker.agentImage), w.docker.network, why)
		w.sayGateway(logw)
		return p, kind, nil
	case sandboxKubernetes, sandboxKubernetesJobs:
		p, err := w.kubeProvider(ctx, logw, kind)
		if err != nil {
			return nil, "", err
		}
		if kind == sandboxKubernetes {
			fmt.Fprintf(logw, "sandboxes: kubernetes SandboxRequests in namespace %s, image %s, pods made by fleetlift-controller (%s)\n", w.kube.namespace, w.docker.image, why)
		} else {
			fmt.Fprintf(logw, "sandboxes: kubernetes Jobs this worker makes in namespace %s, image %s and agent %s (%s)\n", w.kube.namespace, w.docker.image, w.docker.agentImage, why)
		}
		return p, kind, nil
	default:
		return nil, "", fmt.Errorf("--sandbox %q: want %s, %s, %s or %s", kind, sandboxLocal, sandboxDocker, sandboxKubernetes, sandboxKubernetesJobs)
	}
}

// sandboxDir is where this worker's local sandboxes live: the state
// directory's sandboxes/, or sandboxes-N/ for its slot N.
func (w *workerFlags) sandboxDir(stateDir string) string {
	return filepath.Join(stateDir, w.slot.name("sandboxes"))
}

// sandboxRecord is the file in the state directory that holds the
// provider its tasks run in: where untrusted code runs must not change
// under a running campaign with what happens to be installed when the
// worker starts again.
const sandboxRecord = "sandbox"

// recordedSandbox is the provider recorded in stateDir, or, on the state
// directory's first start (or with none), the one chooseSandbox picks,
// then recorded.
func (w *workerFlags) recordedSandbox(ctx context.Context, stateDir string) (kind, why string) {
	if stateDir != "" {
		path := filepath.Join(stateDir, sandboxRecord)
		data, err := os.ReadFile(path)
		switch rec := strings.TrimSpace(string(data)); {
		case err == nil && validSandbox(rec):
			return rec, fmt.Sprintf("chosen at this state directory's first start and kept (%s); --sandbox changes it", path)
		case err == nil:
			return sandboxLocal, fmt.Sprintf("%s names no provider (%q): local, the one that needs nothing installed; --sandbox chooses", path, rec)
		}
	}
	kind, why = w.chooseSandbox(ctx)
	if err := recordSandbox(stateDir, kind); err != nil {
		return kind, why + " (not recorded: " + err.Error() + ")"
	}
	return kind, why
}

// recordSandbox records kind in stateDir (nothing when it is empty): the
// provider later starts without --sandbox keep.
func recordSandbox(stateDir, kind string) error {
	if stateDir == "" || !validSandbox(kind) {
		return nil
	}
	path := filepath.Join(stateDir, sandboxRecord)
	if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) == kind {
		return nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("record the sandbox provider: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(kind+"\n"), 0o600); err != nil {
		return fmt.Errorf("record the sandbox provider: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("record the sandbox provider: %w", err)
	}
	return nil
}

func validSandbox(kind string) bool {
	switch kind {
	case sandboxLocal, sandboxDocker, sandboxKubernetes, sandboxKubernetesJobs:
		return true
	}
	return false
}

// chooseSandbox picks docker when an engine answers and has the sandbox
// and agent images, else local, and says why.
func (w *workerFlags) chooseSandbox(ctx context.Context) (kind, why string) {
	p, err := w.dockerProvider("")
	if err != nil {
		return sandboxLocal, fmt.Sprintf("the default, as docker cannot be set up: %v", err)
	}
	defer p.Close()
	checkCtx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := p.Check(checkCtx); err != nil {
		return sandboxLocal, fmt.Sprintf("the default without docker: %v", err)
	}
	return sandboxDocker, "the default where a Docker engine answers and has the images"
}

// observed is provider with its provisioning recorded in the metrics,
// when kept.
func (w *workerFlags) observed(provider sandbox.Provider) sandbox.Provider {
	if w.metrics == nil {
		return provider
	}
	return w.metrics.Sandbox(provider)
}
