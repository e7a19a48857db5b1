package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kernelTunables are the sysctls the kubelet sets at start
// (pkg/kubelet/cm setupKernelTunables); Stop puts them back.
var kernelTunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// hostDirs are directories outside Dir that the kubelet, containerd and
// the CNI library create at fixed paths: the device plugin socket's
// directory, the CNI result cache, containerd's shim socket directory and
// the kubelet's links to container logs. Stop removes those that did not
// exist before Start, when nothing but empty directories and sockets is
// left in them.
var hostDirs = []string{"/var/lib/kubelet", "/var/lib/cni", "/run/containerd", "/var/log/containers"}

// noteHostDirs records which of hostDirs do not exist yet.
func (n *Node) noteHostDirs() {
	for _, d := range hostDirs {
		if _, err := os.Lstat(d); errors.Is(err, os.ErrNotExist) {
			n.newHostDirs = append(n.newHostDirs, d)
		}
	}
}

// cniResults is where the CNI library records each pod sandbox's
// networks, one file per network and interface.
const cniResults = "/var/lib/cni/results"

// removeCNIResults removes the CNI records of the node's pod sandboxes
// (named after containerd's sandbox directories), which containerd
// removes when it tears a pod's network down and leaves when the node
// died without Stop.
func (n *Node) removeCNIResults() error {
	ids, err := os.ReadDir(filepath.Join(n.Dir, "containerd", "root", "io.containerd.grpc.v1.cri", "sandboxes"))
	if err != nil {
		return nil // no pod ever ran
	}
	var errs []error
	for _, id := range ids {
		files, _ := filepath.Glob(filepath.Join(cniResults, "*-"+id.Name()+"-*"))
		for _, f := range files {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// removeHostDirs removes the hostDirs Start created, if they hold only
// directories and sockets.
func (n *Node) removeHostDirs() error {
	var errs []error
	for _, d := range n.newHostDirs {
		var all []string
		_ = filepath.WalkDir(d, func(path string, e os.DirEntry, err error) error {
			if err == nil {
				all = append(all, path)
			}
			return nil
		})
		slices.Reverse(all) // children first
		for _, p := range all {
			fi, err := os.Lstat(p)
			if err != nil || !(fi.IsDir() || fi.Mode()&os.ModeSocket != 0) {
				continue
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s, which the node created: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Stop stops the kubelet and the controllers, removes every pod
// containerd runs, stops containerd, kills whatever is left in the
// node's cgroups, stops the control plane, unmounts everything under
// Dir, removes the cgroups, restores the sysctls the kubelet changed and
// removes Dir. It goes on after an error and returns them all.
func (n *Node) Stop() error {
	var errs []error
	for _, name := range []string{"kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"} {
		if p := n.proc(name); p != nil {
			errs = append(errs, p.stop(30*time.Second))
		}
	}
	if p := n.proc("containerd"); p != nil {
		select {
		case <-p.done:
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			errs = append(errs, n.removePods(ctx))
			cancel()
		}
		errs = append(errs, p.stop(30*time.Second))
	}
	// Shims outlive containerd; their containers are in the node's
	// cgroups.
	errs = append(errs, killShims(n.socket()), n.killCgroups())
	// The control plane before the bridge: with InCluster the API
	// server serves on an address on it, and talks to itself there
	// while it stops (it deletes its lease).
	if n.Env != nil {
		errs = append(errs, n.Env.Stop())
		n.Env = nil
	}
	errs = append(errs, n.unmountAll(), n.removeCgroups(), n.restoreSysctls(), n.removeLogLinks(), n.removeBridge(), n.removeForward(), n.removeProxyTables(), n.removeCNIResults(), n.removeHostDirs())
	errs = append(errs, os.RemoveAll(n.Dir))
	return errors.Join(errs...)
}

// Leftovers describes what of the node survives: processes, mounts under
// Dir, cgroups, Dir itself. Empty after a clean Stop.
func (n *Node) Leftovers() []string {
	var left []string
	for _, p := range n.procs {
		select {
		case <-p.done:
		default:
			left = append(left, fmt.Sprintf("process %s (pid %d)", p.name, p.cmd.Process.Pid))
		}
	}
	for _, pid := range pids() {
		cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if bytes.Contains(cmdline, []byte(n.Dir)) {
			left = append(left, fmt.Sprintf("process %d: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
		}
	}
	for _, m := range mountsUnder(n.Dir) {
		left = append(left, "mount "+m)
	}
	for _, c := range cgroupDirs(n.cgroupRoot) {
		left = append(left, "cgroup "+c)
	}
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.bridge())); err == nil {
		left = append(left, "network interface "+n.bridge())
	}
	if n.hasForward() {
		left = append(left, "iptables rule FORWARD "+strings.Join(n.forwardRule()[1:], " "))
	}
	if n.inCluster {
		for _, t := range proxyTables() {
			left = append(left, "nftables table "+t)
		}
	}
	for _, d := range n.newHostDirs {
		if _, err := os.Lstat(d); err == nil {
			left = append(left, "directory "+d)
		}
	}
	if _, err := os.Stat(n.Dir); err == nil {
		left = append(left, "directory "+n.Dir)
	}
	return left
}

// makeCgroupRoot creates the kubelet's cgroup root in every cgroup v1
// hierarchy (the kubelet requires it to exist), with the cpuset
// hierarchy's cpus and mems copied from its parent so that tasks can join
// the cgroups below it.
func (n *Node) makeCgroupRoot() error {
	for _, m := range cgroupMounts() {
		if m.v2 {
			continue
		}
		dir := filepath.Join(m.path, n.cgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if !strings.HasSuffix(m.path, "/cpuset") {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(m.path, f))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
				return fmt.Errorf("set %s of %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// killCgroups kills every process in the node's cgroups.
func (n *Node) killCgroups() error {
	var errs []error
	for _, dir := range cgroupDirs(n.cgroupRoot) {
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
						errs = append(errs, fmt.Errorf("kill pid %d of %s: %w", pid, filepath.Dir(path), err))
					}
				}
			}
			return nil
		})
	}
	return errors.Join(errs...)
}

// removeCgroups removes the node's cgroups, deepest first, waiting a
// little for killed processes to leave them.
func (n *Node) removeCgroups() error {
	var errs []error
	for _, dir := range cgroupDirs(n.cgroupRoot) {
		var all []string
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				all = append(all, path)
			}
			return nil
		})
		slices.Reverse(all)
		for _, c := range all {
			var err error
			for try := 0; try < 50; try++ {
				if err = syscall.Rmdir(c); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", c, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unmountAll unmounts everything mounted under the node's directory,
// the latest mount first (the kubelet bind-mounts its root directory,
// containerd mounts snapshots and shm).
func (n *Node) unmountAll() error {
	for pass := 0; pass < 5; pass++ {
		ms := mountsUnder(n.Dir)
		if len(ms) == 0 {
			return nil
		}
		for i := len(ms) - 1; i >= 0; i-- {
			if err := syscall.Unmount(ms[i], 0); err != nil {
				_ = syscall.Unmount(ms[i], syscall.MNT_DETACH)
			}
		}
	}
	if ms := mountsUnder(n.Dir); len(ms) > 0 {
		return fmt.Errorf("still mounted: %s", strings.Join(ms, ", "))
	}
	return nil
}

// saveSysctls records the kernel tunables the kubelet will change.
func (n *Node) saveSysctls() error {
	n.sysctls = map[string]string{}
	for _, k := range kernelTunables {
		b, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err != nil {
			return fmt.Errorf("read sysctl %s: %w", k, err)
		}
		n.sysctls[k] = strings.TrimSpace(string(b))
	}
	return nil
}

// restoreSysctls puts back the kernel tunables saveSysctls recorded.
func (n *Node) restoreSysctls() error {
	var errs []error
	for k, v := range n.sysctls {
		p := filepath.Join("/proc/sys", k)
		if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// removeLogLinks removes the links the kubelet makes in
// /var/log/containers to the node's pod logs.
func (n *Node) removeLogLinks() error {
	entries, err := os.ReadDir("/var/log/containers")
	if err != nil {
		return nil
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, n.Dir+"/") {
			errs = append(errs, os.Remove(p))
		}
	}
	return errors.Join(errs...)
}

// forwardRule is the iptables rule, in the filter table's FORWARD
// chain, that lets pods on the node's bridge reach each other (a sandbox
// its worker's gateway) where br_netfilter hands bridged traffic to
// iptables: a Docker engine loads it and sets FORWARD's policy to DROP.
func (n *Node) forwardRule() []string {
	return []string{"FORWARD", "-i", n.bridge(), "-o", n.bridge(), "-m", "comment", "--comment", n.id, "-j", "ACCEPT"}
}

// allowForward puts forwardRule first in FORWARD, when this machine
// has iptables (without it nothing filters bridged traffic).
func (n *Node) allowForward() error {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, n.forwardRule()...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("let pods on bridge %s reach each other (iptables -I FORWARD): %v: %s", n.bridge(), err, bytes.TrimSpace(out))
	}
	return nil
}

// hasForward reports whether forwardRule is in FORWARD.
func (n *Node) hasForward() bool {
	if _, err := exec.LookPath("iptables"); err != nil {
		return false
	}
	return exec.Command("iptables", append([]string{"-w", "-C"}, n.forwardRule()...)...).Run() == nil
}

// removeForward deletes forwardRule from FORWARD.
func (n *Node) removeForward() error {
	for n.hasForward() {
		if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, n.forwardRule()...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables -D FORWARD for bridge %s: %v: %s", n.bridge(), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// removeBridge deletes the pods' bridge.
func (n *Node) removeBridge() error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", n.bridge())); err != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", n.bridge()).CombinedOutput(); err != nil {
		return fmt.Errorf("delete bridge %s: %v: %s", n.bridge(), err, bytes.TrimSpace(out))
	}
	return nil
}

// killShims kills the containerd shims serving the containerd at socket.
func killShims(socket string) error {
	var errs []error
	for _, pid := range pids() {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("containerd-shim")) || !bytes.Contains(cmdline, []byte(socket)) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill shim %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}

// pids are the processes running now.
func pids() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() {
			out = append(out, pid)
		}
	}
	return out
}

// mountsUnder are the mount points at or under dir, in mount order.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupMount is a mounted cgroup hierarchy.
type cgroupMount struct {
	path string
	v2   bool
}

// cgroupMounts are the cgroup hierarchies mounted here.
func cgroupMounts() []cgroupMount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []cgroupMount
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(s.Text())
		i := slices.Index(fields, "-")
		if i < 0 || i+1 >= len(fields) || fields[3] != "/" {
			continue
		}
		switch fields[i+1] {
		case "cgroup":
			out = append(out, cgroupMount{path: unescapeMount(fields[4])})
		case "cgroup2":
			out = append(out, cgroupMount{path: unescapeMount(fields[4]), v2: true})
		}
	}
	return out
}

// cgroupDirs are the directories of the cgroup root in every hierarchy
// that has one.
func cgroupDirs(root string) []string {
	if root == "" || root == "/" {
		return nil
	}
	var out []string
	for _, m := range cgroupMounts() {
		dir := filepath.Join(m.path, root)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}
