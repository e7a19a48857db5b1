// Package kube holds the worker's Kubernetes sandbox providers. Both run
// every sandbox in the pod jobspec builds (the agent in the task's image,
// credentials by secretKeyRef into the agent's container only, exec in a
// second container, which outlives the agent, through the agent's shim) and speak the agent's file protocol
// through exec: CopyTo uploads base64 chunks and renames the file into
// place, CopyFrom reads base64 ranges, both confined to the workspace by
// the shim.
//
//   - Requests ("kubernetes", the default): the worker creates
//     SandboxRequests and appends exec requests to them, nothing else;
//     the controller (internal/controller) makes the Job, checks its
//     policy and runs the exec requests. The worker's Role is
//     sandboxrequests alone (seed 001).
//   - Jobs ("kubernetes-jobs"): the worker makes the Jobs and execs into
//     the pods itself (seed 000), for clusters without the controller. Its
//     Role must allow Jobs, pods and pods/exec; anyone who may create pods
//     in a namespace may read its Secrets through them, so give it a
//     namespace of its own.
//
// ProvisionOptions.Secrets are never sent anywhere: each names a variable
// whose value a Kubernetes Secret holds (SecretRefs); a secret without a
// reference fails Provision. Exec's Stdin and per-command Env travel as
// an upload and as arguments of the shim. Command output that is not UTF-8
// does not survive a SandboxRequest's JSON status; files do (base64).
//
// kube imports package sandbox, the API, jobspec, podexec, controller-runtime's
// client and client-go; never another provider, the controller or
// package sandboxtest outside its tests.
package kube
