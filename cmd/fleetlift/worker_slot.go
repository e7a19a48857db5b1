package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/fleetlift/fleetlift/internal/workflow"
)

// maxSlots bounds the workers that share one state directory at once.
const maxSlots = 64

// workerSlot is a worker's place among the workers running at once with
// one state directory: `fleetlift up` and `fleetlift run` in two
// terminals, or two `fleetlift worker` on one host. Each slot has its own
// sandboxes, host task queue and Docker scope, so that no worker takes
// the steps of a sandbox another one made and only that one can reach.
// A worker started again after a crash takes the slot its predecessor
// left, and with it that worker's sandboxes and queue: the lock that
// holds a slot goes with the process that held it.
type workerSlot struct {
	n    int
	lock *os.File
}

// claimSlot takes the first free slot of stateDir; without a state
// directory, slot 0 and no lock.
func claimSlot(stateDir string) (*workerSlot, error) {
	if stateDir == "" {
		return &workerSlot{}, nil
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	for n := range maxSlots {
		name := "worker.lock"
		if n > 0 {
			name = fmt.Sprintf("worker-%d.lock", n)
		}
		f, err := os.OpenFile(filepath.Join(stateDir, name), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("worker slot: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			if err == syscall.EWOULDBLOCK {
				continue
			}
			return nil, fmt.Errorf("worker slot %s: %w", f.Name(), err)
		}
		return &workerSlot{n: n, lock: f}, nil
	}
	return nil, fmt.Errorf("%d workers already run with the state directory %s: give this one a --state-dir of its own", maxSlots, stateDir)
}

// name is base for slot 0 and base-N for slot N: the first worker's
// names are those of a worker that shares its state directory with none.
func (s *workerSlot) name(base string) string {
	if s == nil || s.n == 0 {
		return base
	}
	return fmt.Sprintf("%s-%d", base, s.n)
}

// release gives the slot up.
func (s *workerSlot) release() {
	if s != nil && s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
}

// scope is the Docker scope of the slot: name(base), base cut so that
// the whole stays within a scope's 32 characters.
func (s *workerSlot) scope(base string) string {
	if s == nil || s.n == 0 {
		return base
	}
	suffix := fmt.Sprintf("-%d", s.n)
	if len(base)+len(suffix) > 32 {
		base = base[:32-len(suffix)]
	}
	return base + suffix
}

// hostQueue is the task queue of this worker's host: --sandbox-queue, or
// one named after the host and the state directory, whose sandboxes are
// this worker's alone; a second worker on the state directory at once
// has a queue of its own (workerSlot).
func (w *workerFlags) hostQueue(tf *temporalFlags) (string, error) {
	if w.queue != "" {
		return w.slot.name(w.queue), nil
	}
	state, err := filepath.Abs(tf.stateDir)
	if err != nil {
		return "", err
	}
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host + "\x00" + state))
	return w.slot.name(fmt.Sprintf("%s/host/%s-%x", workflow.TaskQueue, host, sum[:6])), nil
}
