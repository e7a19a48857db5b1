package jail

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
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
