// Package seccomp is the seccomp profile of sandboxes whose agent jails
// the work (package jail): the container runtime's default profile (moby's,
// which Docker applies and containerd's is derived from) plus the system
// calls the jail makes without capabilities to build user, mount, PID and
// network namespaces and a new root. The Docker provider gives it to every
// sandbox container; deploy/components/seccomp installs it on a cluster's
// nodes as a Localhost profile for sandbox pods.
//
// seccomp imports moby's profiles and the standard library.
package seccomp

import (
	"encoding/json"
	"fmt"

	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// JailSyscalls are the system calls the runtime's default profile allows
// only with CAP_SYS_ADMIN and the jail needs without it.
var JailSyscalls = []string{"clone", "unshare", "mount", "umount2", "mount_setattr", "pivot_root", "setns"}

// Profile is the sandboxes' profile, in the runtime's (moby's) JSON
// format, which Docker's seccomp= option and containerd's and CRI-O's
// Localhost profiles read.
func Profile() ([]byte, error) {
	profile := seccomp.DefaultProfile()
	profile.Syscalls = append(profile.Syscalls, &seccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{
			Names:  JailSyscalls,
			Action: specs.ActAllow,
		},
		Comment: "fleetlift: the agent's jail (package jail) makes user, mount, PID and network namespaces without capabilities",
	})
	data, err := json.MarshalIndent(profile, "", "\t")
	if err != nil {
		return nil, fmt.Errorf("encode seccomp profile: %w", err)
	}
	return append(data, '\n'), nil
}
