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
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/cmd/fleetlift-agent/agentcmd"
	"github.com/fleetlift/fleetlift/internal/activity"
	"github.com/fleetlift/fleetlift/internal/agent/protocol"
	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/git"
	"github.com/fleetlift/fleetlift/internal/payload"
	"github.com/fleetlift/fleetlift/internal/sandbox"
	"github.com/fleetlift/fleetlift/internal/sandbox/docker"
	"github.com/fleetlift/fleetlift/internal/sandbox/local"
	"github.com/fleetlift/fleetlift/internal/status"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func main() {
	// The bench binary is also the agent its sandboxes run.
	if code, ok := agentcmd.RunAgent(os.Args[1:]); ok {
		os.Exit(code)
	}
	workflow.IdentifyBinary()
	// As cmd/fleetlift does: `fleetlift run` and `up` run this way.
	debug.SetGCPercent(400)
	repos := flag.Int("repos", 200, "repositories")
	parallel := flag.Int("parallel", 8, "repositories worked on at once, by both")
	poll := flag.Duration("poll", 0, "how often the worker reads an agent's status (0: fleetlift's default)")
	agentBin := flag.String("agent", "", "the agent binary sandboxes run (default: this binary's agent command)")
	group := flag.Int("group", 25, "repositories per task in the grouped run (one sandbox each, worked on one after another)")
	rounds := flag.Int("rounds", 3, "rounds; each runs all three in a rotating order on fresh repositories, and medians are reported")
	withPerRepo := flag.Bool("per-repo", true, "also time one task per repository")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (the embedded server and the worker) to this file")
	flag.StringVar(&sandboxKind, "sandbox", "local", "the sandboxes fleetlift's tasks run in: local, or docker (fleetlift/sandbox:dev, make images; the containers' CPU is not counted)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-run:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(*repos, *parallel, *group, *rounds, *poll, *agentBin, *withPerRepo); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench-run:", err)
		os.Exit(1)
	}
}

const change = `sed -i 's/^go 1.21$/go 1.26/' go.mod`

// sandboxKind is -sandbox.
var sandboxKind string

// The three ways of making the change that each round times.
const (
	shell = iota
	grouped
	perRepo
)

var labels = [...]string{
	shell:   "shell loop (git clone, sed, git commit, git push)",
	grouped: "fleetlift campaign, grouped (%d repositories per task)",
	perRepo: "fleetlift campaign, one task per repository",
}

