package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
	"github.com/fleetlift/fleetlift/internal/syncbuf"
)

// writeGate stands in front of a forge's API as a forge's abuse limit
// does: it passes reads, records each write (any request to the API but
// GET and HEAD) and refuses one that would be past Limit in any Per with
// 429. It refuses the Plant-th write too, with Retry-After, as a forge
// that limits for reasons of its own does. Git's own traffic passes
// unrecorded.
type writeGate struct {
	next  http.Handler
	Limit int
	Per   time.Duration
	Plant int
	Hold  time.Duration

	mu      sync.Mutex
	passed  []time.Time
	log     []string
	over    []string
	planted time.Time
	seen    int
}

func (g *writeGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/api/") || r.Method == http.MethodGet || r.Method == http.MethodHead {
		g.next.ServeHTTP(w, r)
		return
	}
	now := time.Now()
	g.mu.Lock()
	g.log = append(g.log, now.Format("15:04:05.000")+" "+r.Method+" "+r.URL.Path)
	g.seen++
	if g.seen == g.Plant {
		g.planted = now
		g.mu.Unlock()
		w.Header().Set("Retry-After", fmt.Sprint(int(g.Hold/time.Second)))
		http.Error(w, `{"message":"rate limited"}`, http.StatusTooManyRequests)
		return
	}
	n := 0
	for _, at := range g.passed {
		if now.Sub(at) < g.Per {
			n++
		}
	}
	if n >= g.Limit {
		g.over = append(g.over, fmt.Sprintf("%s %s at %s, the %dth write in %s", r.Method, r.URL.Path, now.Format("15:04:05.000"), n+1, g.Per))
		g.mu.Unlock()
		w.Header().Set("Retry-After", "60")
		http.Error(w, `{"message":"rate limited"}`, http.StatusTooManyRequests)
		return
	}
	g.passed = append(g.passed, now)
	g.mu.Unlock()
	g.next.ServeHTTP(w, r)
}

// Two worker processes carrying out three campaigns at once open their
// pull requests on the forge through one write budget on Temporal: the
// forge, which refuses a fifth write in any minute, refuses none of
// theirs, and the one Retry-After it answers holds every process's
// writes back until it has passed. Each process alone would keep four a
// minute, and the two together would not.
func TestWorkerProcessesShareTheForgeWriteBudget(t *testing.T) {
	g := giteatest.Start(t)
	bot := g.Admin()
	up, err := url.Parse(g.URL())
	if err != nil {
		t.Fatal(err)
	}
	const hold = 20 * time.Second
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	gate := &writeGate{next: proxy, Limit: 4, Per: time.Minute, Plant: 2, Hold: hold}
	front := startGate(t, gate)

	// Three campaigns of two repositories each, reached through the gate.
	root := t.TempDir()
	var defs, repos []string
	for c := range 3 {
		var urls []string
		for r := range 2 {
			name := fmt.Sprintf("svc-%d%d", c, r)
			repos = append(repos, name)
			giteaGoModule(t, g, bot, name, "main")
			urls = append(urls, front+bot.Name+"/"+name+".git")
		}
		id := fmt.Sprintf("bump-%d", c)
		defs = append(defs, writeDef(t, root, id+".yaml", bumpCampaign(id, urls, "")))
	}

	// The operator's forge, for the workers and the command that starts
	// the campaigns: four writes a minute, shared.
	t.Setenv("FLEETLIFT_FORGE_TYPE", "gitea")
	t.Setenv("FLEETLIFT_FORGE_URL", front)
	t.Setenv("FLEETLIFT_FORGE_TOKEN", bot.Token)
	t.Setenv("FLEETLIFT_FORGE_WRITES_PER_MINUTE", "4")
	addr, stateDir := freeAddr(t), filepath.Join(root, "state")
	startServer(t, addr, stateDir)
	// Both on this host with one state directory, as `fleetlift up` and
	// a second worker would be: each takes the steps of its own
	// sandboxes only.
	var logs []*syncbuf.Buffer
	for range 2 {
		logs = append(logs, startWorkerProcess(t, "--temporal-address", addr, "--state-dir", stateDir))
	}
	for _, def := range defs {
		if out, code := runCLI(t, "run", "--file", def, "--temporal-address", addr, "--state-dir", stateDir, "--no-worker", "--detach"); code != 0 {
			t.Fatalf("run --detach %s: exit %d:\n%s", def, code, out)
		}
	}

	// Each repository gets its pull request, at the pace of the budget.
	const wait = 2 * time.Minute
	deadline := time.Now().Add(wait)
	for _, name := range repos {
		for {
			var prs []giteaPR
			if err := g.Call(bot.Token, "GET", "repos/"+bot.Name+"/"+name+"/pulls?state=open", nil, &prs); err == nil && len(prs) == 1 {
				break
			}
			if time.Now().After(deadline) {
				gate.mu.Lock()
				t.Logf("the writes the forge saw:\n%s", strings.Join(gate.log, "\n"))
				gate.mu.Unlock()
				for c := range defs {
					out, _ := runCLI(t, "status", fmt.Sprintf("bump-%d", c), "--temporal-address", addr, "--state-dir", stateDir)
					t.Logf("fleetlift status bump-%d:\n%s", c, out)
				}
				t.Fatalf("%s has no pull request after %s", name, wait)
			}
			time.Sleep(time.Second)
		}
	}

	gate.mu.Lock()
	defer gate.mu.Unlock()
	t.Logf("the writes the forge saw:\n%s", strings.Join(gate.log, "\n"))
	dirs := map[string]bool{}
	for _, l := range logs {
		for line := range strings.Lines(l.String()) {
			if dir, ok := strings.CutPrefix(line, "sandboxes: local processes under "); ok {
				dirs[strings.Fields(dir)[0]] = true
			}
		}
	}
	if len(dirs) != 2 {
		t.Errorf("the two workers' sandboxes are under %v; want a directory each", dirs)
	}
	if len(gate.over) > 0 {
		t.Errorf("the forge refused writes past 4 a minute:\n%s", strings.Join(gate.over, "\n"))
	}
	if gate.planted.IsZero() {
		t.Fatalf("the forge saw %d writes; want its second refused with Retry-After", gate.seen)
	}
	// A permit granted just before the hold reached the budget may still
	// go (within the budget's second ahead); nothing after.
	for _, at := range gate.passed {
		if d := at.Sub(gate.planted); d > 2*time.Second && d < hold {
			t.Errorf("a write reached the forge %s after it answered Retry-After: %s; want none before that has passed", d.Round(time.Millisecond), hold)
		}
	}
	if len(gate.passed) < len(repos) {
		t.Errorf("the forge took %d writes; want at least one for each of the %d pull requests", len(gate.passed), len(repos))
	}
}

// startGate serves gate on loopback until the test ends, and returns its
// root URL.
func startGate(t *testing.T, gate http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: gate, ReadHeaderTimeout: 10 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// startWorkerProcess runs `fleetlift worker` as a process of its own (this
// test binary as the command) until the test ends, and returns what it
// prints.
func startWorkerProcess(t *testing.T, args ...string) *syncbuf.Buffer {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out := &syncbuf.Buffer{}
	cmd := exec.Command(self, append([]string{"worker"}, args...)...)
	cmd.Env = append(os.Environ(), asCLIEnv+"=1")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("worker process %d:\n%s", cmd.Process.Pid, out.String())
		}
	})
	return out
}
