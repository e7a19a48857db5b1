package jail

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A fork bomb in a jail stops at Limits.Processes: the command cannot
// have more at once, and the host is left its own.
func TestProcessLimitStopsAForkBomb(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	j.Spec.Limits.Processes = 40
	requireJail(t, j)
	// Each sleep holds its slot; the loop asks for 200. The count is the
	// shell's own (a glob): it may not fork either.
	code, out := run(t, j, b.ws, `
		i=0
		while [ $i -lt 200 ]; do (sleep 60 &) 2>/dev/null; i=$((i+1)); done
		set -- /proc/[0-9]*
		echo "processes: $#"`)
	var n int
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "processes: "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	if n == 0 {
		t.Fatalf("exit %d; no count of processes:\n%s", code, out)
	}
	if n > 40 {
		t.Errorf("%d processes ran at once in a jail limited to 40:\n%s", n, out)
	}
}

// A command that takes more memory than Limits.Memory is killed, and the
// jail says it ran out of memory. The bound needs a cgroup: as root here.
func TestMemoryLimitKillsAndSaysSo(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("the memory limit is a cgroup's, which only root may make on this host (cgroup v1): run the suite as root, as .ci/run does")
	}
	b := newBox(t)
	j := b.jail()
	j.Spec.Limits.Memory = 64 << 20
	requireJail(t, j)
	// tail holds a line without a newline whole: 300 MB of it.
	cmd, err := j.Command([]string{"sh", "-c", "head -c 300000000 /dev/zero | tail > /dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = b.ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a command took 300 MB in a jail limited to 64 MB and succeeded:\n%s", out)
	}
	if !cmd.OutOfMemory() {
		t.Errorf("the jail does not say the command ran out of memory (%v):\n%s", err, out)
	}
	if left, _ := filepath.Glob("/sys/fs/cgroup/memory/*/fleetlift-jail-*"); len(left) > 0 {
		for _, dir := range left {
			if strings.Contains(dir, "-"+strconv.Itoa(os.Getpid())+"-") {
				t.Errorf("the command's cgroup is left: %s", dir)
			}
		}
	}
}

// A jail whose caller runs in a container (a pod's, a Docker sandbox's)
// has no cgroup of its own: the container's cgroup file system is
// read-only, and shows the container's own cgroup as the hierarchy's
// root. When its command takes more memory than the container's limit,
// the kernel kills it there, and the jail says so, naming that limit.
// The container is made here as a runtime makes one: a memory cgroup of
// 64 MiB, bind-mounted read-only over the memory hierarchy in a mount
// namespace of the helper's own.
func TestContainerMemoryLimitIsNamed(t *testing.T) {
	// tail holds a line without a newline whole: 300 MB of it.
	out := inMemoryContainer(t, 64<<20, "head -c 300000000 /dev/zero | tail > /dev/null")
	if !strings.Contains(out, "own cgroup: false") {
		t.Errorf("the jail made a cgroup of its own in a read-only cgroup file system:\n%s", out)
	}
	if !strings.Contains(out, fmt.Sprintf("out of memory: true, limit %d", 64<<20)) {
		t.Errorf("the jail does not say its command reached the container's 64 MiB:\n%s", out)
	}
}

// A command of many small processes in a container, none of which the
// kernel would otherwise pick over the jail's caller at the container's
// limit, is what goes: the caller lives on to say that the command ran
// out of the container's 128 MiB.
func TestContainerMemoryLimitSparesTheCaller(t *testing.T) {
	// Each subshell holds its own copy of a 1 MB variable (the : keeps
	// it from becoming sleep).
	out := inMemoryContainer(t, 128<<20, `x=$(head -c 1000000 /dev/zero | tr '\0' x); i=0
		while [ $i -lt 400 ]; do (y="$x$i"; sleep 60; :) & i=$((i+1)); done; wait`)
	if !strings.Contains(out, fmt.Sprintf("out of memory: true, limit %d,", 128<<20)) {
		t.Errorf("the jail does not say its command of small processes reached the container's 128 MiB:\n%s", out)
	}
}

