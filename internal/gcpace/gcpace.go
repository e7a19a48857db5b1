// Package gcpace sets how fleetlift's processes collect garbage.
//
// Set gives fleetlift's commands their GC percent: they are short-lived
// and allocation-heavy (CUE evaluation, starting the embedded server),
// and collect less often at a higher percent. main calls Set once it
// knows it runs one of those commands; the hidden jail and the spec
// worker that the same binary serves do not, and run at the percent the
// program started with (GOGC's, or 100).
//
// LimitMemory gives a long-running process in a container (a worker, a
// reconciler, the controller) a soft memory limit below its container's,
// so that the runtime collects harder before the kernel kills it.
package gcpace

import (
	"math"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Percent is the GC percent Set gives the program.
const Percent = 400

// Set sets the program's GC percent to Percent and returns the one it
// had.
func Set() (before int) { return debug.SetGCPercent(Percent) }

// MemoryRatio is the share of the cgroup's memory limit LimitMemory
// gives the Go runtime: the rest is for what the runtime does not count
// (git and the other processes a worker starts in its container, cgo).
const MemoryRatio = 0.9

// LimitMemory sets the Go runtime's soft memory limit (GOMEMLIMIT) to
// MemoryRatio of the memory limit of the process's cgroup, as in a
// container with a memory limit. GOMEMLIMIT, when set, wins; so does
// AUTOMEMLIMIT: off, or another ratio in (0, 1]. It returns the limit in
// force, and limited false when there is none (no cgroup limit, or the
// cgroup could not be read: err says why).
func LimitMemory() (limit int64, limited bool, err error) {
	limit, err = memlimit.Set(memlimit.WithRatio(MemoryRatio))
	return limit, limit > 0 && limit < math.MaxInt64, err
}