func run(n, parallel, group, rounds int, poll time.Duration, agentBin string, withPerRepo bool) error {
	root, err := os.MkdirTemp("", "fleetlift-bench-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)

	rounds = max(rounds, 1)
	times := make([][]time.Duration, 3)
	cpus := make([][]time.Duration, 3)
	selfs := make([][]time.Duration, 3)
	for round := range rounds {
		dir := filepath.Join(root, fmt.Sprint(round))
		bares, err := makeRepos(dir, n)
		if err != nil {
			return err
		}
		// A rotating order, so that no way always runs first or last on
		// a machine whose speed drifts.
		for k := range 3 {
			way := (round + k) % 3
			if way == perRepo && !withPerRepo {
				continue
			}
			var took time.Duration
			// The garbage of the way before is not this way's cost.
			runtime.GC()
			before, beforeSelf := cpuTime()
			switch way {
			case shell:
				took, err = shellLoop(dir, bares, parallel)
			case grouped:
				took, err = fleetlift(dir, bares, parallel, group, poll, agentBin, "grouped")
			case perRepo:
				took, err = fleetlift(dir, bares, parallel, 1, poll, agentBin, "per-repo")
			}
			if err != nil {
				return err
			}
			times[way] = append(times[way], took)
			after, afterSelf := cpuTime()
			cpus[way] = append(cpus[way], after-before)
			selfs[way] = append(selfs[way], afterSelf-beforeSelf)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}

	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("bench-run: %d repositories, parallelism %d, %s sandboxes, %d CPUs, median of %d rounds\n", n, parallel, sandboxKind, runtime.NumCPU(), rounds)
	for way, ts := range times {
		if len(ts) == 0 {
			continue
		}
		label := labels[way]
		if way == grouped {
			label = fmt.Sprintf(label, group)
		}
		fmt.Printf("  %-58s %6.1f s  (rounds: %s; CPU %.1f s, of it in this process %.1f s)\n", label+":", median(ts).Seconds(), seconds(ts), median(cpus[way]).Seconds(), median(selfs[way]).Seconds())
	}
	ratio := func(way int) float64 {
		var rs []float64
		for i := range times[way] {
			rs = append(rs, times[way][i].Seconds()/times[shell][i].Seconds())
		}
		slices.Sort(rs)
		return rs[len(rs)/2]
	}
	fmt.Printf("  ratio fleetlift grouped / shell loop: %.2fx (goal <= 1.20x)\n", ratio(grouped))
	if withPerRepo {
		fmt.Printf("  ratio fleetlift one task per repository / shell loop: %.2fx\n", ratio(perRepo))
	}
	fmt.Printf("  peak RSS of the bench process (server, worker): %d MiB\n", ru.Maxrss>>10)
	return nil
}

// cpuTime is the CPU time, user and system, of this process and of its
// children that have ended (the shell loop's processes, or the agents and
// their git and commands), and of this process alone (the embedded
// server and the worker).
func cpuTime() (all, self time.Duration) {
	var own, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &own)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	self = tv(own.Utime) + tv(own.Stime)
	return self + tv(children.Utime) + tv(children.Stime), self
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

func seconds(ts []time.Duration) string {
	var parts []string
	for _, t := range ts {
		parts = append(parts, fmt.Sprintf("%.1f", t.Seconds()))
	}
	return strings.Join(parts, " ")
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
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
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

// fleetlift runs the change as a campaign, id "bench-"+name, whose
// branch is auto/bench/<id>, and checks that every repository has it.
func fleetlift(root string, bares []string, parallel, group int, poll time.Duration, agentBin, name string) (time.Duration, error) {
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(root, name+".db")})
	if err != nil {
		return 0, err
	}
	defer srv.Stop()
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace,
		// As fleetlift dials a server on loopback: without gzip.
		ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS(), GrpcCompression: &client.GrpcCompressionNone{}},
		DataConverter:     payload.Converter})
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
	var p sandbox.Provider
	switch sandboxKind {
	case "local":
		p, err = local.New(local.Options{Root: filepath.Join(root, "sandboxes-"+name), AgentCommand: agent})
	case "docker":
		// The agent in a container is uid 1000: the repositories are its
		// while it pushes, and root's again for the shell loop after.
		if err = chown(root, "1000:1000"); err == nil {
			defer chown(root, "0:0")
			var dp *docker.Provider
			dp, err = docker.New(docker.Options{Scope: "bench-run-" + name, Binds: []string{root}})
			if dp != nil {
				defer dp.Close()
			}
			p = dp
		}
	default:
		err = fmt.Errorf("-sandbox %q: want local or docker", sandboxKind)
	}
	if err != nil {
		return 0, err
	}
	w := worker.New(c, workflow.TaskQueue, worker.Options{MaxConcurrentActivityExecutionSize: 4 * parallel})
	w.RegisterWorkflow(workflow.Task)
	w.RegisterWorkflow(workflow.Campaign)
	w.RegisterWorkflow(workflow.CampaignPage)
	g := &git.Git{}
	forges, lf := activity.LocalForges(g)
	// It keeps a scratch repository for its next pull request.
	defer lf.Close()
	w.RegisterActivity(&activity.Activities{Sandbox: p, PollInterval: poll,
		SandboxEnv: map[string]string{protocol.EnvAllowFileRoots: root},
		Forges:     forges, Git: g, FileRoots: []string{root}})
	if err := w.Start(); err != nil {
		return 0, err
	}
	defer w.Stop()

	in := workflow.CampaignInput{
		ID: "bench-" + name, BatchSize: len(bares), MaxParallel: parallel, ThresholdPercent: 100,
		Template: workflow.TaskInput{Timeout: 10 * time.Minute, Manifest: protocol.Manifest{
			Mode: protocol.ModeTransform, Title: "Bump go", TimeoutSeconds: 600,
			Execution:   protocol.Execution{Type: protocol.ExecutionDeterministic, Command: []string{"sh", "-c", change}},
			PullRequest: &protocol.PullRequest{BranchPrefix: "auto/bench", Title: "Bump go"},
			// A full clone, as the shell loop makes.
			GitConfig: protocol.GitConfig{UserEmail: "b@example.com", UserName: "bench"},
			Forge:     "local",
		}},
	}
	for i, b := range bares {
		name := fmt.Sprintf("svc-%d", i)
		repo := protocol.Repository{URL: "file://" + b, Branch: "main", Name: name}
		if i%max(group, 1) == 0 {
			in.Units = append(in.Units, workflow.Unit{Key: name})
		}
		u := &in.Units[len(in.Units)-1]
		u.Repositories = append(u.Repositories, repo)
	}
	start := time.Now()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: "campaign/bench-" + name, TaskQueue: workflow.TaskQueue}, workflow.Campaign, in)
	if err != nil {
		return 0, err
	}
	var st status.CampaignState
	if err := run.Get(context.Background(), &st); err != nil {
		return 0, err
	}
	took := time.Since(start)
	if sandboxKind == "docker" {
		// Root's again, for git to read them here.
		if err := chown(root, "0:0"); err != nil {
			return 0, err
		}
	}
	// The summary counts repositories, a group as the repositories it holds.
	if st.Summary.Completed != len(bares) {
		return 0, fmt.Errorf("fleetlift completed %d of %d repositories: %+v", st.Summary.Completed, len(bares), st.Units[0])
	}
	for _, b := range bares {
		out, err := exec.Command("git", "-C", b, "show", "auto/bench/bench-"+name+":go.mod").Output()
		if err != nil || !strings.Contains(string(out), "go 1.26") {
			return 0, fmt.Errorf("%s: fleetlift's branch is missing or unchanged", b)
		}
	}
	return took, nil
}

// chown gives dir and everything in it to owner ("uid:gid").
func chown(dir, owner string) error {
	if out, err := exec.Command("chown", "-R", owner, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("chown %s: %v: %s", dir, err, out)
	}
	return nil
}
