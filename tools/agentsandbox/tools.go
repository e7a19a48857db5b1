//go:build tools

// Package agentsandbox pins the command build.sh compiles, so that go mod
// tidy keeps its requirements.
package agentsandbox

import _ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
