package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// state is what Stop needs to undo and cannot find again from the
// directory alone, kept in Dir/state.json so that a later Start can
// clean up after a test process that died without calling Stop.
type state struct {
	Owner       int               `json:"owner"` // the test process's pid
	Sysctls     map[string]string `json:"sysctls,omitempty"`
	NewHostDirs []string          `json:"newHostDirs,omitempty"`
	InCluster   bool              `json:"inCluster,omitempty"` // kube-proxy's tables to delete
}

// saveState writes Dir/state.json.
func (n *Node) saveState() error {
	b, err := json.Marshal(state{Owner: os.Getpid(), Sysctls: n.sysctls, NewHostDirs: n.newHostDirs, InCluster: n.inCluster})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "state.json"), b, 0o600)
}

// reapStale cleans up after nodes whose test process died without
// stopping them (a panic, a test binary's timeout): their processes were
// killed with it (Pdeathsig), but their containers, mounts, cgroups,
// bridge and sysctls stay until someone undoes them. A node whose owner
// still runs is left alone, so test binaries running side by side are
// safe; so is one too young to have written its state.
func reapStale() error {
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "fleetlift-node-*"))
	if err != nil {
		return err
	}
	var errs []error
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "state.json"))
		if err != nil {
			if fi, serr := os.Stat(dir); serr == nil && time.Since(fi.ModTime()) > 10*time.Minute {
				b = []byte("{}")
			} else {
				continue
			}
		}
		var st state
		if err := json.Unmarshal(b, &st); err != nil {
			continue
		}
		if st.Owner > 0 && alive(st.Owner) {
			continue
		}
		id := filepath.Base(dir)
		n := &Node{Dir: dir, id: id, cgroupRoot: "/" + id, sysctls: st.Sysctls, newHostDirs: st.NewHostDirs, inCluster: st.InCluster}
		if err := n.reap(); err != nil {
			errs = append(errs, fmt.Errorf("clean up the stale node %s: %w", dir, err))
		}
	}
	return errors.Join(errs...)
}

// reap undoes what a node whose owner died left: it kills any process of
// the node still running, then does what Stop does after its processes
// are gone.
func (n *Node) reap() error {
	for _, pid := range pids() {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if strings.Contains(string(cmdline), n.Dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	errs := []error{n.killCgroups(), n.unmountAll(), n.removeCgroups(), n.restoreSysctls(),
		n.removeLogLinks(), n.removeBridge(), n.removeForward(), n.removeProxyTables(), n.removeCNIResults(), n.removeHostDirs()}
	errs = append(errs, os.RemoveAll(n.Dir))
	return errors.Join(errs...)
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
