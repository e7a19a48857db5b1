// Package baseline measures the yardsticks the benchmarks compare
// fleetlift with, in the same run.
package baseline

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// CueExport is the best of runs timings of `cue export` over the named
// YAML files in dir, each placed under its file name (no schema).
func CueExport(cueBin, dir string, names []string, runs int) (time.Duration, error) {
	// The command runs in dir: resolve a relative path from here first.
	bin, err := exec.LookPath(cueBin)
	if err != nil {
		return 0, fmt.Errorf("cue CLI %s: %w (make tools installs it into ./bin)", cueBin, err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return 0, err
	}
	args := cueExportArgs(names)
	var times []time.Duration
	for range max(runs, 1) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, fmt.Errorf("%s export: %v: %s", cueBin, err, stderr.String())
		}
		times = append(times, time.Since(start))
	}
	return slices.Min(times), nil
}

// CueExportPeakRSS runs `cue export` as CueExport does, once, and returns
// its peak RSS in bytes (see PeakRSS).
func CueExportPeakRSS(cueBin, dir string, names []string) (int64, error) {
	bin, err := exec.LookPath(cueBin)
	if err != nil {
		return 0, fmt.Errorf("cue CLI %s: %w (make tools installs it into ./bin)", cueBin, err)
	}
	if bin, err = filepath.Abs(bin); err != nil {
		return 0, err
	}
	return PeakRSS(dir, append([]string{bin}, cueExportArgs(names)...)...)
}

func cueExportArgs(names []string) []string {
	return append([]string{"export", "--with-context", "-l", "path.Base(filename)", "--out", "json"}, names...)
}
