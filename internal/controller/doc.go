// Package controller is the SandboxRequest controller (seeds 001 and 002):
// the only part of fleetlift that may create Jobs, exec into pods and read
// credentials' Secrets. A worker, which runs what campaign authors wrote,
// only creates SandboxRequests and appends exec requests to them.
//
// One reconcile is an ordered list of small steps (as flux's
// source-controller does it), each a function of the request and the
// cluster that says what the loop does next; the status is written in one
// place, at the end:
//
//  1. policy: a new request (Pending) is checked against Policy — allowed
//     images, the required runtime class, maximum memory and CPU, the
//     Secrets credentials may name, the variables env may set. A refusal
//     fails it (PolicyRefused), for good.
//  2. credentials: each credential's Secret must have its key (read
//     live, by name: the controller may get the Secrets the policy names
//     and no others); else the request fails (CredentialMissing) before a
//     pod waits for it.
//  3. workload: the Backend makes what runs the pod — Jobs: a Job built
//     by jobspec (owned by the request, backoffLimit 0, the request's TTL,
//     the operator's deadline); Claims: a kubernetes-sigs/agent-sandbox
//     SandboxClaim on the warm pool that serves the image, whose template
//     (Template) must give the request's credentials, since a claim can
//     add plain variables only — and the request is Provisioning. A
//     request a backend can never serve fails (BackendFailed).
//  4. pod: the pod's state, classified by jobspec.Classify, moves the
//     request to Running, Succeeded or Failed (OOMKilled,
//     DeadlineExceeded, ImagePullFailed, ApplicationError, PodFailed,
//     PodLost).
//  5. exec: requests past the processed ones run, asynchronously, in the
//     pod's exec container through the shim (Executor), also after the
//     agent exited while that container runs; a result appears
//     running (startedAt), then final (completedAt), stdout capped at
//     1 MiB and stderr at 64 KiB ("... [truncated]"), at most 100 kept,
//     results the worker consumed evicted first, so the object stays
//     within etcd's limit. A request the worker removes is cancelled. A
//     result the controller cannot know (it restarted meanwhile) says so.
//  6. expiry: a finished request is deleted ttlSecondsAfterFinished after
//     it finished.
//
// Deleting a request deletes its workload (propagation Foreground) before
// the finalizer lets it go.
//
// controller imports the API, jobspec and podexec (the pod and the exec
// it shares with the kubernetes provider), the names of the agent's
// variables (package agent), agent-sandbox's API, controller-runtime and
// client-go; never a sandbox provider or Temporal.
package controller
