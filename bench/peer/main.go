// Command peer measures fleetlift head to head with multi-gitter, the tool
// a platform engineer runs instead for a quick fleet change, on a real
// Gitea on loopback (issue 16): N small Go repositories, the same sed
// change, one pull request each.
//
// Each round makes N repositories in a fresh organisation per tool and
// runs, in an order that rotates from round to round, multi-gitter -C 8,
// multi-gitter -C 1, `fleetlift run` with one task per repository, and
// `fleetlift run` with groups, each until every pull request exists
// (polled through Gitea's API); then it checks that each repository has
// exactly one pull request, from the tool's branch into main, that makes
// the change. It prints the medians of wall time and of the CPU time of
// each tool's whole process tree (the tool, and every process it started
// and waited for: fleetlift's embedded Temporal server, worker, agents,
// jails and git; multi-gitter's script; and whatever it left running when
// it exited, which the bench reaps), Gitea's CPU separately, and the
// ratios to multi-gitter -C 8.
//
//	go run ./bench/peer -bin ./bin -repos 50 -rounds 3
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/fleetlift/fleetlift/internal/forge/giteatest"
)

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "the directory holding fleetlift, fleetlift-agent and multi-gitter")
	flag.IntVar(&o.repos, "repos", 50, "repositories per tool and round")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds; medians are reported")
	flag.IntVar(&o.parallel, "parallel", 8, "multi-gitter's -C and fleetlift's max_parallel")
	flag.IntVar(&o.group, "group", 7, "repositories per group in the grouped fleetlift run")
	flag.StringVar(&o.sandbox, "sandbox", "local", "fleetlift's --sandbox: local, or docker (the sandbox image, on the host's network to reach Gitea; the containers' CPU is the engine's, not counted)")
	flag.StringVar(&o.only, "tools", "", "comma-separated tools to run (default all): "+strings.Join(toolNames(), ","))
	flag.StringVar(&o.fields, "campaign-fields", "", "YAML lines added to fleetlift's campaigns, such as \"batch_size: 50\" to measure a build whose defaults batch or pace")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory (Gitea's data, logs, state) and print where")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-peer:", err)
		os.Exit(1)
	}
}

type options struct {
	bin                     string
	repos, rounds, parallel int
	group                   int
	sandbox, only           string
	fields                  string
	keep                    bool
}

// measure is one tool's run in one round.
type measure struct {
	wall, cpu, gitea time.Duration
}

func run(o options) error {
	if err := adoptOrphans(); err != nil {
		return fmt.Errorf("become the reaper of what the tools leave behind: %w", err)
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	o.bin = bin
	tools, err := selectTools(o)
	if err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "fleetlift-bench-peer-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "bench-peer: working directory", root)
	} else {
		defer os.RemoveAll(root)
	}
	g, err := giteatest.Launch(giteatest.Options{Dir: filepath.Join(root, "gitea"), MaxResponseItems: max(1000, 2*o.repos)})
	if g != nil {
		defer g.Close()
	}
	if err != nil {
		return err
	}
	f := &fleet{g: g, root: root, opts: o}
	if err := f.prepare(); err != nil {
		return err
	}
	// One untimed run of each tool on one repository: binaries in the
	// page cache, fleetlift's state directory made (its database and
	// credentials, made once per install).
	for _, t := range tools {
		if _, err := f.round(t, "warm", 1); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	results := map[string][]measure{}
	for r := range max(o.rounds, 1) {
		for k := range tools {
			t := tools[(r+k)%len(tools)]
			m, err := f.round(t, fmt.Sprintf("r%d", r+1), o.repos)
			if err != nil {
				return fmt.Errorf("round %d: %w", r+1, err)
			}
			fmt.Fprintf(os.Stderr, "bench-peer: round %d %-34s wall %6.1f s  CPU %6.2f s  gitea CPU %6.2f s\n",
				r+1, t.label(o), m.wall.Seconds(), m.cpu.Seconds(), m.gitea.Seconds())
			results[t.name] = append(results[t.name], m)
		}
	}
	report(o, tools, results)
	return nil
}

func report(o options, tools []tool, results map[string][]measure) {
	fmt.Printf("bench-peer: %d repositories on Gitea (loopback), %s sandboxes, %d CPUs, median of %d rounds\n",
		o.repos, o.sandbox, runtime.NumCPU(), max(o.rounds, 1))
	fmt.Printf("  %-36s %9s %9s %11s %9s %9s\n", "tool", "wall", "CPU", "Gitea CPU", "wall/mg8", "CPU/mg8")
	base, haveBase := results[mg8]
	for _, t := range tools {
		ms := results[t.name]
		wall := median(ms, func(m measure) time.Duration { return m.wall })
		cpu := median(ms, func(m measure) time.Duration { return m.cpu })
		gitea := median(ms, func(m measure) time.Duration { return m.gitea })
		ratios := fmt.Sprintf("%9s %9s", "-", "-")
		if haveBase {
			ratios = fmt.Sprintf("%8.2fx %8.2fx",
				medianRatio(ms, base, func(m measure) time.Duration { return m.wall }),
				medianRatio(ms, base, func(m measure) time.Duration { return m.cpu }))
		}
		rounds := ""
		if haveBase && t.name != mg8 {
			rounds = "; CPU/mg8 by round: " + roundRatios(ms, base, func(m measure) time.Duration { return m.cpu })
		}
		fmt.Printf("  %-36s %7.1f s %7.2f s %9.2f s %s   (walls: %s%s)\n", t.label(o), wall.Seconds(), cpu.Seconds(), gitea.Seconds(), ratios, walls(ms), rounds)
	}
	if haveBase {
		fmt.Println("  goal: fleetlift, one task per repository: wall <= 1.0x and CPU <= 3x multi-gitter -C 8's")
	}
}

func median(ms []measure, f func(measure) time.Duration) time.Duration {
	var ds []time.Duration
	for _, m := range ms {
		ds = append(ds, f(m))
	}
	slices.Sort(ds)
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)/2]
}

// medianRatio is the median over rounds of ms[i] / base[i]: each round's
// runs shared the machine's state.
func medianRatio(ms, base []measure, f func(measure) time.Duration) float64 {
	rs := ratios(ms, base, f)
	slices.Sort(rs)
	if len(rs) == 0 {
		return 0
	}
	return rs[len(rs)/2]
}

// roundRatios is each round's ms[i] / base[i], in the order of the
// rounds: how far apart the rounds are says how much the median can be
// trusted.
func roundRatios(ms, base []measure, f func(measure) time.Duration) string {
	var s []string
	for _, r := range ratios(ms, base, f) {
		s = append(s, fmt.Sprintf("%.2f", r))
	}
	return strings.Join(s, " ")
}

// ratios are ms[i] / base[i] for the rounds both ran, in their order,
// but for a round whose base measured nothing.
func ratios(ms, base []measure, f func(measure) time.Duration) []float64 {
	var rs []float64
	for i := range min(len(ms), len(base)) {
		if b := f(base[i]); b > 0 {
			rs = append(rs, float64(f(ms[i]))/float64(b))
		}
	}
	return rs
}

func walls(ms []measure) string {
	var s []string
	for _, m := range ms {
		s = append(s, fmt.Sprintf("%.1f", m.wall.Seconds()))
	}
	return strings.Join(s, " ")
}
