// Command scale runs a deterministic campaign over many local
// repositories the way an operator would on the embedded default: a
// `fleetlift server` and a `fleetlift worker` (local sandboxes, the local
// forge) in processes of their own, the campaign submitted with `fleetlift
// run --detach` and watched with `fleetlift status` until it ends. It
// does so at a small size first, the baseline, and then at the size asked
// for, and reports for each:
//
//   - the wall time from submission to the campaign's end;
//   - the peak memory of the server and of the worker;
//   - how long `fleetlift status` and `fleetlift plan` (against the
//     recorded state) take on it;
//   - the largest workflow history of the run, in events and bytes, and
//     the largest payload any event carries.
//
// The largest payload at the full size over the one at the baseline says
// whether what a campaign carries grows with its repositories (goal:
// 1.0x, since Temporal refuses a payload over 2 MiB), and the history in
// events has a goal of at most 10,240.
//
//	go run ./bench/scale -bin ./bin -repos 10000 -baseline 1000
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/fleetlift/fleetlift/internal/devserver/credential"
	"github.com/fleetlift/fleetlift/internal/listen"
	"github.com/fleetlift/fleetlift/internal/payload"
)

// namespace is the embedded server's (devserver.Namespace; that package
// links the server).
const namespace = "default"

// maxEvents is the goal for the longest history (Temporal warns at
// 10,240 events and fails a workflow at 51,200).
const maxEvents = 10_240

func main() {
	bin := flag.String("bin", "bin", "directory holding fleetlift and fleetlift-agent (make build)")
	repos := flag.Int("repos", 10_000, "repositories of the campaign measured")
	base := flag.Int("baseline", 1_000, "repositories of the baseline campaign, measured first in the same run")
	parallel := flag.Int("parallel", 16, "the campaign's max_parallel and the worker's --max-sandboxes")
	keep := flag.Bool("keep", false, "keep the repositories and state directories (their path is printed)")
	flag.Parse()
	if err := run(*bin, *base, *repos, *parallel, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "bench-scale:", err)
		os.Exit(1)
	}
}

// result is what one size measured.
type result struct {
	repos      int
	wall       time.Duration
	serverPeak int64
	workerPeak int64
	// status and plan are the first reads once the campaign closed (as
	// an operator meets them, beside its followers' first reads of every
	// pull request); statusBest and planBest the best of those and
	// two more, 5 s apart.
	status, plan         time.Duration
	statusBest, planBest time.Duration
	maxEvents            int
	maxEventsID          string
	maxBytes             int64
	maxBytesID           string
	maxPayload           int
	maxPayloadWhat       string
	runs                 int
}

func run(bin string, base, repos, parallel int, keep bool) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(bin, "fleetlift")); err != nil {
		return fmt.Errorf("%v (make build makes it)", err)
	}
	root, err := os.MkdirTemp("", "fleetlift-bench-scale-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("bench-scale: working under", root)
	} else {
		defer os.RemoveAll(root)
	}
	var results []result
	for _, n := range []int{base, repos} {
		r, err := measure(bin, filepath.Join(root, strconv.Itoa(n)), n, parallel)
		if err != nil {
			return fmt.Errorf("%d repositories: %w", n, err)
		}
		results = append(results, r)
		if !keep {
			_ = os.RemoveAll(filepath.Join(root, strconv.Itoa(n)))
		}
	}
	b, f := results[0], results[1]
	fmt.Printf("bench-scale: a deterministic campaign on the embedded default (local sandboxes, local forge), max_parallel %d\n", parallel)
	for _, r := range results {
		fmt.Printf("  %6d repositories: %7.1f s (%.1f ms a repository); peak memory server %d MiB, worker %d MiB; fleetlift status %d ms (best of 3: %d), fleetlift plan %d ms (best of 3: %d)\n",
			r.repos, r.wall.Seconds(), float64(r.wall.Milliseconds())/float64(r.repos), r.serverPeak>>20, r.workerPeak>>20,
			r.status.Milliseconds(), r.statusBest.Milliseconds(), r.plan.Milliseconds(), r.planBest.Milliseconds())
		fmt.Printf("  %6s               %d workflow runs; longest history %d events (%s), largest %d KiB (%s); largest payload %d KiB (%s)\n",
			"", r.runs, r.maxEvents, r.maxEventsID, r.maxBytes>>10, r.maxBytesID, r.maxPayload>>10, r.maxPayloadWhat)
	}
	ratio := func(x, y float64) float64 { return x / y }
	fmt.Printf("  time per repository, %d / %d repositories: %.2fx (goal: 1.0x, no slower per repository at scale)\n",
		f.repos, b.repos, ratio(float64(f.wall)/float64(f.repos), float64(b.wall)/float64(b.repos)))
	fmt.Printf("  largest payload, %d / %d repositories: %.2fx (goal: 1.0x, nothing a workflow carries grows with the repositories; Temporal's limit is 2048 KiB)\n",
		f.repos, b.repos, ratio(float64(f.maxPayload), float64(b.maxPayload)))
	fmt.Printf("  longest history at %d repositories: %d events (goal: at most %d)\n", f.repos, f.maxEvents, maxEvents)
	fmt.Printf("  fleetlift status, %d / %d repositories: %.2fx (best of 3: %.2fx); fleetlift plan: %.2fx (best of 3: %.2fx)\n", f.repos, b.repos,
		ratio(float64(f.status), float64(b.status)), ratio(float64(f.statusBest), float64(b.statusBest)),
		ratio(float64(f.plan), float64(b.plan)), ratio(float64(f.planBest), float64(b.planBest)))
	return nil
}

