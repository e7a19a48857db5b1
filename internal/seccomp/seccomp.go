// Package seccomp is the seccomp profile of sandboxes whose agent jails
// the work (package jail): the container runtime's default profile (moby's,
// which Docker applies and containerd's is derived from) plus the system
// calls the jail makes without capabilities to build user, mount, PID and
// network namespaces and a new root. The Docker provider gives it to every
// sandbox container. A cluster's nodes get it resolved for a pod without
// capabilities (a Localhost profile is read as the OCI runtime spec's,
// which has no capability conditions): deploy/components/seccomp installs
// that with a DaemonSet, deploy/components/seccomp-operator as the
// Security Profiles Operator's SeccompProfile.
//
// The profile is built into the binary (fleetlift-jail.json), so that a
// worker on any platform (Docker Desktop on macOS among them) has it:
// moby's default profile is Go code for Linux only. Its test makes it
// from moby's profile on Linux and fails when it is stale (go test
// ./internal/seccomp -update writes it, and the two deploy/ ships).
package seccomp

import (
	"bytes"
	_ "embed"
)

// JailSyscalls are the system calls the runtime's default profile allows
// only with CAP_SYS_ADMIN and the jail needs without it.
var JailSyscalls = []string{"clone", "unshare", "mount", "umount2", "mount_setattr", "pivot_root", "setns"}

//go:embed fleetlift-jail.json
var profile []byte

// Profile is the sandboxes' profile, in the runtime's (moby's) JSON
// format, which Docker's seccomp= option and containerd's and CRI-O's
// Localhost profiles read.
func Profile() ([]byte, error) {
	return bytes.Clone(profile), nil
}
