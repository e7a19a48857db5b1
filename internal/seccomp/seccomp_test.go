package seccomp_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"testing"

	"github.com/fleetlift/fleetlift/internal/seccomp"
)

var update = flag.Bool("update", false, "rewrite the profile deploy/ ships")

// shipped is the profile deploy/components/seccomp installs on the nodes.
const shipped = "../../deploy/components/seccomp/fleetlift-jail.json"

// The profile the cluster's nodes get is the one Docker sandboxes run
// with: go test ./internal/seccomp -update rewrites it.
func TestShippedProfileIsCurrent(t *testing.T) {
	want, err := seccomp.Profile()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(shipped, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run go test ./internal/seccomp -update", shipped)
	}
}

// rule is one entry of a profile's syscalls.
type rule struct {
	Names    []string        `json:"names"`
	Action   string          `json:"action"`
	Includes json.RawMessage `json:"includes"`
	Args     json.RawMessage `json:"args"`
}

// The profile refuses what it does not name and allows the jail's
// system calls without a capability, beside the default's.
func TestProfileAllowsTheJail(t *testing.T) {
	data, err := seccomp.Profile()
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		DefaultAction string `json:"defaultAction"`
		Syscalls      []rule `json:"syscalls"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	if p.DefaultAction != "SCMP_ACT_ERRNO" {
		t.Errorf("default action %s, want SCMP_ACT_ERRNO", p.DefaultAction)
	}
	for _, name := range seccomp.JailSyscalls {
		unconditional := slices.ContainsFunc(p.Syscalls, func(s rule) bool {
			return slices.Contains(s.Names, name) && s.Action == "SCMP_ACT_ALLOW" &&
				(len(s.Includes) == 0 || string(s.Includes) == "{}") && (len(s.Args) == 0 || string(s.Args) == "null")
		})
		if !unconditional {
			t.Errorf("%s is not allowed without a capability", name)
		}
	}
	// Still refused: loading kernel modules, rebooting, kexec.
	for _, name := range []string{"init_module", "reboot", "kexec_load"} {
		for _, s := range p.Syscalls {
			if slices.Contains(s.Names, name) && s.Action == "SCMP_ACT_ALLOW" && (len(s.Includes) == 0 || string(s.Includes) == "{}") {
				t.Errorf("%s is allowed without a capability", name)
			}
		}
	}
}
