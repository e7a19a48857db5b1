// Package shim is what a sandbox provider runs inside a sandbox it reaches
// only through an exec API (Kubernetes' pods/exec): small commands of
// fleetlift-agent that make that API as safe and exact as the local and
// Docker providers' own:
//
//   - install DIR copies the running fleetlift-agent into DIR (an init
//     container of the agent image fills the pod's agent volume with it,
//     so any tool image can run the agent without a cp);
//   - idle waits for SIGTERM (the exec container's main process);
//   - exec runs one command: in a directory confined to the workspace
//     (absolute paths, ".." and symbolic links that lead out are
//     refused), with exactly the environment it is given (plus PATH and
//     HOME), in its own process group that is killed on timeout and when
//     the exec stream that started it goes away (its standard input
//     closes), with standard input from a file uploaded before;
//   - file get and file put read and write files confined to the
//     workspace (through os.Root): reads in ranges, base64-encoded when
//     the result travels in a JSON status; writes uploaded in chunks to a
//     scratch directory outside the workspace, then renamed into place,
//     so a reader never sees half a file and a failed upload leaves
//     nothing behind.
//
// Exit codes are those of the command, or the Exit* constants.
//
// shim imports only the standard library and golang.org/x/sys.
package shim
