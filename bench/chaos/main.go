// Command chaos is the crash benchmark of issue 11: an operator's bad day.
// It runs the real `fleetlift up` (embedded Temporal with mutual TLS under
// its state directory, a worker with local sandboxes running
// fleetlift-agent, the reconciler) on a campaign over 20 local
// repositories with max_parallel 4, kills processes with SIGKILL at
// random moments, restarts `up` after each kill, and then waits, bounded,
// for the campaign to finish by itself.
//
// Each round has a fresh directory: bare target repositories (a tiny Go
// module each), a campaigns repository whose main branch holds
// fleetlift.yaml and one Campaign (a deterministic sed on go.mod with a
// verifier, batches of 10, the default 20% failure threshold, a
// pull-request budget that never delays a start), and the state
// directory. The modes say what is killed, 5 times a round:
//
//   - whole-tree: up and every process under it, found through /proc by
//     the state directory in command lines and environments and by
//     descent: agents in their own process groups, their jails and the
//     commands jailed there;
//   - agents: the fleetlift-agent processes (agents and jails) alone; up
//     keeps running;
//   - up: up's process group alone; the agents keep running;
//   - approvals: the campaign requires approval; the harness approves each
//     result once, as robin, with `fleetlift approve --git`, and kills the
//     whole tree between approvals;
//   - first-start: the whole tree, a random moment after the first start
//     on a fresh state directory creates its database; each kill but the
//     last on a probe install (a fresh state directory, the campaign
//     suspended), the last on the round's own, and each restart there
//     must serve.
//
// Per round it prints, against the goal: repositories with exactly one
// correct branch (the expected branch, one commit on main changing go.mod
// alone to exactly the expected content, its pull request record naming
// that commit), duplicate branches or runs (more than one fleetlift branch
// in a repository; more than one run of the campaign; a task run that did
// a repository's work again: it overlapped another of the same
// repository, or completed after another had completed), approvals lost
// (approved results whose repository has no correct branch), units stuck
// (not finished when the wait ends), restarts that failed (up exiting, or
// not serving within -start-timeout), and whether a human had to act (the
// campaign did not complete every repository by itself). The goal:
// 20/20, 0, 0, 0, 0, no, in every round.
//
// A kill comes a random delay after the campaign reaches a progress
// point drawn at random (so many units finished; in the approvals round,
// so many results approved), so that the kills spread over the whole
// campaign whatever its pace. The draws come from each round's seed,
// printed with the round: round r of a run with -seed S uses seed S+r,
// so `-modes M -rounds 1 -seed S+r` replays its kill points and delays
// (the system under test keeps its own timing). Only loopback and local processes are involved. Every process
// and directory a round makes is removed when it ends, also on Ctrl-C.
//
// It prints figures and asserts nothing.
//
//	go run ./bench/chaos -bin ./bin
//	go run ./bench/chaos -bin ./bin -modes agents,approvals -rounds 1 -seed 7
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	var cfg config
	modes := flag.String("modes", "all", "modes to run, comma-separated: whole-tree, agents, up, approvals, first-start (or all)")
	rounds := flag.Int("rounds", 3, "rounds per mode")
	seed := flag.Uint64("seed", 0, "seed of the first round (round r uses seed+r); 0 picks one from the clock")
	flag.StringVar(&cfg.bin, "bin", "bin", "directory holding the fleetlift and fleetlift-agent binaries under test")
	flag.IntVar(&cfg.repos, "repos", 20, "target repositories")
	flag.IntVar(&cfg.parallel, "parallel", 4, "the campaign's max_parallel")
	flag.IntVar(&cfg.kills, "kills", 5, "kills per round")
	flag.DurationVar(&cfg.killMin, "kill-min", 500*time.Millisecond, "shortest time from the campaign reaching a kill's progress point to the kill")
	flag.DurationVar(&cfg.killMax, "kill-max", 4*time.Second, "longest time from the campaign reaching a kill's progress point to the kill")
	flag.DurationVar(&cfg.startWindow, "start-window", 250*time.Millisecond, "first-start: kills land up to this long after a start creates temporal.db, most of them early (the window times a uniform draw squared)")
	flag.DurationVar(&cfg.work, "work", 2*time.Second, "how long the transform takes in each repository (a sleep before the sed), so that kills find agents at work")
	flag.DurationVar(&cfg.wait, "wait", 2*time.Minute, "how long to wait, after the last kill, for the campaign to finish by itself")
	flag.DurationVar(&cfg.startTimeout, "start-timeout", time.Minute, "how long a start of up has to serve before it counts as a failed restart")
	flag.IntVar(&cfg.startAttempts, "start-attempts", 3, "starts of up tried after a kill before the round gives up")
	flag.BoolVar(&cfg.keep, "keep", false, "keep each round's directory (repositories, state, up's logs) for inspection")
	flag.BoolVar(&cfg.verbose, "v", false, "print every approval, every start, and why each repository lacks its correct branch")
	flag.Parse()

	list, err := parseModes(*modes)
	if err == nil {
		err = cfg.check(*rounds)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-chaos:", err)
		os.Exit(2)
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()%1_000_000) + 1
	}
	sigCtx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	// A second Ctrl-C ends the harness at once.
	go func() { <-sigCtx.Done(); stop() }()
	// Output that can no longer be written (| head) ends the run as
	// Ctrl-C does, cleanup included, instead of killing the harness.
	signal.Ignore(syscall.SIGPIPE)
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	cfg.out = &cancelOnError{w: os.Stdout, cancel: cancel}
	code := 0
	if err := run(ctx, &cfg, list, *rounds, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "bench-chaos:", err)
		code = 1
		if errors.Is(err, context.Canceled) {
			code = 130
		}
	}
	stop()
	os.Exit(code)
}

