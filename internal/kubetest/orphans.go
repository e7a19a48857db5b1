package kubetest

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// reapOrphans kills the kube-apiserver and etcd processes of assets whose
// test process died without stopping them (a panic, a test binary's
// timeout): they are orphans, adopted by init, and nothing will stop
// them. A control plane whose test (or bench) still runs has it as its
// parent and is left alone, so suites running side by side are safe.
func reapOrphans(assets string) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	binaries := map[string]bool{filepath.Join(assets, "kube-apiserver"): true, filepath.Join(assets, "etcd"): true}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || !binaries[strings.TrimSuffix(exe, " (deleted)")] {
			continue
		}
		if parentOf(pid) == 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// parentOf is pid's parent, 0 when it cannot be read.
func parentOf(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}
