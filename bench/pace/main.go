// Command pace measures how close fleetlift's shared forge write budget
// (workflow.ForgeBudget on the embedded Temporal server, asked through
// dispatch.ForgeBudget by each process's github.Budget) comes to a
// forge's secondary limit without meeting it.
//
// A recording forge on loopback takes POST /repos/{owner}/{repo}/pulls,
// the request that opens a pull request, and enforces GitHub's secondary
// limit on content-creating requests: more than 80 in any minute is
// refused with 403 "You have exceeded a secondary rate limit" (and, with
// -per-hour, more than that many in any hour). Time is scaled by -scale:
// at 6, a minute of the limit lasts 10 s.
//
// Two writer processes (each its own Temporal connection and its own
// github.Budget, as two workers have) open -prs pull requests for three
// campaigns, -writers at a time. The shared run prints the achieved rate
// in pull requests a (scaled) minute against the 80-a-minute floor
// (goal: within 5% of it) and the forge's limit responses (goal: none).
// The baseline, in the same run, is what each process's own budget did
// before the shared one: each paces itself to the limit, and together
// they meet it.
//
// It asserts no time.
//
//	go run ./bench/pace -prs 2000
//	go run ./bench/pace -prs 300 -scale 12
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"

	"github.com/fleetlift/fleetlift/internal/devserver"
	"github.com/fleetlift/fleetlift/internal/dispatch"
	"github.com/fleetlift/fleetlift/internal/forge/forgetest"
	"github.com/fleetlift/fleetlift/internal/forge/github"
	"github.com/fleetlift/fleetlift/internal/workflow"
)

func main() {
	prs := flag.Int("prs", 2000, "pull requests to open in the shared run")
	baselinePRs := flag.Int("baseline-prs", 300, "pull requests to open in the baseline run (per-process budgets)")
	perMinute := flag.Int("per-minute", 80, "the forge's limit of writes a minute (GitHub: 80)")
	perHour := flag.Int("per-hour", 0, "the forge's limit of writes an hour (GitHub: 500; 0: not enforced, so that the minute's limit binds)")
	scale := flag.Float64("scale", 6, "how much faster than real time the limits' windows pass")
	writers := flag.Int("writers", 16, "pull requests opened at once, over both processes")
	flag.Parse()
	if err := run(*prs, *baselinePRs, *perMinute, *perHour, *scale, *writers); err != nil {
		fmt.Fprintln(os.Stderr, "pace:", err)
		os.Exit(1)
	}
}

// result is one run's figures.
type result struct {
	prs     int
	elapsed time.Duration
	refused int
	failed  int
	// waited is the permits' total wait (shared run).
	waited time.Duration
}

