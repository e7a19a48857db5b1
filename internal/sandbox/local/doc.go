// Package local is the sandbox.Provider that runs each sandbox as processes
// on the worker's own machine: the agent is a child process in its own
// process group, working in Root/<id>/workspace with HOME at Root/<id>/home.
//
// What it guarantees: the agent and every command run through Exec see only
// the declared environment (ProvisionOptions.Env, ExecCommand.Env) plus PATH
// and HOME, never the worker's variables; ProvisionOptions.Secrets reach the
// agent process alone and are never written to disk; the worker's own file
// operations (CopyTo, CopyFrom, Exec's WorkingDir) stay inside the
// workspace, refusing absolute paths, ".." escapes and symbolic links that
// lead out; Cleanup stops the agent and what it started; a restarted worker
// finds its sandboxes again from Root/<id>/sandbox.json.
//
// The agent itself is trusted, and is no isolation boundary by itself: it
// runs as the worker's user and sees the network. fleetlift-agent isolates
// the work it runs (commands, agent CLIs, setup and verifiers) with Linux
// namespaces (package jail): give it Options.ServeArgs such as
// "--hide <state dir>" so that nothing of the worker's state shows;
// HomeView says what of the worker's home to hide and to show. Image,
// Resources (CPU and memory) and the Kubernetes fields are ignored.
//
// With Options.ReuseAgents an agent that finished a sandbox serves the
// next one provisioned with the same environment (see reuse.go): one
// agent for a run of short units instead of one start and exit each.
//
// local imports package sandbox, the agent's protocol and the standard
// library only; never another provider, an SDK, or package sandboxtest
// outside its tests.
package local
