package jail

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// cgroupRoot is where the cgroup v1 hierarchies are mounted, one
// directory per controller.
const cgroupRoot = "/sys/fs/cgroup"

// group is the cgroup made for one jailed command: a directory in each
// cgroup v1 hierarchy whose controller bounds what Limits asks, under the
// caller's own cgroup there.
type group struct {
	dirs []string
	// procs are the directories' cgroup.procs, open for writing: the
	// jail joins them (it writes 0) before it starts anything.
	procs []*os.File
	// memory is the memory controller's directory, "" without one.
	memory string
}

var groupSeq atomic.Uint64

// newGroup makes the cgroup that bounds a command as l says. It returns
// nil and no error when this host gives the caller no cgroup v1
// hierarchy it may write (cgroup v2, or not root): the jail then bounds
// what rlimits can.
func newGroup(l Limits) (*group, error) {
	if !l.cgroup() {
		return nil, nil
	}
	own, err := ownCgroups()
	if err != nil {
		return nil, nil
	}
	name := fmt.Sprintf("fleetlift-jail-%d-%d", os.Getpid(), groupSeq.Add(1))
	g := &group{}
	settings := map[string][][2]string{}
	if l.Memory > 0 {
		m := strconv.FormatInt(l.Memory, 10)
		settings["memory"] = [][2]string{{"memory.limit_in_bytes", m}, {"memory.memsw.limit_in_bytes", m}}
	}
	if l.Processes > 0 {
		settings["pids"] = [][2]string{{"pids.max", strconv.Itoa(l.Processes)}}
	}
	if l.CPU > 0 {
		const period = 100000
		settings["cpu"] = [][2]string{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", strconv.Itoa(int(l.CPU * period))}}
	}
	for controller, files := range settings {
		parent, ok := own[controller]
		if !ok {
			continue
		}
		dir := filepath.Join(cgroupRoot, controller, parent, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			if len(g.dirs) == 0 && (errors.Is(err, os.ErrPermission) || errors.Is(err, os.ErrNotExist) || isReadOnly(err)) {
				return nil, nil // not a hierarchy this caller may write
			}
			g.remove()
			return nil, fmt.Errorf("jail cgroup: %w", err)
		}
		g.dirs = append(g.dirs, dir)
		for _, f := range files {
			err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0)
			// The swap limit exists only where swap accounting is on.
			if err != nil && !(f[0] == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist)) {
				g.remove()
				return nil, fmt.Errorf("jail cgroup: set %s: %w", f[0], err)
			}
		}
		procs, err := os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			g.remove()
			return nil, fmt.Errorf("jail cgroup: %w", err)
		}
		g.procs = append(g.procs, procs)
		if controller == "memory" {
			g.memory = dir
		}
	}
	if len(g.dirs) == 0 {
		return nil, nil
	}
	return g, nil
}

func isReadOnly(err error) bool {
	var pe *os.PathError
	return errors.As(err, &pe) && pe.Err.Error() == "read-only file system"
}

// ownCgroups maps each cgroup v1 controller of this process to its cgroup
// path, from /proc/self/cgroup.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue // cgroup v2's line
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	if len(own) == 0 {
		return nil, errors.New("no cgroup v1 hierarchy")
	}
	return own, sc.Err()
}

// closeProcs closes the caller's copies of cgroup.procs once the jail
// has its own.
func (g *group) closeProcs() {
	for _, f := range g.procs {
		f.Close()
	}
	g.procs = nil
}

// outOfMemory reports whether the kernel killed a process of the group
// for reaching its memory limit.
func (g *group) outOfMemory() bool {
	if g.memory == "" {
		return false
	}
	data, err := os.ReadFile(filepath.Join(g.memory, "memory.oom_control"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strings.TrimSpace(n) != "0"
		}
	}
	return false
}

// remove removes the group's directories: its processes are gone with the
// jail's PID namespace, but the kernel may take a moment to let go.
func (g *group) remove() {
	g.closeProcs()
	for _, dir := range g.dirs {
		for i := 0; i < 50; i++ {
			if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// joinCgroups moves the jail into the cgroups whose cgroup.procs the
// caller opened for it: writing 0 moves the writer, and what it starts
// later is born there.
func joinCgroups(fds []int) error {
	for _, fd := range fds {
		f := os.NewFile(uintptr(fd), "cgroup.procs")
		_, err := f.Write([]byte("0"))
		f.Close()
		if err != nil {
			return fmt.Errorf("join the jail's cgroup: %w", err)
		}
	}
	return nil
}
