//go:build linux

package seccomp_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"sigs.k8s.io/yaml"

	"github.com/fleetlift/fleetlift/internal/seccomp"
)

// podArches are the node architectures fleetlift's images are built for,
// by Go name, with the seccomp architectures a pod's process may use on
// each (the 32-bit ones beside the 64-bit ones, as moby's archMap says).
var podArches = []string{"amd64", "arm64"}

// nodeKernel is the oldest kernel a node is taken to run: a rule that
// moby's profile keeps for kernels from a version on holds on every node
// if that version is not newer.
var nodeKernel = mobyseccomp.KernelVersion{Kernel: 5, Major: 4}

// flatten resolves moby's profile for a process without capabilities on
// any of arches, as Docker does for one architecture when it starts a
// container: a Localhost profile on a node is read as the OCI runtime
// spec's LinuxSeccomp (containerd unmarshals the file as that), which has
// no conditions, so an unflattened profile would allow there every
// system call moby's allows only with a capability.
//
// A rule kept for only some of arches must name system calls and nothing
// else (an architecture resolves only the names it has); one with
// arguments, or a kernel condition newer than nodeKernel, is an error.
func flatten(p *mobyseccomp.Seccomp, arches []string) (*specs.LinuxSeccomp, error) {
	out := &specs.LinuxSeccomp{DefaultAction: p.DefaultAction, DefaultErrnoRet: p.DefaultErrnoRet}
	for _, arch := range arches {
		seccompArch, ok := map[string]specs.Arch{"amd64": specs.ArchX86_64, "arm64": specs.ArchAARCH64}[arch]
		i := slices.IndexFunc(p.ArchMap, func(a mobyseccomp.Architecture) bool { return a.Arch == seccompArch })
		if !ok || i < 0 {
			return nil, fmt.Errorf("no architecture %s in the profile's archMap", arch)
		}
		out.Architectures = append(out.Architectures, p.ArchMap[i].Arch)
		out.Architectures = append(out.Architectures, p.ArchMap[i].SubArches...)
	}
	for _, r := range p.Syscalls {
		if r.Name != "" {
			return nil, fmt.Errorf("rule %v: the deprecated name field", r.Names)
		}
		var on []string
		for _, arch := range arches {
			if applies(r, arch) {
				on = append(on, arch)
			}
		}
		if len(on) == 0 {
			continue
		}
		if len(on) < len(arches) && len(r.Args) > 0 {
			return nil, fmt.Errorf("rule %v: arguments on %v alone", r.Names, on)
		}
		for _, f := range []*mobyseccomp.Filter{r.Includes, r.Excludes} {
			if f != nil && f.MinKernel != nil && (f.MinKernel.Kernel > nodeKernel.Kernel || f.MinKernel.Kernel == nodeKernel.Kernel && f.MinKernel.Major > nodeKernel.Major) {
				return nil, fmt.Errorf("rule %v: minimum kernel %s, newer than the %s taken for a node", r.Names, f.MinKernel, &nodeKernel)
			}
		}
		if r.Excludes != nil && r.Excludes.MinKernel != nil {
			continue
		}
		out.Syscalls = append(out.Syscalls, r.LinuxSyscall)
	}
	return out, nil
}

// applies reports whether rule r holds for a process without capabilities
// on arch, kernel conditions aside.
func applies(r *mobyseccomp.Syscall, arch string) bool {
	if f := r.Includes; f != nil && (len(f.Caps) > 0 || len(f.Arches) > 0 && !slices.Contains(f.Arches, arch)) {
		return false
	}
	if f := r.Excludes; f != nil && slices.Contains(f.Arches, arch) {
		return false
	}
	return true
}

