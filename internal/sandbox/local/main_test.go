package local

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
)

// TestMain lets the test binary be fleetlift's agent, as the fleetlift
// binary is with its hidden agent command: `<exe> agent serve|jail ...`,
// and a stand-in agent CLI that calls its model (`<exe> model-cli`).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "model-cli" {
		os.Exit(modelCLI())
	}
	if code, ok := agentcmd.RunAgent(os.Args[1:]); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// modelCLI calls the Messages API at $ANTHROPIC_BASE_URL with
// $ANTHROPIC_API_KEY $MODEL_CALLS times, and writes to MODEL_CALL.txt
// the status of each call and its whole environment; it fails at the
// first call that does.
func modelCLI() int {
	calls, _ := strconv.Atoi(os.Getenv("MODEL_CALLS"))
	var out strings.Builder
	env := os.Environ()
	sort.Strings(env)
	fmt.Fprintf(&out, "environment:\n%s\n", strings.Join(env, "\n"))
	code := 0
	for i := 0; i < calls; i++ {
		req, err := http.NewRequest(http.MethodPost, os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages",
			strings.NewReader(`{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			fmt.Fprintf(&out, "call %d: %v\n", i, err)
			code = 1
			break
		}
		req.Header.Set("X-Api-Key", os.Getenv("ANTHROPIC_API_KEY"))
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Fprintf(&out, "call %d: %v\n", i, err)
			code = 1
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&out, "call %d: status %d\n", i, resp.StatusCode)
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "model call failed: %s\n", body)
			code = 1
			break
		}
	}
	_ = os.WriteFile("MODEL_CALL.txt", []byte(out.String()), 0o644)
	return code
}
