// Package local is the sandbox.Provider that runs each sandbox as processes
// on the worker's own machine: the agent is a child process in its own
// process group, working in Root/<id>/workspace with HOME at Root/<id>/home.
//
// What it guarantees: the agent and every command run through Exec see only
// the declared environment (ProvisionOptions.Env, ExecCommand.Env) plus PATH
// and HOME, never the worker's variables; the worker's own file operations
// (CopyTo, CopyFrom, Exec's WorkingDir) stay inside the workspace, refusing
// absolute paths, ".." escapes and symbolic links that lead out; Cleanup
// stops the agent and what it started; a restarted worker finds its
// sandboxes again from Root/<id>/sandbox.json.
//
// What it does not: it is no isolation boundary. The agent runs as the
// worker's user, sees the whole file system and the network, and can read
// Root/<id>/sandbox.json, which holds its declared environment. Image,
// Resources (CPU and memory) and the Kubernetes fields are ignored. Use the
// docker or kubernetes provider to confine untrusted code.
//
// local imports package sandbox and the standard library only; never
// another provider, an SDK, or package sandboxtest outside its tests.
package local
