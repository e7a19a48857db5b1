// Package gateway is the sandboxes' gateway to what needs a credential:
// the only way an agent CLI in a sandbox reaches its model, and the only
// holder of the model's API key; and the way a sandbox's agent clones the
// repositories of its task from the forge (GitReads), reads only, with
// the forge's token added on the trusted side.
//
// The gateway runs on the trusted side (the worker) and speaks the
// Anthropic Messages API. Each sandbox gets a key of its own (Open) that
// is worth nothing anywhere else: the gateway takes it off every request,
// adds the real key, forwards the request upstream, and counts the tokens
// the model's responses report (JSON and server-sent events alike) against
// that sandbox. Once a sandbox's count reaches its limit (a task's
// limits.max_tokens) the gateway refuses its requests, saying why, so the
// bound holds for any agent CLI. Other agent CLIs that speak an
// OpenAI-compatible API are not served yet.
//
// The same key lets the agent read, and only read (git-upload-pack), the
// repositories its task's manifest names, at GitPrefix + name: the
// gateway adds the worker's credential for the forge and forwards the
// request there, so that the token that could push is never in a
// sandbox.
//
// gateway imports only the standard library and the agent's protocol
// types.
package gateway
