package spec_test

import (
	"flag"
	"os"
	"testing"

	"github.com/fleetlift/fleetlift/internal/spec"
)

// fuzzMinimizeBudget is how many calls of a fuzz target the fuzzing
// engine may spend minimizing one input, unless -fuzzminimizetime says
// otherwise.
//
// The engine's default is 60 seconds per input, and it minimizes every
// input that reaches new code, not only failures: a worker that minimizes
// does not fuzz, and its calls are counted only when it is done. Loading
// a definition costs milliseconds (CUE evaluation), and minimizing a byte
// string tries a number of candidates quadratic in its length
// (golang/go#48820), so minimizing one of the kilobyte seeds never ends
// before its 60 seconds: within the first seconds of a run both workers
// were minimizing, and `go test -fuzz FuzzLoad -fuzztime 20s` reported
// 0 executions a second for the rest of it. A budget counted in calls
// also ends a minimization cleanly; a timed one ends with the engine
// killing and restarting the worker (and its evaluation pool).
const fuzzMinimizeBudget = "100x"

// TestMain lets the test binary serve as a spec.Pool worker, as the
// fleetlift binary does, and bounds the fuzzing engine's minimization.
func TestMain(m *testing.M) {
	if spec.IsWorker() {
		os.Exit(spec.RunWorker())
	}
	flag.Parse()
	if !flagGiven("test.fuzzminimizetime") {
		if err := flag.Set("test.fuzzminimizetime", fuzzMinimizeBudget); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// TestFuzzMinimizationLeavesTimeToFuzz checks that a fuzzing run spends a
// bounded number of calls minimizing each input it finds, so that it
// fuzzes for its whole -fuzztime (see fuzzMinimizeBudget).
func TestFuzzMinimizationLeavesTimeToFuzz(t *testing.T) {
	f := flag.Lookup("test.fuzzminimizetime")
	if f == nil {
		t.Fatal("the testing package has no -test.fuzzminimizetime flag")
	}
	if !flagGiven(f.Name) && f.Value.String() != fuzzMinimizeBudget {
		t.Errorf("minimization budget = %s, want %s calls: the engine's 60 s default keeps the workers from fuzzing", f.Value, fuzzMinimizeBudget)
	}
}

// newPool returns a worker pool of this test binary with small limits,
// closed when the test ends.
func newPool(t testing.TB) *spec.Pool {
	t.Helper()
	p := &spec.Pool{Command: []string{os.Args[0]}, Workers: 2, MemoryLimit: 1 << 30}
	t.Cleanup(func() { p.Close() })
	return p
}
