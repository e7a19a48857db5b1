package baseline

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// peakEnv is set in the environment of the helper process PeakRSS starts.
const peakEnv = "FLEETLIFT_BENCH_PEAK_RSS"

const peakPrefix = "fleetlift-bench-peak-rss-kib: "

// IsPeakRSSHelper reports whether this process was started by PeakRSS. A
// benchmark that uses PeakRSS checks it first thing in main:
//
//	if baseline.IsPeakRSSHelper() {
//		os.Exit(baseline.RunPeakRSSHelper())
//	}
func IsPeakRSSHelper() bool { return os.Getenv(peakEnv) == "1" }

// RunPeakRSSHelper runs the command in its arguments, passing on its
// output, and writes the command's peak RSS to stderr last.
func RunPeakRSSHelper() int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "peak RSS helper: no command")
		return 2
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return e == peakEnv+"=1" })
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, "peak RSS helper:", err)
		return 2
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		fmt.Fprintf(os.Stderr, "\n%s%d\n", peakPrefix, ru.Maxrss)
	}
	return cmd.ProcessState.ExitCode()
}

// PeakRSS runs argv in dir and returns its peak resident set size in
// bytes. The kernel counts the RSS its parent had when it started towards
// a process's peak, so the command is started by a small helper process
// (this executable again, see IsPeakRSSHelper) rather than by the
// benchmark, whose own RSS would hide the command's.
func PeakRSS(dir string, argv ...string) (int64, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self, argv...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), peakEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	out := stderr.String()
	i := strings.LastIndex(out, peakPrefix)
	if runErr != nil || i < 0 {
		return 0, fmt.Errorf("%s: %v: %s", argv[0], runErr, out)
	}
	kib, err := strconv.ParseInt(strings.TrimSpace(out[i+len(peakPrefix):]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: peak RSS: %w", argv[0], err)
	}
	return kib << 10, nil
}

// ResetPeakRSS starts a new measurement of this process's peak RSS, read
// with PeakRSSSinceReset (Linux only).
func ResetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// PeakRSSSinceReset returns this process's peak RSS in bytes since
// ResetPeakRSS (Linux only).
func PeakRSSSinceReset() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib << 10, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}
