package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// adoptOrphans makes this process the reaper of whatever a tool leaves
// running when it exits (PR_SET_CHILD_SUBREAPER): such a process becomes
// its child, so that its CPU time counts toward the tool's however late
// it ends.
func adoptOrphans() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// reapOrphans waits, for d at most, for the processes a tool left
// behind (children of this process other than keep) to end, and returns
// the CPU time they and the processes they waited for used, and those
// still running after d.
func reapOrphans(keep int, d time.Duration) (time.Duration, []int) {
	deadline := time.Now().Add(d)
	var cpu time.Duration
	for {
		pids := children(keep)
		if len(pids) == 0 {
			return cpu, nil
		}
		reaped := false
		for _, pid := range pids {
			var ws syscall.WaitStatus
			var ru syscall.Rusage
			if got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, &ru); err == nil && got == pid {
				cpu += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
				reaped = true
			}
		}
		if !reaped {
			if time.Now().After(deadline) {
				return cpu, pids
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// children lists this process's children but keep, from /proc.
func children(keep int) []int {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == keep || parentOf(pid) != self {
			continue
		}
		out = append(out, pid)
	}
	return out
}

// describe names pids by their command lines, for an error.
func describe(pids []int) []string {
	var out []string
	for _, pid := range pids {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		out = append(out, fmt.Sprintf("  %d %s", pid, strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))))
	}
	return out
}
