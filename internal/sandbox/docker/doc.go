// Package docker is the sandbox.Provider that runs each sandbox as a
// container on a Docker engine, through the Engine API (the maintained
// github.com/moby/moby/client, negotiating down to API 1.41, Debian's
// Docker 20.10).
//
// A sandbox is the container fleetlift-<scope>-<id> with two named volumes,
// its workspace (/workspace) and its home (/home/agent). The container runs
// the task's image with fleetlift-agent injected: the agent binary comes
// from the agent image (FROM scratch, only /fleetlift-agent), copied once
// per engine into a read-only volume mounted at /opt/fleetlift, so any tool
// image with git and sh can run the work. The agent is the container's
// PID 1, serving /workspace.
//
// What it guarantees:
//
//   - the agent and every command run as uid 1000 with no capability,
//     no_new_privs, Docker's default seccomp profile plus the system calls
//     the agent's jail needs (clone, unshare, mount, umount2,
//     mount_setattr, pivot_root, setns), limits on memory, CPU and
//     processes, the network the provider was given (none by default), and
//     optionally a read-only root file system;
//   - ProvisionOptions.Env is the agent's and every Exec'd command's
//     environment, besides the image's own variables, PATH and HOME;
//     ProvisionOptions.Secrets reach the agent alone: Exec'd commands run
//     with the secrets removed from their environment and in a group of
//     their own (gid 1001), which the kernel's ptrace check keeps out of
//     the agent's /proc/1/environ;
//   - the worker's file operations (CopyTo, CopyFrom, Exec's WorkingDir)
//     stay inside /workspace, refusing absolute paths, ".." and symbolic
//     links that lead out; CopyTo replaces files atomically (a temporary
//     name renamed inside the container); CopyFrom reads through the
//     archive endpoint, or straight from the workspace volume when the
//     engine is on this host and its volume is readable here (about 40 ms
//     against a few microseconds, for a file the worker polls);
//   - Provision is idempotent by the container's name, and a restarted
//     worker finds its sandboxes again by name and labels; everything it
//     needs is in the container's labels (fleetlift.io/sandbox,
//     fleetlift.io/scope, fleetlift.io/task-id, ...), so providers of two
//     scopes (two worker hosts, HostScope names one after its host) on
//     one engine never see each other's sandboxes;
//   - Cleanup stops the container (SIGTERM, then SIGKILL after the grace
//     period) and removes it and its volumes.
//
// docker imports package sandbox, the Docker client and API types,
// package seccomp (the profile), and the standard library; never another provider or
// package sandboxtest outside its tests.
package docker