// measure runs a campaign over n fresh repositories under dir.
func measure(bin, dir string, n, parallel int) (result, error) {
	r := result{repos: n}
	id := fmt.Sprintf("scale-%d", n)
	repoRoot := filepath.Join(dir, "repos")
	campaigns := filepath.Join(dir, "campaigns")
	stateDir := filepath.Join(dir, "state")
	if err := makeRepos(repoRoot, n); err != nil {
		return r, err
	}
	file, err := makeCampaigns(campaigns, repoRoot, id, n, parallel)
	if err != nil {
		return r, err
	}
	addr, err := listen.FreeAddr("127.0.0.1")
	if err != nil {
		return r, err
	}
	common := []string{"--state-dir", stateDir, "--temporal-address", addr}
	server, err := startProc(filepath.Join(dir, "server.log"), filepath.Join(bin, "fleetlift"), append([]string{"server"}, common...)...)
	if err != nil {
		return r, err
	}
	defer server.stop()
	ctx := context.Background()
	c, err := dial(ctx, addr, stateDir)
	if err != nil {
		return r, err
	}
	defer c.Close()
	worker, err := startProc(filepath.Join(dir, "worker.log"), filepath.Join(bin, "fleetlift"), append([]string{"worker", "--sandbox", "local",
		"--allow-file-root", repoRoot, "--max-sandboxes", strconv.Itoa(parallel)}, common...)...)
	if err != nil {
		return r, err
	}
	defer worker.stop()

	start := time.Now()
	if out, err := exec.Command(filepath.Join(bin, "fleetlift"), append([]string{"run", "--file", file, "--no-worker", "--detach"}, common...)...).CombinedOutput(); err != nil {
		return r, fmt.Errorf("fleetlift run: %v\n%s", err, out)
	}
	// Watch it end as an operator would, with fleetlift status (the
	// last read's duration is the one reported: the finished campaign).
	for {
		took, st, err := status(bin, id, common)
		if err != nil {
			return r, err
		}
		if st.Closed {
			r.wall = time.Since(start)
			r.status = took
			if st.Summary.Completed != n {
				return r, fmt.Errorf("the campaign ended with %d of %d repositories completed: %s", st.Summary.Completed, n, st.Message)
			}
			break
		}
		if err := server.alive(); err != nil {
			return r, err
		}
		if err := worker.alive(); err != nil {
			return r, err
		}
		time.Sleep(5 * time.Second)
	}
	r.serverPeak, r.workerPeak = server.peak(), worker.peak()
	plan := func() (time.Duration, error) {
		planStart := time.Now()
		if out, err := exec.Command(filepath.Join(bin, "fleetlift"), append([]string{"plan", "--repo", campaigns, "--state", "temporal"}, common...)...).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("fleetlift plan: %v\n%s", err, out)
		} else if !bytes.Contains(out, []byte("No changes")) {
			// The campaign ran as the repository says: a plan that
			// missed its recorded run would start it again.
			return 0, fmt.Errorf("fleetlift plan, against the campaign it ran:\n%s", out)
		}
		return time.Since(planStart), nil
	}
	if r.plan, err = plan(); err != nil {
		return r, err
	}
	r.statusBest, r.planBest = r.status, r.plan
	for range 2 {
		time.Sleep(5 * time.Second)
		took, _, err := status(bin, id, common)
		if err != nil {
			return r, err
		}
		r.statusBest = min(r.statusBest, took)
		if took, err = plan(); err != nil {
			return r, err
		}
		r.planBest = min(r.planBest, took)
	}
	if err := histories(ctx, c, &r); err != nil {
		return r, err
	}
	// What the branches say: every repository has the change.
	for _, i := range []int{0, n / 2, n - 1} {
		out, err := exec.Command("git", "-C", filepath.Join(repoRoot, fmt.Sprintf("svc-%d.git", i)), "show", "fleetlift/go-version/"+id+":go.mod").CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("go 1.26")) {
			return r, fmt.Errorf("svc-%d: the campaign's branch is missing or unchanged: %v %s", i, err, out)
		}
	}
	return r, nil
}

// campaignStatus is what the bench reads of `fleetlift status -o json`.
type campaignStatus struct {
	Closed  bool `json:"closed"`
	Summary struct {
		Completed int `json:"completed"`
	} `json:"summary"`
	Message string `json:"message"`
}

