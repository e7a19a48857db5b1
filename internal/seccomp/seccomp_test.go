//go:build linux

// moby's default profile, which the built-in one is made from, is Go
// code for Linux only.

package seccomp_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"slices"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/fleetlift/fleetlift/internal/seccomp"
)

var update = flag.Bool("update", false, "rewrite the profile built in, and the one deploy/ ships")

// The profile built in, which Docker sandboxes run with, and the ones
// shipped to the cluster's nodes: as a file the installer DaemonSet
// copies, and as the Security Profiles Operator's SeccompProfile.
const (
	builtIn  = "fleetlift-jail.json"
	shipped  = "../../deploy/components/seccomp/fleetlift-jail.json"
	operator = "../../deploy/components/seccomp-operator/fleetlift-jail.yaml"
)

// build makes the profile: moby's default, and the jail's system calls
// allowed without a capability.
func build(t *testing.T) []byte {
	t.Helper()
	p := mobyseccomp.DefaultProfile()
	p.Syscalls = append(p.Syscalls, &mobyseccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{
			Names:  seccomp.JailSyscalls,
			Action: specs.ActAllow,
		},
		Comment: "fleetlift: the agent's jail (package jail) makes user, mount, PID and network namespaces without capabilities",
	})
	data, err := json.MarshalIndent(p, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// The profile built in, which Docker sandboxes run with, is moby's
// default with the jail's system calls; the cluster's nodes get it
// flattened for a sandbox pod (see podProfile): go test
// ./internal/seccomp -update rewrites all three.
func TestProfilesAreCurrent(t *testing.T) {
	want := build(t)
	pod := podProfile(t, want)
	for f, want := range map[string][]byte{builtIn: want, shipped: pod, operator: operatorProfile(t, pod)} {
		if *update {
			if err := os.WriteFile(f, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go test ./internal/seccomp -update", f)
		}
	}
	if *update {
		t.Log("the built-in profile changed: build again for it to take effect")
	}
	got, err := seccomp.Profile()
	if err != nil || !bytes.Equal(got, want) && !*update {
		t.Errorf("Profile() is not the built-in profile (%v)", err)
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