func run(prs, baselinePRs, perMinute, perHour int, scale float64, writers int) error {
	minute := time.Duration(float64(time.Minute) / scale)
	hour := time.Duration(float64(time.Hour) / scale)
	limits := []forgetest.Window{{Count: perMinute, Per: minute}}
	if perHour > 0 {
		limits = append(limits, forgetest.Window{Count: perHour, Per: hour})
	}
	fmt.Printf("forge: at most %d writes a minute", perMinute)
	if perHour > 0 {
		fmt.Printf(" and %d an hour", perHour)
	}
	fmt.Printf(", a minute lasting %s (scale %g); %d writers over 2 processes, 3 campaigns\n", minute, scale, writers)

	dir, err := os.MkdirTemp("", "fleetlift-bench-pace-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := devserver.Start(devserver.Options{DatabaseFile: filepath.Join(dir, "temporal.db")})
	if err != nil {
		return err
	}
	defer srv.Stop()
	quiet := log.NewStructuredLogger(slog.New(slog.DiscardHandler))
	dial := func() (client.Client, error) {
		return client.Dial(client.Options{HostPort: srv.Address(), Namespace: devserver.Namespace, Logger: quiet,
			ConnectionOptions: client.ConnectionOptions{TLS: srv.ClientTLS()}})
	}
	wc, err := dial()
	if err != nil {
		return err
	}
	defer wc.Close()
	w := worker.New(wc, workflow.TaskQueue, worker.Options{})
	w.RegisterWorkflow(workflow.ForgeBudget)
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	// The baseline: each process paces itself to the limit, on its own.
	base, err := openAll(baselinePRs, writers, limits, func(int) (*github.Budget, func(), error) {
		perSecond := float64(perMinute) / minute.Seconds()
		return github.NewBudget(github.BudgetOptions{Rate: -1, WriteRate: perSecond, WriteBurst: 1, MaxInFlight: writers,
			SecondaryWait: minute}), func() {}, nil
	})
	if err != nil {
		return err
	}
	report("baseline: per-process budgets", base, perMinute, minute)

	// The shared budget, as a worker gives it (dispatch.ForgeBudgetInput)
	// with its windows scaled.
	in := dispatch.ForgeBudgetInput("127.0.0.1/bench", perMinute, perHour)
	for i := range in.Limits {
		in.Limits[i].Per = time.Duration(float64(in.Limits[i].Per) / scale)
	}
	in.Slack = time.Duration(float64(in.Slack) / scale)
	in.MinInterval = time.Duration(float64(in.MinInterval) / scale)
	id := fmt.Sprintf("fleetlift/forge-budget/bench-%d", time.Now().UnixNano())
	var waited atomic.Int64
	shared, err := openAll(prs, writers, limits, func(p int) (*github.Budget, func(), error) {
		c, err := dial()
		if err != nil {
			return nil, nil, err
		}
		fb := &dispatch.ForgeBudget{Client: c, ID: id, Input: in, Caller: fmt.Sprint("process-", p),
			OnWait: func(d time.Duration) { waited.Add(int64(d)) }}
		return github.NewBudget(github.BudgetOptions{Rate: -1, Shared: fb, MaxInFlight: writers, SecondaryWait: minute}), c.Close, nil
	})
	if err != nil {
		return err
	}
	shared.waited = time.Duration(waited.Load())
	report("shared: one budget on Temporal", shared, perMinute, minute)

	rate := float64(shared.prs) / (shared.elapsed.Seconds() / minute.Seconds())
	baseRate := float64(base.prs) / (base.elapsed.Seconds() / minute.Seconds())
	within := rate >= 0.95*float64(perMinute) && rate <= float64(perMinute)
	fmt.Printf("\nshared: %.1f pull requests a minute, %.3f of the %d-a-minute floor (goal: within 5%%: %s); %d limit responses (goal: none: %s)\n",
		rate, rate/float64(perMinute), perMinute, met(within), shared.refused, met(shared.refused == 0))
	fmt.Printf("against the baseline: %.1f a minute with %d limit responses for %d pull requests\n", baseRate, base.refused, base.prs)
	if shared.prs > 0 {
		fmt.Printf("permits: %s waited on average, over %d\n", (shared.waited / time.Duration(shared.prs)).Round(time.Millisecond), shared.prs)
	}
	return nil
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// openAll opens n pull requests against a new recording forge through
// two processes' budgets (budget makes process p's), writers at a time,
// and returns what it took.
func openAll(n, writers int, limits []forgetest.Window, budget func(p int) (*github.Budget, func(), error)) (result, error) {
	f := &forgetest.Paced{Limits: limits}
	api := httptest.NewServer(f)
	defer api.Close()
	var clients []*http.Client
	for p := range 2 {
		b, closeFn, err := budget(p)
		if err != nil {
			return result{}, err
		}
		defer closeFn()
		clients = append(clients, &http.Client{Transport: b.Transport(nil), Timeout: 10 * time.Minute})
	}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for i := range writers {
		hc := clients[i%2]
		wg.Go(func() {
			for {
				k := int(next.Add(1))
				if k > n {
					return
				}
				body := fmt.Sprintf(`{"title":"campaign %d","head":"auto/%d","base":"main"}`, k%3, k)
				req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/repos/acme/svc%d/pulls", api.URL, k), strings.NewReader(body))
				req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
				resp, err := hc.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	return result{prs: len(f.Writes()), elapsed: elapsed, refused: f.Refused(), failed: int(failed.Load())}, nil
}

func report(name string, r result, perMinute int, minute time.Duration) {
	rate := float64(r.prs) / (r.elapsed.Seconds() / minute.Seconds())
	fmt.Printf("%s: %d pull requests in %s (%.1f scaled minutes): %.1f a minute (%.3f of %d); %d limit responses; %d writes given up\n",
		name, r.prs, r.elapsed.Round(time.Millisecond), r.elapsed.Seconds()/minute.Seconds(), rate, rate/float64(perMinute), perMinute, r.refused, r.failed)
}
