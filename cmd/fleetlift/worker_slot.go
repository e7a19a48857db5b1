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
	// scratch holds the slot's scratch repositories (see claimSlot).
	scratch string
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
		slot := &workerSlot{n: n, lock: f}
		if err := slot.clearScratch(stateDir); err != nil {
			f.Close()
			return nil, err
		}
		return slot, nil
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

// clearScratch makes the slot's directory of scratch repositories
// (<state-dir>/scratch, scratch-N for slot N) and empties it: the git
// copies of what its sandboxes read, the repositories their changes are
// pushed from and the local forge's records, which a worker that died
// left there. Only the holder of the slot writes in it.
func (s *workerSlot) clearScratch(stateDir string) error {
	dir := filepath.Join(stateDir, s.name("scratch"))
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear the scratch repositories a stopped worker left: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("scratch repositories: %w", err)
	}
	s.scratch = dir
	return nil
}

// scratchDir is where the slot's worker makes scratch repositories;
// empty (the system's temporary directory) without a state directory.
func (s *workerSlot) scratchDir() string {
	if s == nil {
		return ""
	}
	return s.scratch
}

// release gives the slot up, with the scratch repositories its worker
// left.
func (s *workerSlot) release() {
	if s != nil && s.lock != nil {
		if s.scratch != "" {
			_ = os.RemoveAll(s.scratch)
			s.scratch = ""
		}
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
