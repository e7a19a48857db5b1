package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

var agent struct {
	once sync.Once
	path string
	err  error
}

// Agent builds a static fleetlift-agent once per test binary and returns
// its path: the agent image's content for a Kubelet. Shared.Main removes
// it when the tests end.
func Agent() (string, error) {
	agent.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			agent.err = err
			return
		}
		dir, err := os.MkdirTemp("", "kubetest-agent-")
		if err != nil {
			agent.err = err
			return
		}
		agent.path = filepath.Join(dir, "fleetlift-agent")
		cmd := exec.Command("go", "build", "-o", agent.path, "./cmd/fleetlift-agent")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agent.err = fmt.Errorf("build fleetlift-agent: %w\n%s", err, out)
		}
	})
	return agent.path, agent.err
}

// removeAgent removes what Agent built, if it did.
func removeAgent() {
	if agent.path != "" {
		_ = os.RemoveAll(filepath.Dir(agent.path))
	}
}