// podProfile is the profile the cluster's nodes get: built (moby's
// format) flattened for a sandbox pod, which runs without capabilities,
// on amd64 and arm64 nodes.
func podProfile(t *testing.T, built []byte) []byte {
	t.Helper()
	var p mobyseccomp.Seccomp
	if err := json.Unmarshal(built, &p); err != nil {
		t.Fatal(err)
	}
	flat, err := flatten(&p, podArches)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.MarshalIndent(flat, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// operatorProfile is pod, the flattened profile, as the Security Profiles
// Operator's SeccompProfile, which its daemon writes on every node as
// operator/<namespace>/<name>.json under the kubelet's seccomp directory.
// The resource has no defaultErrnoRet: runc then answers EPERM, which
// is what moby's says, and anything else is an error.
func operatorProfile(t *testing.T, pod []byte) []byte {
	t.Helper()
	var flat specs.LinuxSeccomp
	if err := json.Unmarshal(pod, &flat); err != nil {
		t.Fatal(err)
	}
	if flat.DefaultErrnoRet == nil || *flat.DefaultErrnoRet != 1 || len(flat.Flags) > 0 || flat.ListenerPath != "" {
		t.Fatalf("the profile's default errno, flags or listener have no place in a SeccompProfile: %+v", flat)
	}
	flat.DefaultErrnoRet = nil
	obj := map[string]any{
		"apiVersion": "security-profiles-operator.x-k8s.io/v1beta1",
		"kind":       "SeccompProfile",
		"metadata": map[string]any{
			// The namespace sandbox pods run in (deploy/base/kubernetes):
			// the profile lands at operator/sandbox-isolated/fleetlift-jail.json.
			"name":      "fleetlift-jail",
			"namespace": "sandbox-isolated",
			"labels":    map[string]any{"app.kubernetes.io/name": "fleetlift", "app.kubernetes.io/component": "seccomp"},
		},
		"spec": flat,
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("# Generated by go test ./internal/seccomp -update from\n# components/seccomp/fleetlift-jail.json: do not edit.\n"), data...)
}

// On this machine's architecture, the flattening keeps exactly the rules
// Docker applies to a container without capabilities: moby's own
// resolution of the profile.
func TestFlattenResolvesAsDockerDoes(t *testing.T) {
	built := build(t)
	var p mobyseccomp.Seccomp
	if err := json.Unmarshal(built, &p); err != nil {
		t.Fatal(err)
	}
	flat, err := flatten(&p, []string{runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	docker, err := mobyseccomp.LoadProfile(string(built), &specs.Spec{Process: &specs.Process{Capabilities: &specs.LinuxCapabilities{}}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(flat)
	want, _ := json.Marshal(docker)
	if string(got) != string(want) {
		t.Errorf("flattened for %s:\n%s\nmoby resolves it, without capabilities, as:\n%s", runtime.GOARCH, got, want)
	}
}

// The flattened profile allows no system call moby's allows only with a
// capability, unless the jail needs it, and keeps what it allows without.
func TestPodProfileHasNoCapabilityRules(t *testing.T) {
	built := build(t)
	var p mobyseccomp.Seccomp
	if err := json.Unmarshal(built, &p); err != nil {
		t.Fatal(err)
	}
	var flat specs.LinuxSeccomp
	if err := json.Unmarshal(podProfile(t, built), &flat); err != nil {
		t.Fatal(err)
	}
	allowed := func(name string) bool {
		return slices.ContainsFunc(flat.Syscalls, func(s specs.LinuxSyscall) bool {
			return slices.Contains(s.Names, name) && s.Action == specs.ActAllow && len(s.Args) == 0
		})
	}
	for _, name := range []string{"kcmp", "bpf", "perf_event_open", "syslog", "init_module", "reboot", "open_by_handle_at", "fanotify_init"} {
		if allowed(name) {
			t.Errorf("%s is allowed to a pod without capabilities", name)
		}
	}
	for _, name := range append([]string{"read", "arch_prctl", "ptrace"}, seccomp.JailSyscalls...) {
		if !allowed(name) {
			t.Errorf("%s is not allowed", name)
		}
	}
	if want := []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32, specs.ArchAARCH64, specs.ArchARM}; !slices.Equal(flat.Architectures, want) {
		t.Errorf("architectures %v, want %v", flat.Architectures, want)
	}
}