// A command whose memory grows slowly in a container is stopped before
// the container's limit, with 32 MiB of its 128 MiB kept for the jail's
// caller, which says so.
func TestContainerMemoryGuardKeepsTheCallersShare(t *testing.T) {
	out := inMemoryContainer(t, 128<<20, `x=$(head -c 1000000 /dev/zero | tr '\0' x); i=0
		while [ $i -lt 400 ]; do (y="$x$i"; sleep 60; :) & i=$((i+1)); sleep 0.02; done; wait`)
	if !strings.Contains(out, fmt.Sprintf("out of memory: true, limit %d, reserve %d", 128<<20, 32<<20)) {
		t.Errorf("the jail did not stop its growing command, keeping 32 MiB of the container's 128 MiB for its caller:\n%s", out)
	}
}

// inMemoryContainer runs script in the jail, as its caller runs in a
// container whose memory cgroup has limit bytes and is mounted read-only,
// and returns what the caller said (inContainer).
func inMemoryContainer(t *testing.T, limit int, script string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Fatal("a container's memory cgroup is made by root on this host (cgroup v1): run the suite as root, as .ci/run does")
	}
	own, err := ownCgroups()
	if err != nil {
		t.Fatal(err)
	}
	parent, err := mountedCgroup("memory", own["memory"])
	if err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(parent, fmt.Sprintf("fleetlift-test-container-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 100 && os.Remove(cg) != nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
		if err := os.WriteFile(filepath.Join(cg, f), []byte(strconv.Itoa(limit)), 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	b := newBox(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-ec", `
		echo $$ > "$1/cgroup.procs"
		mount --bind "$1" /sys/fs/cgroup/memory
		mount -o remount,bind,ro /sys/fs/cgroup/memory
		shift
		exec "$@"`, "sh", cg, exe, helperInContainer, b.state, "sh", "-c", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the helper in a %d MiB container: %v\n%s", limit>>20, err, out)
	}
	return string(out)
}

// helperInContainer runs inContainer (TestContainerMemoryLimitIsNamed).
const helperInContainer = "jail-test-in-container"

// inContainer runs args[1:] in the jail of the box whose state directory
// is args[0], with Limits that ask for no cgroup of memory, and says
// whether it ran out of memory and at what limit.
func inContainer(args []string) int {
	b := boxAt(args[0])
	j := b.jail()
	j.Spec.Limits.Memory = 1 << 40 // asked for; the file system refuses a cgroup
	cmd, err := j.Command(args[1:])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd.Dir = b.ws
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	err = cmd.Run()
	fmt.Printf("exit: %v; own cgroup: %v; out of memory: %v, limit %d, reserve %d\n", err, cmd.group != nil, cmd.OutOfMemory(), cmd.MemoryLimit(), cmd.MemoryReserve())
	return 0
}

// The scratch /tmp holds at most Limits.TmpSize, and no file the command
// writes grows past Limits.FileSize.
func TestTmpAndFileSizeLimits(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	j.Spec.Limits.TmpSize = 1 << 20
	j.Spec.Limits.FileSize = 4096
	requireJail(t, j)
	_, out := run(t, j, b.ws, `
		head -c 2000000 /dev/zero > /tmp/fill 2>/dev/null; echo "tmp: $(wc -c < /tmp/fill)"
		(head -c 100000 /dev/zero > big) 2>/dev/null; echo "file: $(wc -c < big)"`)
	for _, tc := range []struct {
		prefix string
		max    int
	}{{"tmp: ", 1 << 20}, {"file: ", 4096}} {
		got := -1
		for _, line := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(line, tc.prefix); ok {
				got, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if got < 0 || got > tc.max {
			t.Errorf("%s%d bytes; want at most %d:\n%s", tc.prefix, got, tc.max, out)
		}
	}
}

// A group an earlier jail left behind (its process killed before it
// removed it) under the name this one would take, as a pid used again
// brings, does not fail the command: the empty group is removed and
// made again.
func TestJailTakesOverAGroupADeadProcessLeft(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("the process limit is a cgroup's, which only root may make on this host (cgroup v1): run the suite as root, as .ci/run does")
	}
	own, err := ownCgroups()
	if err != nil {
		t.Fatal(err)
	}
	b := newBox(t)
	j := b.jail()
	j.Spec.Limits.Processes = 40
	requireJail(t, j)
	stale := filepath.Join(cgroupRoot, "pids", own["pids"], fmt.Sprintf("fleetlift-jail-%d-%d", os.Getpid(), groupSeq.Load()+1))
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(stale) })
	code, out := run(t, j, b.ws, `echo ran`)
	if code != 0 || !strings.Contains(out, "ran") {
		t.Errorf("exit %d beside a group a dead process left:\n%s", code, out)
	}
}
