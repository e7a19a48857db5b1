package agent

import (
	"fmt"
	"time"
)

// diskGuard stops a command once the file system holding the workspace
// has less than reserve bytes free: work that fills the disk (many files,
// each under the jail's file size bound) fails its task before it fills
// the worker's state and everything else on that disk.
type diskGuard struct {
	path    string
	reserve uint64
	free    func(path string) (uint64, error)
}

// diskCheckEvery is how often a running command's disk is checked: a
// statfs, microseconds.
const diskCheckEvery = 200 * time.Millisecond

// disk is the guard of r's commands; nil when the worker keeps no reserve.
func (r *runner) disk() *diskGuard {
	if r.o.Isolation == nil || r.o.Isolation.DiskReserve <= 0 {
		return nil
	}
	return &diskGuard{path: r.ws, reserve: uint64(r.o.Isolation.DiskReserve), free: freeBytes}
}

// low returns an error saying so when less than the reserve is free; a
// file system that cannot be asked is not low.
func (g *diskGuard) low() error {
	free, err := g.free(g.path)
	if err != nil || free >= g.reserve {
		return nil
	}
	return &diskLowError{free: free, reserve: g.reserve}
}

// diskLowError is a command stopped by its diskGuard.
type diskLowError struct{ free, reserve uint64 }

func (e *diskLowError) Error() string {
	return fmt.Sprintf("stopped: the disk holding the sandbox has %s free, less than the %s the worker keeps free (--sandbox-disk-reserve)",
		mib(e.free), mib(e.reserve))
}

func mib(n uint64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