// status times `fleetlift status ID -o json`.
func status(bin, id string, common []string) (time.Duration, campaignStatus, error) {
	var st campaignStatus
	start := time.Now()
	out, err := exec.Command(filepath.Join(bin, "fleetlift"), append([]string{"status", id, "-o", "json"}, common...)...).Output()
	took := time.Since(start)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return took, st, fmt.Errorf("fleetlift status: %v\n%s", err, ee.Stderr)
		}
		return took, st, fmt.Errorf("fleetlift status: %v", err)
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return took, st, fmt.Errorf("fleetlift status -o json: %v", err)
	}
	return took, st, nil
}

// histories reads every run's history and records the longest, the
// largest and the largest payload in any event.
func histories(ctx context.Context, c client.Client, r *result) error {
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace, PageSize: 500, NextPageToken: token})
		if err != nil {
			return fmt.Errorf("list runs: %w", err)
		}
		for _, e := range resp.Executions {
			r.runs++
			name := e.Execution.WorkflowId + " run " + e.Execution.RunId
			events, size := 0, int64(0)
			it := c.GetWorkflowHistory(ctx, e.Execution.WorkflowId, e.Execution.RunId, false, 0)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return fmt.Errorf("history of %s: %w", name, err)
				}
				events++
				size += int64(proto.Size(ev))
				if p, what := largestPayload(ev); p > r.maxPayload {
					r.maxPayload, r.maxPayloadWhat = p, fmt.Sprintf("%s, %s", e.Execution.WorkflowId, what)
				}
			}
			if events > r.maxEvents {
				r.maxEvents, r.maxEventsID = events, e.Execution.WorkflowId
			}
			if size > r.maxBytes {
				r.maxBytes, r.maxBytesID = size, e.Execution.WorkflowId
			}
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return nil
		}
	}
}

// largestPayload is the size of the largest payload event ev carries, as
// stored (compressed when large), and the event's type.
func largestPayload(ev *historypb.HistoryEvent) (int, string) {
	largest := 0
	var walk func(m protoreflect.Message)
	walk = func(m protoreflect.Message) {
		if p, ok := m.Interface().(*commonpb.Payload); ok {
			largest = max(largest, proto.Size(p))
			return
		}
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := range v.List().Len() {
					walk(v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					walk(mv.Message())
					return true
				})
			case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
				walk(v.Message())
			}
			return true
		})
	}
	walk(ev.ProtoReflect())
	return largest, strings.ToLower(strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_"))
}

// makeRepos makes n bare repositories svc-0.git … under dir, copies of
// one tiny Go module that says `go 1.21`.
func makeRepos(dir string, n int) error {
	script := `set -e
git init -q -b main src
printf 'module example.com/svc\n\ngo 1.21\n' > src/go.mod
git -C src add go.mod
git -C src -c user.email=bench@example.com -c user.name=bench commit -qm init
git clone -q --bare src template.git
i=0
while [ $i -lt "$N" ]; do cp -r template.git svc-$i.git; i=$((i+1)); done`
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "N="+strconv.Itoa(n))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("make repositories: %v\n%s", err, out)
	}
	return nil
}

// makeCampaigns makes a campaigns repository holding one campaign over
// the n repositories, and returns its file.
func makeCampaigns(dir, repoRoot, id string, n, parallel int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, `version: 1
kind: Campaign
id: %s
title: Raise the go directive to 1.26
template:
  execution:
    deterministic:
      image: golang:1.26
      command: [sed, -i, "s/^go 1\\.21$/go 1.26/", go.mod]
  pull_request:
    branch_prefix: fleetlift/go-version
    title: Raise the go directive to 1.26
max_parallel: %d
repositories:
`, id, parallel)
	for i := range n {
		fmt.Fprintf(&b, "  - url: file://%s/svc-%d.git\n", repoRoot, i)
	}
	file := filepath.Join(dir, id+".yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	script := `set -e
git init -q -b main .
git add .
git -c user.email=bench@example.com -c user.name=bench commit -qm "campaign"`
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make the campaigns repository: %v\n%s", err, out)
	}
	return file, nil
}

// dial connects to the server at addr with the install's client
// credential, waiting for the server to write it and answer.
func dial(ctx context.Context, addr, stateDir string) (client.Client, error) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := tryDial(ctx, addr, stateDir)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the server at %s never answered: %w", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tryDial(ctx context.Context, addr, stateDir string) (client.Client, error) {
	tlsCfg, err := credential.LoadClient(filepath.Join(stateDir, "tls"))
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: tlsCfg}, DataConverter: payload.Converter})
	if err != nil {
		return nil, err
	}
	if _, err := c.WorkflowService().DescribeNamespace(dctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// proc is a server or worker process.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func startProc(log, name string, args ...string) (*proc, error) {
	f, err := os.Create(log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, log: log, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	return p, nil
}

// alive is an error saying so when the process has ended.
func (p *proc) alive() error {
	select {
	case err := <-p.done:
		p.done <- err
		tail, _ := os.ReadFile(p.log)
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return fmt.Errorf("%s ended: %v\n%s", strings.Join(p.cmd.Args[:2], " "), err, tail)
	default:
		return nil
	}
}

// peak is the process's peak resident set size in bytes (VmHWM).
func (p *proc) peak() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib << 10
		}
	}
	return 0
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
