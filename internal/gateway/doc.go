// Package gateway is the sandboxes' gateway to what needs a credential:
// the only way an agent CLI in a sandbox reaches its model, and the only
// holder of the model's API key; and the way a sandbox's agent clones the
// repositories of its task from the forge (GitReads), reads only, from
// copies the worker read with the forge's token.
//
// The gateway runs on the trusted side (the worker) and speaks the
// Anthropic Messages API. Each sandbox gets a key of its own (Open) that
// is worth nothing anywhere else: the gateway takes it off every request,
// adds the real key, forwards the request upstream, and counts the tokens
// the model's responses report (JSON and server-sent events alike) against
// that sandbox. Once a sandbox's count reaches its limit (a task's
// limits.max_tokens) the gateway refuses its requests, saying why, so the
// bound holds for any agent CLI. Agent CLIs that speak an
// OpenAI-compatible API reach one under OpenAIPrefix the same way
// (OpenAI): bearer keys, usage from the responses (a stream is asked to
// report it), the same budget.
//
// The same key lets the agent read, and only read (git-upload-pack), the
// repositories its task's manifest names, at GitPrefix + name: on the
// sandbox's first read of a repository the worker reads the branch and
// depth the manifest asks for from the forge, with its own token, into a
// copy of its own, and git upload-pack serves the sandbox from it. The
// token that could push is never in a sandbox, the forge is read once
// per repository, and the worker proposes the sandbox's change from the
// same copy (Copy), the base it built on already there. A sandbox's
// copies go when its key is closed.
//
// Sandboxes that reach the gateway over the network (Kubernetes pods)
// reach the worker's egress proxy through it too, with the same key
// (Egress): a connection upgraded at protocol.GatewayEgressPath is the
// proxy's, so the pods need one port of the worker and nothing else,
// and no pod without a key of this gateway's uses the proxy.
//
// Each response is priced by the model that answered it, at the
// operator's price table (Prices): a sandbox's cost counts against its
// task's limits.max_cost_per_task, and the worker's own bound, as its
// tokens count against limits.max_tokens; a call the table cannot price
// stops a sandbox that has a cost bound, since its bound could not be
// kept. TokensPerMinute holds calls while the last minute's tokens, all
// sandboxes' together, reach the operator's limit: this gateway's own
// count, or one it shares with every gateway calling as the model
// account (SharePace).
//
// gateway imports the standard library, the agent's protocol types, the
// git command wrapper and a YAML reader (for the price table).
package gateway
