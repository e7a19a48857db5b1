package jail

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
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
	// memory is the memory controller's directory, "" without one, and
	// limit the bound set there.
	memory string
	limit  int64
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
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, os.ErrExist) {
			// Left by a jail of an earlier process with this one's
			// pid, killed before it removed its group: that process is
			// gone, and an empty cgroup is removed as a directory is.
			if os.Remove(dir) == nil {
				err = os.Mkdir(dir, 0o755)
			}
		}
		if err != nil {
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
			g.memory, g.limit = dir, l.Memory
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
// for reaching its memory limit, and that limit.
func (g *group) outOfMemory() (limit int64, killed bool) {
	if g.memory == "" {
		return 0, false
	}
	n, err := oomKills(g.memory)
	return g.limit, err == nil && n > 0
}

// oomKills is how many processes the kernel killed in the memory cgroup
// dir for reaching its limit (memory.oom_control's oom_kill).
func oomKills(dir string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, "memory.oom_control"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if n, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.ParseUint(strings.TrimSpace(n), 10, 64)
		}
	}
	return 0, errors.New("memory.oom_control has no oom_kill")
}

// memoryWatch watches the memory cgroup the caller itself runs in, for a
// command whose jail has no cgroup of its own: in a container, the
// container's (a pod's, whose limit its spec sets), where the cgroup
// file system is read-only. The jail and its command are born there, and
// the kernel kills in it when the container reaches its limit.
type memoryWatch struct {
	dir string
	// kills is the cgroup's count of kills when the command started.
	kills uint64
	// limit is the cgroup's memory limit in bytes; 0 when it has none.
	limit int64
}

// watchEnclosing starts watching the caller's memory cgroup; nil where
// it has none this process can read (cgroup v2, no memory controller) or
// none that bounds anything.
func watchEnclosing() *memoryWatch {
	own, err := ownCgroups()
	if err != nil || own["memory"] == "" {
		return nil
	}
	dir, err := mountedCgroup("memory", own["memory"])
	if err != nil {
		return nil
	}
	kills, err := oomKills(dir)
	if err != nil {
		return nil
	}
	return &memoryWatch{dir: dir, kills: kills, limit: memoryLimit(dir)}
}

// memoryLimit is the memory cgroup dir's limit in bytes; 0 when it has
// none or it cannot be read.
func memoryLimit(dir string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, "memory.limit_in_bytes"))
	if err != nil {
		return 0
	}
	limit, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if limit >= unlimited || limit < 0 {
		return 0 // no bound of its own: the machine's memory is
	}
	return limit
}

// memoryReserve is the memory of a container's limit the guard keeps
// for the jail's caller (the agent, which reads and reports what the
// command left): an eighth of the limit, at least 32 MiB and at most
// 256 MiB.
func memoryReserve(limit int64) int64 { return min(max(limit/8, 32<<20), 256<<20) }

// guardEvery is how often the guard reads the cgroup: two small files.
const guardEvery = 100 * time.Millisecond

// guard stops the command whose jail is pid (leading its process group)
// once the watched cgroup's unreclaimable memory comes within
// memoryReserve of its limit, storing the reserve in stopped; it returns
// then, or when done is closed. It guards nothing in a cgroup without a
// limit.
func (w *memoryWatch) guard(pid int, done <-chan struct{}, stopped *atomic.Int64) {
	if w.limit == 0 {
		return
	}
	reserve := memoryReserve(w.limit)
	t := time.NewTicker(guardEvery)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		used, err := w.unreclaimable()
		if err != nil || used < w.limit-reserve {
			continue
		}
		stopped.Store(reserve)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return
	}
}

// unreclaimable is the memory of the watched cgroup the kernel cannot
// take back without killing: all it charges (processes' memory, tmpfs,
// the kernel's for its processes) but the page cache of files, which it
// can drop or write back.
func (w *memoryWatch) unreclaimable() (int64, error) {
	data, err := os.ReadFile(filepath.Join(w.dir, "memory.usage_in_bytes"))
	if err != nil {
		return 0, err
	}
	usage, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memory.usage_in_bytes: %w", err)
	}
	stat, err := os.ReadFile(filepath.Join(w.dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		name, v, _ := strings.Cut(line, " ")
		if name == "total_active_file" || name == "total_inactive_file" {
			n, _ := strconv.ParseInt(v, 10, 64)
			usage -= n
		}
	}
	return max(usage, 0), nil
}

// outOfMemory reports whether the kernel killed a process in the watched
// cgroup for memory since the watch began, and the cgroup's limit then.
// Another process of the container may be the one killed: the command
// shares that memory, so its end is no less due to it.
func (w *memoryWatch) outOfMemory() (limit int64, killed bool) {
	n, err := oomKills(w.dir)
	if err != nil || n <= w.kills {
		return 0, false
	}
	return memoryLimit(w.dir), true
}

// unlimited is where a cgroup v1 memory.limit_in_bytes means no limit
// (the kernel shows about 2^63, rounded to its page size).
const unlimited = 1 << 62

// mountedCgroup is where the cgroup v1 hierarchy of controller shows the
// cgroup path (from /proc/self/cgroup) in this mount namespace: a
// container mounts its own cgroup as the hierarchy's root, so the path
// is relative to the mount's root (/proc/self/mountinfo's fourth field).
// Of mounts on the same point the last (the one on top) is seen.
func mountedCgroup(controller, path string) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var candidates []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		if !slices.Contains(strings.Split(fields[sep+3], ","), controller) {
			continue
		}
		root, point := fields[3], fields[4]
		rel, ok := strings.CutPrefix(path, root)
		if !ok || (root != "/" && rel != "" && !strings.HasPrefix(rel, "/")) {
			continue // another part of the hierarchy
		}
		candidates = append(candidates, filepath.Join(point, rel))
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	for _, dir := range slices.Backward(candidates) {
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no mount shows the %s cgroup %s", controller, path)
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
