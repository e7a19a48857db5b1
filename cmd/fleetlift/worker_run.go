package main

import (
	"io"

	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// newWorkers runs all together, and closes provider with them when it
// is a Closer (the provider itself, before metrics wrap it), and the
// local forge (the scratch repository it keeps).
func newWorkers(provider sandbox.Provider, localForge io.Closer, all ...worker.Worker) *workers {
	ws := &workers{all: all, localForge: localForge}
	if c, ok := provider.(io.Closer); ok {
		ws.provider = c
	}
	return ws
}

// workers run together: the worker of the shared task queue (workflows,
// provisioning) and the one of this host's queue (the steps on its
// sandboxes).
type workers struct {
	all []worker.Worker
	// provider stops watching its sandboxes with the workers: those a
	// worker started again in time takes over end themselves.
	provider io.Closer
	// localForge is the forge the workers propose changes on when their
	// definitions name none (deliverer).
	localForge io.Closer
	// slot is given up once they stopped.
	slot *workerSlot
}

// Start starts every worker, or none.
func (ws *workers) Start() error {
	for i, w := range ws.all {
		if err := w.Start(); err != nil {
			for _, started := range ws.all[:i] {
				started.Stop()
			}
			return err
		}
	}
	return nil
}

// Stop stops every worker, and the watching of their sandboxes.
func (ws *workers) Stop() {
	for i := len(ws.all) - 1; i >= 0; i-- {
		ws.all[i].Stop()
	}
	if ws.provider != nil {
		_ = ws.provider.Close()
	}
	if ws.localForge != nil {
		_ = ws.localForge.Close()
	}
	ws.slot.release()
}

// Run starts the workers and stops them when interrupt closes.
func (ws *workers) Run(interrupt <-chan any) error {
	if err := ws.Start(); err != nil {
		return err
	}
	<-interrupt
	ws.Stop()
	return nil
}
