package docker

import (
	"testing"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

func TestResources(t *testing.T) {
	for _, c := range []struct {
		name      string
		in        sandbox.Resources
		memory    int64
		nanoCPUs  int64
		wantError bool
	}{
		{name: "none", in: sandbox.Resources{}},
		{name: "binary memory", in: sandbox.Resources{Memory: "512Mi"}, memory: 512 << 20},
		{name: "decimal memory", in: sandbox.Resources{Memory: "1G"}, memory: 1e9},
		{name: "plain bytes", in: sandbox.Resources{Memory: "67108864"}, memory: 64 << 20},
		{name: "whole cpus", in: sandbox.Resources{CPU: "2"}, nanoCPUs: 2e9},
		{name: "fractional cpus", in: sandbox.Resources{CPU: "0.5"}, nanoCPUs: 5e8},
		{name: "millicpus", in: sandbox.Resources{CPU: "250m"}, nanoCPUs: 25e7},
		{name: "both", in: sandbox.Resources{Memory: "4Gi", CPU: "1"}, memory: 4 << 30, nanoCPUs: 1e9},
		{name: "memory below the engine's minimum", in: sandbox.Resources{Memory: "1Mi"}, wantError: true},
		{name: "memory not a number", in: sandbox.Resources{Memory: "lots"}, wantError: true},
		{name: "negative memory", in: sandbox.Resources{Memory: "-1Gi"}, wantError: true},
		{name: "zero cpus", in: sandbox.Resources{CPU: "0"}, wantError: true},
		{name: "cpus with a unit", in: sandbox.Resources{CPU: "2Gi"}, wantError: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := resources(c.in, 100)
			if c.wantError {
				if err == nil {
					t.Fatalf("resources(%+v) = %+v; want an error", c.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("resources(%+v): %v", c.in, err)
			}
			if got.Memory != c.memory || got.MemorySwap != c.memory || got.NanoCPUs != c.nanoCPUs || got.PidsLimit == nil || *got.PidsLimit != 100 {
				t.Errorf("resources(%+v) = memory %d, swap %d, nanoCPUs %d, pids %v; want memory and swap %d, nanoCPUs %d, pids 100",
					c.in, got.Memory, got.MemorySwap, got.NanoCPUs, got.PidsLimit, c.memory, c.nanoCPUs)
			}
		})
	}
}

func TestWorkspacePath(t *testing.T) {
	for _, c := range []struct {
		in, want string
		refused  bool
	}{
		{in: "", want: "."},
		{in: ".fleetlift/status.json", want: ".fleetlift/status.json"},
		{in: "a/../b", want: "b"},
		{in: "a/./b/", want: "a/b"},
		{in: "..", refused: true},
		{in: "../x", refused: true},
		{in: "a/../../x", refused: true},
		{in: "/etc/passwd", refused: true},
		{in: "a\\b", refused: true},
	} {
		got, err := workspacePath(c.in)
		if c.refused != (err != nil) || got != c.want {
			t.Errorf("workspacePath(%q) = %q, %v; want %q, refused %v", c.in, got, err, c.want, c.refused)
		}
	}
}
