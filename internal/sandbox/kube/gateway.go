package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/gateway"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Gateway is the worker's gateway (package gateway) as sandbox pods reach
// it: over the pod network, at URL (http://HOST:PORT, this worker's own
// address, which the sandbox NetworkPolicy lets them reach). Their agents
// clone through it with a key of their sandbox's own, which the provider
// writes into the sandbox once its pod runs; the forge's token stays with
// the worker. When the gateway serves the worker's egress proxy
// (gateway.Gateway.Egress), the agents relay their jails' egress port to
// it, with the same key.
type Gateway struct {
	Gateway *gateway.Gateway
	URL     string

	once sync.Once
	keys *gateway.Keys
}

// sweepEvery is how often a worker looks for sandboxes that went without
// it: another worker cleaned them up (any worker takes a task's steps).
const sweepEvery = time.Minute

// env is the sandbox's env with the gateway's address (and the model APIs
// it serves, and whether it serves local repositories) for its agent
// (fleetlift-agent serve --gateway-url).
func (g *Gateway) env(env map[string]string) map[string]string {
	if g == nil {
		return env
	}
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	env[protocol.EnvGatewayURL] = g.URL
	if apis := g.Gateway.APIs(); len(apis) > 0 {
		env[protocol.EnvGatewayAPIs] = strings.Join(apis, ",")
	}
	if g.Gateway.Egress != nil {
		env[protocol.EnvGatewayEgress] = "1"
	}
	if g.Gateway.Git != nil && len(g.Gateway.Git.FileRoots) > 0 {
		env[protocol.EnvGatewayFiles] = "1"
	}
	return env
}

// files are a provider's sandboxes as its gateway's keys reach them:
// their files as they are (the provider's own Exec, CopyTo and CopyFrom
// take the sandbox over first, through take; these never do) and their
// status.
type files interface {
	gateway.Files
	Status(ctx context.Context, id string) (*sandbox.Status, error)
}

// open gives sandbox id of f its key, and this worker's URL beside it
// (gateway.Keys.URL): a sandbox another worker's gateway served gets a
// new key, and its agent's relay reaches this worker from then on. A
// sandbox this worker gave a key costs nothing: no read. The first call
// starts closing the keys of f's sandboxes that are gone or that
// another worker took over.
func (g *Gateway) open(ctx context.Context, f files, id string) error {
	if g == nil {
		return nil
	}
	g.once.Do(func() {
		g.keys = gateway.FileKeys(g.Gateway, f)
		// A sandbox another worker started, which is gone, is taken
		// over: a new key, and the agent's relay led here.
		g.keys.URL = g.URL
		go g.sweep(f)
	})
	return g.keys.Open(ctx, id)
}

// take is open before this worker uses sandbox id, which it may not
// have provisioned: on Kubernetes any worker takes a task's next step,
// and when the worker whose gateway served the sandbox died, the agent's
// relay would lead its clones, model calls and egress to nothing.
func (g *Gateway) take(ctx context.Context, f files, id string) error {
	if err := g.open(ctx, f, id); err != nil {
		return fmt.Errorf("sandbox %s: move it to this worker's gateway: %w", id, err)
	}
	return nil
}

// sweep, every sweepEvery for as long as the process runs, closes the
// keys of f's sandboxes that are gone, and of those another worker took
// over (gateway.Keys.CloseMoved: its gateway takes the old key no more).
func (g *Gateway) sweep(f files) {
	for range time.Tick(sweepEvery) {
		for _, id := range g.keys.IDs() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := f.Status(ctx, id)
			switch {
			case errors.Is(err, sandbox.ErrNotFound):
				g.keys.Close(id)
			case err == nil:
				g.keys.CloseMoved(ctx, id)
			}
			cancel()
		}
	}
}

// close ends sandbox id's use of the gateway.
func (g *Gateway) close(id string) {
	if g == nil || g.keys == nil {
		return
	}
	g.keys.Close(id)
}
