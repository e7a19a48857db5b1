// Command run measures a deterministic change across many local
// repositories: fleetlift (embedded Temporal, a worker, local sandboxes,
// the local forge) against a plain shell loop doing clone + change +
// commit + push at the same parallelism, in the same run.
//
//	go run ./bench/run -repos 200 -parallel 8
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func main() {
	// The bench binary is also the agent its sandboxes run.
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		cmd := agentcmd.NewAgentCommand()
		cmd.SetArgs(os.Args[2:])
		if err := cmd.Execute(); err != nil {
			os.Exit(1)
		}
		return
	}
	repos := flag.Int("repos", 200, "repositories")
	parallel := flag.Int("parallel", 8, "repositories worked on at once, by both")
	poll := flag.Duration("poll", 0, "how often the worker reads an agent's status (0: fleetlift's default)")
	agentBin := flag.String("agent", "", "the agent binary sandboxes run (default: this binary's agent command)")
	flag.Parse()
	if err := run(*repos, *parallel, *poll, *agentBin); err != nil {
		fmt.Fprintln(os.Stderr, "bench-run:", err)
		os.Exit(1)
	}
}

const change = `sed -i 's/^go 1.21$/go 1.26/' go.mod`

func run(n, parallel int, poll time.Duration, agentBin string) error {
	root, err := os.MkdirTemp("", "fleetlift-bench-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	bares, err := makeRepos(root, n)
	if err != nil {
		return err
	}

	baseline, err := shellLoop(root, bares, parallel)
	if err != nil {
		return err
	}
	fl, err := fleetlift(root, bares, parallel, poll, agentBin)
	if err != nil {
		return err
	}
	for _, b := range bares {
		out, err := exec.Command("git", "-C", b, "show", "auto/bench/bench:go.mod").Output()
		if err != nil || !strings.Contains(string(out), "go 1.26") {
			return fmt.Errorf("%s: fleetlift's branch is missing or unchanged", b)
		}
	}
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("bench-run: %d repositories, parallelism %d, %d CPUs\n", n, parallel, runtime.NumCPU())
	fmt.Printf("  shell loop (git clone, sed, git commit, git push): %8.1f s\n", baseline.Seconds())
	fmt.Printf("  fleetlift campaign (embedded Temporal, local sandboxes): %8.1f s\n", fl.Seconds())
	fmt.Printf("  ratio fleetlift / shell loop: %.2fx (goal <= 1.20x)\n", fl.Seconds()/baseline.Seconds())
	fmt.Printf("  peak RSS of the bench process (server, worker): %d MiB\n", ru.Maxrss>>10)
	return nil
}

func makeRepos(root string, n int) ([]string, error) {
	script := `set -e
mkdir -p src
for i in $(seq 0 $(($N-1))); do
  d=src/svc-$i
  git init -q -b main $d
  printf 'module example.com/svc-%s\n\ngo 1.21\n' $i > $d/go.mod
  git -C $d add go.mod
  git -C $d -c user.email=b@example.com -c user.name=bench commit -qm init
  git clone -q --bare $d svc-$i.git
done`
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), fmt.Sprintf("N=%d", n))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("make repositories: %v\n%s", err, out)
	}
	var bares []string
	for i := range n {
		bares = append(bares, filepath.Join(root, fmt.Sprintf("svc-%d.git", i)))
	}
	return bares, nil
}

// shellLoop is what a person would script: clone, change, commit, push,
// with xargs -P for parallelism.
func shellLoop(root string, bares []string, parallel int) (time.Duration, error) {
	work := filepath.Join(root, "shell")
	script := `set -e
d=$(mktemp -d -p "$WORK")
git clone -q "file://$1" "$d/r"
cd "$d/r"
` + change + `
git -c user.email=b@example.com -c user.name=bench commit -qam "Bump go"
git push -q origin HEAD:refs/heads/baseline/bench`
	if err := os.MkdirAll(work, 0o755); err != nil {
		return 0, err
	}
	cmd := exec.Command("xargs", "-P", fmt.Sprint(parallel), "-n", "1", "sh", "-c", script, "sh")
	cmd.Stdin = strings.NewReader(strings.Join(bares, "\n"))
	cmd.Env = append(os.Environ(), "WORK="+work)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("shell loop: %v\n%s", err, out)
	}
	return time.Since(start), nil
}

func fleetlift(root string, bares []string, parallel int, poll time.Duration, agentBin string) (time.Duration, error) {
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(root, "temporal.db")})
	if err != nil {
		return 0, err
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	agent := []string{agentBin}
	if agentBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return 0, err
		}
		agent = []string{exe, "agent"}
	}
	p, err := local.New(local.Options{Root: filepath.Join(root, "sandboxes"), AgentCommand: agent})
	if err != nil {
		return 0, err
	}
	w := worker.New(c, workflow.TaskQueue, worker.Options{MaxConcurrentActivityExecutionSize: 4 * parallel})
	w.RegisterWorkflow(workflow.Task)
	w.RegisterWorkflow(workflow.Campaign)
	w.RegisterActivity(&activity.Activities{Sandbox: p, PollInterval: poll})
	if err := w.Start(); err != nil {
		return 0, err
	}
	defer w.Stop()

	in := workflow.CampaignInput{
		ID: "bench", BatchSize: len(bares), MaxParallel: parallel, ThresholdPercent: 100,
		Template: workflow.TaskInput{Timeout: 10 * time.Minute, Manifest: protocol.Manifest{
			Mode: protocol.ModeTransform, Title: "Bump go", TimeoutSeconds: 600,
			Execution:   protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", change}},
			PullRequest: &protocol.PullRequest{BranchPrefix: "auto/bench", Title: "Bump go"},
			GitConfig:   protocol.GitConfig{UserEmail: "b@example.com", UserName: "bench", CloneDepth: 1},
			Forge:       "local",
		}},
	}
	for i, b := range bares {
		name := fmt.Sprintf("svc-%d", i)
		in.Units = append(in.Units, workflow.Unit{Key: name, Repositories: []protocol.Repository{{URL: "file://" + b, Branch: "main", Name: name}}})
	}
	start := time.Now()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "campaign/bench", TaskQueue: workflow.TaskQueue}, workflow.Campaign, in)
	if err != nil {
		return 0, err
	}
	var st workflow.CampaignState
	if err := run.Get(context.Background(), &st); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if st.Summary.Completed != len(bares) {
		return 0, fmt.Errorf("fleetlift completed %d of %d: %+v", st.Summary.Completed, len(bares), st.Units[0])
	}
	return took, nil
}
