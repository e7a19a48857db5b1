// Package jobspec builds the pod every Kubernetes sandbox runs in, and the
// Job that runs it: one builder for the controller (which makes Jobs for
// SandboxRequests), the kubernetes-jobs provider (which makes them
// itself, seed 000) and the SandboxTemplates of the agent-sandbox backend.
// It also reads a pod's state back: Classify maps pod and Job status to a
// sandbox phase, with seed 004's failure classification.
//
// The pod (seed 001's Job specification, restricted pod security):
//
//   - no service account token (automountServiceAccountToken: false) and a
//     service account with no bindings; no service links;
//   - runAsNonRoot as uid and gid 1000 with fsGroup 1000, seccomp
//     RuntimeDefault, every capability dropped, no privilege escalation,
//     a read-only root file system;
//   - an init container from the agent image (FROM scratch) runs
//     `fleetlift-agent install /fleetlift/bin`: the agent copies itself
//     into an emptyDir, so any tool image runs it (an image volume would
//     need containerd 2.1 or CRI-O 1.31 on the nodes; the copy works on
//     every runtime);
//   - the container "sandbox" runs the task's image with
//     `fleetlift-agent entrypoint -- serve --workspace /workspace`. The
//     entrypoint starts as uid 1000, not root (runAsNonRoot): it cannot
//     and need not switch users or give /workspace away. The workspace,
//     the agent's home (/home/agent) and /tmp are emptyDirs that the
//     kubelet makes group-owned by fsGroup 1000, group-writable and
//     set-group-ID, so the agent writes them without any capability;
//   - credentials reach that container alone, as secretKeyRef variables;
//   - the container "exec", a second regular container, runs the same
//     image idle, sharing the workspace and home. It outlives the agent
//     (a native sidecar would be stopped when the agent exits), so the
//     worker can still read the files the agent left; the pod ends when
//     the worker cleans up, at the Job's deadline or the request's TTL.
//     Exec requests run there
//     through the shim (ExecArgv), never in the agent's container: a
//     command run for the worker cannot see the agent's processes or its
//     environment, where the credentials are.
//
// It sits beside the API rather than under the provider or the
// controller: both import it, and neither imports the other.
//
// jobspec imports the Kubernetes API types and fleetlift's API; never a
// client, a sandbox provider or the controller.
package jobspec