// cancelOnError writes to w and cancels the run when a write fails.
type cancelOnError struct {
	w      io.Writer
	cancel context.CancelFunc
}

func (c *cancelOnError) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.cancel()
	}
	return n, err
}

// check refuses flag values that cannot make a round.
func (c *config) check(rounds int) error {
	abs, err := filepath.Abs(c.bin)
	if err != nil {
		return err
	}
	c.bin = abs
	for _, name := range []string{"fleetlift", "fleetlift-agent"} {
		if fi, err := os.Stat(filepath.Join(c.bin, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("-bin %s has no executable %s: build it first (make bench-chaos does)", c.bin, name)
		}
	}
	switch {
	case rounds < 1, c.repos < 1, c.parallel < 1, c.kills < 0, c.startAttempts < 1:
		return errors.New("-rounds, -repos, -parallel and -start-attempts must be at least 1, -kills at least 0")
	case c.killMin <= 0 || c.killMax < c.killMin:
		return errors.New("-kill-min must be positive and at most -kill-max")
	case c.startWindow <= 0 || c.wait <= 0 || c.startTimeout <= 0 || c.work < 0:
		return errors.New("-start-window, -wait and -start-timeout must be positive, -work not negative")
	}
	return nil
}

// run runs the rounds of every mode, then prints a summary line per mode.
func run(ctx context.Context, cfg *config, modes []Mode, rounds int, seed uint64) error {
	root, err := os.MkdirTemp("", "fleetlift-chaos-")
	if err != nil {
		return err
	}
	cfg.root = root
	defer func() {
		if !cfg.keep {
			os.RemoveAll(root)
		}
	}()
	fmt.Fprintf(cfg.out, "bench-chaos: %s, %d rounds per mode, %d kills a round, %d repositories, max_parallel %d, seed %d\n",
		cfg.bin, rounds, cfg.kills, cfg.repos, cfg.parallel, seed)
	fmt.Fprintf(cfg.out, "goal per round: %d/%d repositories with exactly one correct branch, 0 duplicate branches or runs, 0 approvals lost, 0 units stuck, 0 restarts that failed, no human action\n", cfg.repos, cfg.repos)
	results := map[Mode][]result{}
	for _, m := range modes {
		for i := range rounds {
			s := seed + uint64(i)
			fmt.Fprintf(cfg.out, "\n%s round %d of %d, seed %d (replay: -modes %s -rounds 1 -seed %d): %s\n", m, i+1, rounds, s, m, s, m.describe())
			res, err := newRound(cfg, m, s).run(ctx)
			if err != nil {
				return fmt.Errorf("%s round %d (seed %d): %w", m, i+1, s, err)
			}
			results[m] = append(results[m], res)
		}
	}
	fmt.Fprintf(cfg.out, "\nsummary (goal per round: %d/%d, 0, 0, 0, 0, no)\n", cfg.repos, cfg.repos)
	for _, m := range modes {
		fmt.Fprintf(cfg.out, "  %s\n", summary(m, results[m]))
	}
	return nil
}

// summary is one line for a mode's rounds: how many met the goal, and
// each figure per round.
func summary(m Mode, rs []result) string {
	met := 0
	var correct, dups, lost, stuck, failed, human, seeds, took []string
	for _, r := range rs {
		f := r.figures
		if f.MeetsGoal() {
			met++
		}
		correct = append(correct, fmt.Sprintf("%d/%d", f.Correct, f.Repos))
		dups = append(dups, fmt.Sprint(f.Duplicates()))
		lost = append(lost, fmt.Sprint(f.ApprovalsLost))
		stuck = append(stuck, fmt.Sprint(f.Stuck))
		failed = append(failed, fmt.Sprint(f.RestartsFailed))
		h := "no"
		if f.Human {
			h = "yes"
		}
		human = append(human, h)
		seeds = append(seeds, fmt.Sprint(r.seed))
		took = append(took, fmt.Sprintf("%.0f", r.took.Seconds()))
	}
	j := func(s []string) string { return strings.Join(s, " ") }
	return fmt.Sprintf("%-11s goal met in %d of %d rounds; correct %s; duplicates %s; approvals lost %s; stuck %s; restarts failed %s; human %s (seeds %s; %s s)",
		m.String()+":", met, len(rs), j(correct), j(dups), j(lost), j(stuck), j(failed), j(human), j(seeds), j(took))
}
