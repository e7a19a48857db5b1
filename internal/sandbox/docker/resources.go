package docker

import (
	"fmt"

	"github.com/moby/moby/api/types/container"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// resources turns a sandbox's limits, written as Kubernetes quantities
// ("512Mi", "4Gi", "2", "500m"), into the container's. Memory is also the
// memory+swap limit: a sandbox never swaps.
func resources(r sandbox.Resources, pids int64) (container.Resources, error) {
	out := container.Resources{PidsLimit: &pids}
	if r.Memory != "" {
		mem, err := parseMemory(r.Memory)
		if err != nil {
			return out, fmt.Errorf("memory limit %q: %w", r.Memory, err)
		}
		out.Memory, out.MemorySwap = mem, mem
	}
	if r.CPU != "" {
		nano, err := parseCPU(r.CPU)
		if err != nil {
			return out, fmt.Errorf("cpu limit %q: %w", r.CPU, err)
		}
		out.NanoCPUs = nano
	}
	return out, nil
}

// minMemory is the engine's lower bound on a memory limit.
const minMemory = 6 << 20

// parseMemory is sandbox.ParseMemory, within the engine's minimum.
func parseMemory(s string) (int64, error) {
	bytes, err := sandbox.ParseMemory(s)
	if err != nil {
		return 0, err
	}
	if bytes < minMemory {
		return 0, fmt.Errorf("below the engine's minimum of 6Mi")
	}
	return bytes, nil
}

// parseCPU is sandbox.ParseCPU.
func parseCPU(s string) (int64, error) { return sandbox.ParseCPU(s) }
