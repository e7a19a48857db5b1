package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one process as /proc shows it.
type proc struct {
	pid, ppid, pgid, sid int
	// exe is the executable's path; "" when it cannot be read.
	exe string
}

// readProc reads /proc/<pid>; ok is false for a process that is gone or a
// zombie (dead, waiting to be reaped: nothing left to kill).
func readProc(pid int) (p proc, cmdline, environ []byte, ok bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return p, nil, nil, false
	}
	// "pid (comm) state ppid pgrp session ...": comm may hold spaces and
	// parentheses, so fields are counted from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return p, nil, nil, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 4 || f[0] == "Z" || f[0] == "X" {
		return p, nil, nil, false
	}
	p.pid = pid
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgid, _ = strconv.Atoi(f[2])
	p.sid, _ = strconv.Atoi(f[3])
	p.exe, _ = os.Readlink(filepath.Join(dir, "exe"))
	cmdline, _ = os.ReadFile(filepath.Join(dir, "cmdline"))
	environ, _ = os.ReadFile(filepath.Join(dir, "environ"))
	return p, cmdline, environ, true
}

// family lists the live processes of the install whose state directory
// is stateDir: those whose command line or environment names it (up
// carries it in stateEnv, agents in --workspace and HOME, jails in their
// spec), and every descendant of these (the commands in a jail, the git
// an agent runs). The harness itself is never part of it. Nothing else is
// matched: a process of someone else's on this machine is never killed.
func family(stateDir string) ([]proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("read /proc: %w", err)
	}
	self := os.Getpid()
	needle := []byte(stateDir)
	all := map[int]proc{}
	in := map[int]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self || pid == 1 {
			continue
		}
		p, cmdline, environ, ok := readProc(pid)
		if !ok {
			continue
		}
		all[pid] = p
		if bytes.Contains(cmdline, needle) || bytes.Contains(environ, needle) {
			in[pid] = true
		}
	}
	// Close over descendants: a process whose parent is in is in.
	for grew := true; grew; {
		grew = false
		for pid, p := range all {
			if !in[pid] && in[p.ppid] {
				in[pid] = true
				grew = true
			}
		}
	}
	var out []proc
	for pid := range in {
		out = append(out, all[pid])
	}
	return out, nil
}

// killTree sends SIGKILL to every process of the install's family, again
// and again until none is left (a process may fork while its siblings
// die) or wait runs out. It returns the processes it killed.
func killTree(stateDir string, wait time.Duration) ([]proc, error) {
	var killed []proc
	seen := map[int]bool{}
	deadline := time.Now().Add(wait)
	for {
		fam, err := family(stateDir)
		if err != nil || len(fam) == 0 {
			return killed, err
		}
		if time.Now().After(deadline) {
			return killed, fmt.Errorf("processes still alive after SIGKILL: %s", describe(fam))
		}
		for _, p := range fam {
			err := syscall.Kill(p.pid, syscall.SIGKILL)
			switch {
			case err == nil && !seen[p.pid]:
				seen[p.pid] = true
				killed = append(killed, p)
			case err != nil && !errors.Is(err, syscall.ESRCH):
				return killed, fmt.Errorf("kill %d: %w", p.pid, err)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killSome sends SIGKILL to the processes of the install's family that pick
// selects, as they are at this moment (what they start afterwards lives
// on), and waits up to wait for them to be gone. It returns the processes
// it killed.
func killSome(stateDir string, pick func(proc) bool, wait time.Duration) ([]proc, error) {
	fam, err := family(stateDir)
	if err != nil {
		return nil, err
	}
	var victims []proc
	for _, p := range fam {
		if pick(p) {
			victims = append(victims, p)
		}
	}
	for _, p := range victims {
		if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return nil, fmt.Errorf("kill %d: %w", p.pid, err)
		}
	}
	deadline := time.Now().Add(wait)
	for {
		var left []proc
		for _, p := range victims {
			if _, _, _, alive := readProc(p.pid); alive {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return victims, nil
		}
		if time.Now().After(deadline) {
			return victims, fmt.Errorf("processes still alive after SIGKILL: %s", describe(left))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// census counts processes by executable: "fleetlift 1, fleetlift-agent 8, sh 2".
func census(ps []proc) string {
	n := map[string]int{}
	for _, p := range ps {
		name := filepath.Base(strings.TrimSuffix(p.exe, " (deleted)"))
		if p.exe == "" {
			name = "?"
		}
		n[name]++
	}
	names := make([]string, 0, len(n))
	for name := range n {
		names = append(names, name)
	}
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %d", name, n[name]))
	}
	return strings.Join(parts, ", ")
}

func describe(ps []proc) string {
	var s []string
	for _, p := range ps {
		s = append(s, fmt.Sprintf("%d (%s)", p.pid, p.exe))
	}
	return strings.Join(s, ", ")
}
