// Command devstart measures starts of the embedded Temporal server: a
// first start on an empty state directory and a restart on the
// directory that start left, each timed until devserver.Start returns
// (the frontend has answered its health check), with the process's CPU
// over the same span. Rounds alternate first start and restart; medians,
// minimums and maximums are reported.
//
//	go run ./bench/devstart -rounds 9
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/fleetlift/fleetlift/internal/devserver"
)

func main() {
	rounds := flag.Int("rounds", 9, "rounds, each a first start then a restart")
	flag.Parse()
	if err := run(*rounds); err != nil {
		fmt.Fprintln(os.Stderr, "devstart:", err)
		os.Exit(1)
	}
}

// sample is one start: its wall time and the process's CPU over it.
type sample struct{ wall, cpu time.Duration }

func run(rounds int) error {
	root, err := os.MkdirTemp("", "devstart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	// A start the figures leave out: the first in a process pays for
	// what every later one shares (the server's package state, the
	// SQLite driver's).
	if _, err := start(filepath.Join(root, "warm", "temporal.db")); err != nil {
		return err
	}
	var first, again []sample
	for i := range rounds {
		db := filepath.Join(root, fmt.Sprint(i), "temporal.db")
		s, err := start(db)
		if err != nil {
			return fmt.Errorf("first start: %w", err)
		}
		first = append(first, s)
		if s, err = start(db); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
		again = append(again, s)
	}
	report("first start (empty state dir)", first)
	report("restart (existing state dir)", again)
	return nil
}

// start starts a server on db, stops it and returns how long the start
// took.
func start(db string) (sample, error) {
	cpu0 := cpuTime()
	t0 := time.Now()
	srv, err := devserver.Start(devserver.Options{DatabaseFile: db})
	s := sample{wall: time.Since(t0), cpu: cpuTime() - cpu0}
	if err != nil {
		return s, err
	}
	srv.Stop()
	return s, nil
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func report(what string, samples []sample) {
	walls := make([]time.Duration, len(samples))
	cpus := make([]time.Duration, len(samples))
	for i, s := range samples {
		walls[i], cpus[i] = s.wall, s.cpu
	}
	slices.Sort(walls)
	slices.Sort(cpus)
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("%-32s n=%d  wall median %s (min %s, max %s)  cpu median %s (min %s, max %s)\n",
		what, len(samples), ms(walls[len(walls)/2]), ms(walls[0]), ms(walls[len(walls)-1]),
		ms(cpus[len(cpus)/2]), ms(cpus[0]), ms(cpus[len(cpus)-1]))
}
