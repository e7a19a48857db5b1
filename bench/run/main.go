// Command run measures a deterministic change across many local
// repositories: fleetlift (embedded Temporal, a worker, local sandboxes,
// the local forge) against a plain shell loop doing clone + change +
// commit + push at the same parallelism, in the same run.
//
//	go run ./bench/run -repos 200 -parallel 8
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
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
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the bench process (server, worker) during the fleetlift run to this file")
	phases := flag.Bool("phases", false, "print where each unit's time went, from the workflow histories")
	batch := flag.Int("batch", 0, "the campaign's batch_size (0: one batch of all; the shell loop has no batches)")
	rounds := flag.Int("rounds", 1, "run both this many times, on fresh repositories, and report the round with the median ratio (for a busy machine)")
	flag.Parse()
	if err := run(*repos, *parallel, *batch, *rounds, *poll, *agentBin, *cpuProfile, *phases); err != nil {
		fmt.Fprintln(os.Stderr, "bench-run:", err)
		os.Exit(1)
	}
}

const change = `sed -i 's/^go 1.21$/go 1.26/' go.mod`

func run(n, parallel, batch, rounds int, poll time.Duration, agentBin, cpuProfile string, phases bool) error {
	root, err := os.MkdirTemp("", "fleetlift-bench-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	var results []round
	for i := range max(rounds, 1) {
		// Fresh repositories each round, so that every round does the
		// same work; the shell loop and fleetlift run back to back, so
		// that both see the same load on the machine.
		dir := filepath.Join(root, fmt.Sprintf("round-%d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		bares, err := makeRepos(dir, n)
		if err != nil {
			return err
		}
		c0 := cpuNow()
		baseline, err := shellLoop(dir, bares, parallel)
		if err != nil {
			return err
		}
		c1 := cpuNow()
		fl, err := fleetlift(dir, bares, parallel, batch, poll, agentBin, cpuProfile, phases)
		if err != nil {
			return err
		}
		c2 := cpuNow()
		for _, b := range bares {
			out, err := exec.Command("git", "-C", b, "show", "auto/bench/bench:go.mod").Output()
			if err != nil || !strings.Contains(string(out), "go 1.26") {
				return fmt.Errorf("%s: fleetlift's branch is missing or unchanged", b)
			}
		}
		r := round{shell: baseline, fleetlift: fl, shellCPU: c1.sub(c0), fleetliftCPU: c2.sub(c1)}
		results = append(results, r)
		if rounds > 1 {
			fmt.Printf("round %d: shell loop %.1f s, fleetlift %.1f s, ratio %.2fx\n", i+1, baseline.Seconds(), fl.Seconds(), r.ratio())
		}
		cpuProfile, phases = "", false // the first round's are enough
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	// The round with the median ratio stands for the run.
	slices.SortFunc(results, func(a, b round) int { return cmp.Compare(a.ratio(), b.ratio()) })
	r := results[len(results)/2]

	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("bench-run: %d repositories, parallelism %d, %d CPUs\n", n, parallel, runtime.NumCPU())
	if len(results) > 1 {
		fmt.Printf("  the round with the median ratio of %d:\n", len(results))
	}
	fmt.Printf("  shell loop (git clone, sed, git commit, git push): %8.1f s\n", r.shell.Seconds())
	fmt.Printf("  fleetlift campaign (embedded Temporal, local sandboxes): %8.1f s\n", r.fleetlift.Seconds())
	fmt.Printf("  ratio fleetlift / shell loop: %.2fx (goal <= 1.20x)\n", r.ratio())
	fmt.Printf("  CPU, shell loop: %.1f s in its processes\n", r.shellCPU.children.Seconds())
	fmt.Printf("  CPU, fleetlift: %.1f s in the bench process (server, worker), %.1f s in agents and git\n",
		r.fleetliftCPU.self.Seconds(), r.fleetliftCPU.children.Seconds())
	fmt.Printf("  peak RSS of the bench process (server, worker): %d MiB\n", ru.Maxrss>>10)
	return nil
}

// round is one shell loop and one fleetlift run over the same repositories.
type round struct {
	shell, fleetlift       time.Duration
	shellCPU, fleetliftCPU cpu
}

func (r round) ratio() float64 { return r.fleetlift.Seconds() / r.shell.Seconds() }

// cpu is CPU time (user + system) used so far.
type cpu struct{ self, children time.Duration }

func cpuNow() cpu {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	d := func(ru syscall.Rusage) time.Duration {
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return cpu{self: d(self), children: d(children)}
}

func (c cpu) sub(o cpu) cpu { return cpu{self: c.self - o.self, children: c.children - o.children} }

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

func fleetlift(root string, bares []string, parallel, batch int, poll time.Duration, agentBin, cpuProfile string, phases bool) (time.Duration, error) {
	if batch <= 0 {
		batch = len(bares)
	}
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
		ID: "bench", BatchSize: batch, MaxParallel: parallel, ThresholdPercent: 100,
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
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, err
		}
		defer pprof.StopCPUProfile()
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
	if phases {
		pprof.StopCPUProfile()
		var ids []string
		for _, u := range st.Units {
			ids = append(ids, u.WorkflowID)
		}
		if err := printPhases(context.Background(), os.Stdout, c, "campaign/bench", ids); err != nil {
			return 0, err
		}
	}
	return took, nil
}
