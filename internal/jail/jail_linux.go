package jail

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Command returns the command that runs argv in the jail. The caller sets
// Dir (which must be inside a Writable directory), Env, the standard
// streams, and starts it; the returned command leads a process group of
// its own and is killed with SIGKILL if the thread that started it dies.
// Killing it kills everything the command started.
func (j *Jail) Command(argv []string) (*Cmd, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, errors.New("jail: empty command")
	}
	g, err := newGroup(j.Spec.Limits)
	if err != nil {
		return nil, err
	}
	var fds []int
	if g != nil {
		// After the report pipe (reportFD).
		for i := range g.procs {
			fds = append(fds, reportFD+1+i)
		}
	}
	cmd, err := j.command(argv, false, fds)
	if err != nil {
		if g != nil {
			g.remove()
		}
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		if g != nil {
			g.remove()
		}
		return nil, fmt.Errorf("jail: %w", err)
	}
	cmd.ExtraFiles = []*os.File{w} // reportFD
	if g != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, g.procs...)
	}
	return &Cmd{Cmd: cmd, report: r, reportW: w, group: g}, nil
}

func (j *Jail) command(argv []string, probe bool, cgroupFDs []int) (*exec.Cmd, error) {
	spec := j.Spec
	spec.UID, spec.GID = os.Getuid(), os.Getgid()
	spec, err := spec.resolved()
	if err != nil {
		return nil, err
	}
	args, err := j.args(spec, probe, argv, cgroupFDs)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(j.Self[0], args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET,
		// Root inside, so that the jail's init may mount; it maps to the
		// caller's own ids, and the command itself runs as those again
		// (see initMain).
		UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: spec.UID, Size: 1}},
		GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: spec.GID, Size: 1}},
		GidMappingsEnableSetgroups: false,
		Pdeathsig:                  syscall.SIGKILL,
		Setpgid:                    true,
	}
	return cmd, nil
}

// Check reports whether this kernel lets j jail commands: it sets up a
// jail with j's spec and runs nothing in it. The error says what failed.
func (j *Jail) Check() error {
	cmd, err := j.command(nil, true, nil)
	if err != nil {
		return err
	}
	// The probe runs nothing: it needs no working directory of the
	// caller's, which may be one the jail hides or makes private (a
	// checkout under /tmp).
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("jail unavailable: %s", strings.TrimPrefix(msg, "fleetlift jail: "))
	}
	return nil
}

// Main is the jail's entry point: args are the arguments after Self. It
// returns the exit code: the command's, 128+n when signal n killed it,
// ExitSetup or ExitNotFound when the jail failed.
func Main(args []string) int {
	if len(args) == 1 && args[0] == flagProtocol {
		fmt.Println(Protocol)
		return 0
	}
	p, err := parseArgs(args)
	if err != nil {
		return fail(ExitSetup, "%v", err)
	}
	// First of all: everything the jail starts is born in its cgroup.
	if err := joinCgroups(p.cgroups); err != nil {
		return fail(ExitSetup, "%v", err)
	}
	if p.report > 0 {
		// Neither the command nor anything it starts may write here.
		unix.CloseOnExec(p.report)
		report = os.NewFile(uintptr(p.report), "jail report")
	}
	if p.drop {
		return dropMain()
	}
	return initMain(*p.spec, p.argv, p.probe, os.Args[1:len(os.Args)-len(args)])
}

// report, when set, is where the jail says why it could not be made
// (Cmd.SetupError).
var report *os.File

// setupFail is a failure to make the jail: told on standard error, as
// fail does, and on the report.
func setupFail(format string, args ...any) int {
	if report != nil {
		fmt.Fprintf(report, format+"\n", args...)
	}
	return fail(ExitSetup, format, args...)
}

// initMain is the PID namespace's init: it makes the file system the spec
// describes, gives up the means to gain privileges for itself and what it
// starts, then runs the command as the caller's ids (see start), reaps
// every orphan, and exits with the command's status, which ends every
// process left.
func initMain(spec Spec, argv []string, probe bool, self []string) int {
	if os.Getpid() != 1 {
		return setupFail("not started as a PID namespace's init (use Jail.Command)")
	}
	cwd, err := os.Getwd()
	if err != nil {
		return setupFail("working directory: %v", err)
	}
	// The sockets forwards lead to are opened before the mounts, which
	// may hide them from the command.
	outs, err := openForwards(spec.Forwards)
	if err != nil {
		return setupFail("%v", err)
	}
	if err := mountAll(spec); err != nil {
		return setupFail("%v", err)
	}
	if err := loopbackUp(); err != nil {
		return setupFail("%v", err)
	}
	if err := serveForwards(spec.Forwards, outs); err != nil {
		return setupFail("%v", err)
	}
	if err := setLimits(spec.Limits); err != nil {
		return setupFail("%v", err)
	}
	// The old working directory is on the now read-only mount beneath;
	// enter it again through the new ones.
	if err := os.Chdir(cwd); err != nil {
		return setupFail("working directory %s: %v", cwd, err)
	}
	// no_new_privs and the capability sets are per thread, and a child
	// inherits its parent thread's: the command is started from this one.
	runtime.LockOSThread()
	if err := confine(spec.UID == 0); err != nil {
		return setupFail("%v", err)
	}
	proc, code := start(spec, argv, probe, self)
	if proc == nil {
		return code
	}

	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range sigs {
			_ = proc.Signal(s)
		}
	}()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return fail(ExitSetup, "wait: %v", err)
		}
		if pid != proc.Pid {
			continue // an orphan, reaped
		}
		if ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ws.ExitStatus()
	}
}

// start starts the command, or for a probe this executable as a command
// that only exits, as the caller's ids: a caller other than root as
// itself in a nested user and mount namespace (so the mounts are locked,
// and the command holds no capability once it runs a program), root as
// root of the jail's own user namespace, which the bounding set confine
// emptied keeps without capabilities too. It returns the process, or nil
// and the exit code when it could not start.
func start(spec Spec, argv []string, probe bool, self []string) (*os.Process, int) {
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr}
	// A session of its own: the command has no controlling terminal, so
	// it can neither open /dev/tty nor type into the operator's shell
	// (TIOCSTI) when the worker runs under one.
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	if spec.UID != 0 {
		sys.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
		sys.UidMappings = []syscall.SysProcIDMap{{ContainerID: spec.UID, HostID: 0, Size: 1}}
		sys.GidMappings = []syscall.SysProcIDMap{{ContainerID: spec.GID, HostID: 0, Size: 1}}
		sys.GidMappingsEnableSetgroups = false
	}
	path, args := "/proc/self/exe", append(append([]string{os.Args[0]}, self...), flagDrop, flagProbe, "--")
	if !probe {
		var err error
		path, err = exec.LookPath(argv[0])
		if err != nil && !errors.Is(err, exec.ErrDot) {
			return nil, fail(ExitNotFound, "%v", err)
		}
		args = argv
	}
	proc, err := os.StartProcess(path, args, &os.ProcAttr{Env: commandEnv(os.Environ()), Files: files, Sys: sys})
	if err != nil {
		return nil, setupFail("start %s: %v", argv0(argv), err)
	}
	return proc, 0
}

// confine sets no_new_privs, so that nothing started from this thread
// gains privileges through a setuid or file-capability program, and makes
// the jail's init undumpable. For a command that runs as root here
// (root's), it empties the bounding, inheritable and ambient capability
// sets and the jail's own, so that no program run as root here has a
// capability. Otherwise the jail keeps its capabilities, which mapping
// the command's user namespace needs (CAP_SETFCAP): the command runs a
// program as a user other than root there, which leaves it none.
func confine(root bool) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %v", err)
	}
	// Not dumpable: the command, as the same user, may not read or write
	// the jail's own /proc entries (its report descriptor, its memory).
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the jail undumpable: %v", err)
	}
	if !root {
		return nil
	}
	last := lastCap()
	for c := 0; c <= last; c++ {
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in == 0 {
			continue // gone already (in the probe, the jail's init dropped it)
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %v", c, err)
		}
	}
	_ = unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	// The jail needs none of them now; a command run as root gets its
	// permitted set from the inheritable and bounding sets, both empty.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear capabilities: %v", err)
	}
	return nil
}

func argv0(argv []string) string {
	if len(argv) == 0 {
		return "(probe)"
	}
	return argv[0]
}

// dropMain is the probe's command (Check), started as start starts a
// command: it gives up what the jail gives up before a command runs
// (confine), in the command's own namespaces, and exits.
func dropMain() int {
	runtime.LockOSThread()
	if err := confine(os.Geteuid() == 0); err != nil {
		return setupFail("%v", err)
	}
	return 0
}

// lastCap is the highest capability number this kernel knows.
func lastCap() int {
	data, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			return n
		}
	}
	return 63
}

// mount is one mount of the jail's file system.
type mount struct {
	path string
	kind mountKind
	// fd is an O_PATH descriptor of what a bind mount shows, opened before
	// anything was mounted over it.
	fd int
	// dir reports whether path is a directory.
	dir bool
}

type mountKind int

const (
	kindScratch mountKind = iota
	kindHidden
	kindWritable
	kindReadable
)

// mountAll builds the jail's file system: everything read-only, a /dev
// of its own (privateDev), then from the outermost path inwards the
// scratch, hidden, writable and readable mounts, then a /proc for the new
// PID namespace.
func mountAll(spec Spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	var mounts []*mount
	add := func(paths []string, kind mountKind) error {
		for _, p := range paths {
			m := &mount{path: p, kind: kind, fd: -1}
			fi, err := os.Stat(p)
			if err != nil {
				return fmt.Errorf("jail path %s: %w", p, err)
			}
			m.dir = fi.IsDir()
			if kind == kindWritable && !m.dir {
				return fmt.Errorf("writable path %s is not a directory", p)
			}
			if kind == kindWritable || kind == kindReadable {
				if m.fd, err = unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0); err != nil {
					return fmt.Errorf("open %s: %w", p, err)
				}
			}
			mounts = append(mounts, m)
		}
		return nil
	}
	defer func() {
		for _, m := range mounts {
			if m.fd >= 0 {
				unix.Close(m.fd)
			}
		}
	}()
	for _, g := range []struct {
		paths []string
		kind  mountKind
	}{{spec.Scratch, kindScratch}, {spec.Hidden, kindHidden}, {spec.Writable, kindWritable}, {spec.Readable, kindReadable}} {
		if err := add(g.paths, g.kind); err != nil {
			return err
		}
	}
	// Outer paths first: a mount inside another must come after it.
	sort.SliceStable(mounts, func(i, j int) bool {
		return strings.Count(mounts[i].path, "/") < strings.Count(mounts[j].path, "/")
	})

	if err := unix.MountSetattr(unix.AT_FDCWD, "/", unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make the file system read-only: %w", err)
	}
	if err := privateDev(); err != nil {
		return err
	}
	sealed := []string{"/dev"} // tmpfs made read-only once filled
	for _, m := range mounts {
		if err := mountpoint(m); err != nil {
			return err
		}
		switch m.kind {
		case kindScratch:
			opts := "mode=1777"
			if spec.Limits.TmpSize > 0 {
				opts += ",size=" + strconv.FormatInt(spec.Limits.TmpSize, 10)
			}
			if err := unix.Mount("tmpfs", m.path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
				return fmt.Errorf("private %s: %w", m.path, err)
			}
		case kindHidden:
			if !m.dir {
				if err := unix.Mount("/dev/null", m.path, "", unix.MS_BIND, ""); err != nil {
					return fmt.Errorf("hide %s: %w", m.path, err)
				}
				if err := readOnly(m.path); err != nil {
					return fmt.Errorf("hide %s: %w", m.path, err)
				}
				continue
			}
			if err := unix.Mount("tmpfs", m.path, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=64k"); err != nil {
				return fmt.Errorf("hide %s: %w", m.path, err)
			}
			sealed = append(sealed, m.path)
		case kindWritable, kindReadable:
			src := "/proc/self/fd/" + strconv.Itoa(m.fd)
			if err := unix.Mount(src, m.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("show %s: %w", m.path, err)
			}
			attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
			if m.kind == kindWritable {
				attr = &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}
			}
			if err := unix.MountSetattr(unix.AT_FDCWD, m.path, unix.AT_RECURSIVE, attr); err != nil {
				return fmt.Errorf("show %s: %w", m.path, err)
			}
		}
	}
	for _, p := range sealed {
		if err := readOnly(p); err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc for the PID namespace: %w", err)
	}
	return maskProc()
}

// procMasked are the /proc entries a jailed command does not see, and
// procReadOnly those it sees read-only: what container runtimes mask
// (Docker's MaskedPaths and ReadonlyPaths), which say about the host
// (its devices, interrupts, timers, keys, scheduler) what work on it
// needs not know. A Docker sandbox's container masks none of its own,
// since the kernel lets the jail mount a /proc only where the one it
// sees is not partly covered; the jail masks its own instead.
var (
	procMasked   = []string{"acpi", "asound", "interrupts", "kcore", "keys", "latency_stats", "sched_debug", "scsi", "timer_list", "timer_stats"}
	procReadOnly = []string{"bus", "fs", "irq", "sys", "sysrq-trigger"}
)

// maskProc masks procMasked in the jail's /proc (an empty read-only
// tmpfs over a directory, /dev/null over a file) and makes procReadOnly
// read-only.
func maskProc() error {
	for _, n := range procMasked {
		p := "/proc/" + n
		fi, err := os.Lstat(p)
		if err != nil {
			continue // not on this kernel
		}
		if fi.IsDir() {
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=0")
		} else if err = unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err == nil {
			err = readOnly(p)
		}
		if err != nil {
			return fmt.Errorf("mask %s: %w", p, err)
		}
	}
	for _, n := range procReadOnly {
		p := "/proc/" + n
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
		if err := unix.MountSetattr(unix.AT_FDCWD, p, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
	}
	return nil
}

// mountpoint makes sure m.path exists to mount on: a path inside a file
// system the jail mounted (a hidden or scratch tmpfs) may not.
func mountpoint(m *mount) error {
	if _, err := os.Lstat(m.path); err == nil {
		return nil
	}
	if m.dir {
		if err := os.MkdirAll(m.path, 0o755); err != nil {
			return fmt.Errorf("mount point %s: %w", m.path, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(m.path), 0o755); err != nil {
		return fmt.Errorf("mount point %s: %w", m.path, err)
	}
	f, err := os.OpenFile(m.path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("mount point %s: %w", m.path, err)
	}
	return f.Close()
}

func readOnly(path string) error {
	return unix.MountSetattr(unix.AT_FDCWD, path, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
}

// devNodes are the host's device files a jailed command sees in its /dev.
// tty is there for programs that look for it: with no controlling
// terminal, opening it fails (ENXIO).
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// privateDev replaces /dev with a small tmpfs that holds devNodes (bound
// from the host's), a pseudo-terminal instance of the jail's own at
// /dev/pts (so that programs that need a terminal get one), and the usual
// links. The host's terminals (/dev/pts/N, /dev/console, /dev/ttyN) are
// not in it: a device file on a read-only mount can still be written, and
// the command must not write escape sequences to the operator's terminal.
// mountAll seals it read-only.
func privateDev() error {
	fds := make(map[string]int, len(devNodes))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, n := range devNodes {
		fd, err := unix.Open("/dev/"+n, unix.O_PATH|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return fmt.Errorf("private /dev: open /dev/%s: %w", n, err)
		}
		fds[n] = fd
	}
	if err := unix.Mount("tmpfs", "/dev", "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("private /dev: %w", err)
	}
	for n, fd := range fds {
		if err := mountpoint(&mount{path: "/dev/" + n}); err != nil {
			return fmt.Errorf("private /dev: %w", err)
		}
		if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(fd), "/dev/"+n, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("private /dev: bind /dev/%s: %w", n, err)
		}
	}
	for _, d := range []string{"/dev/pts", "/dev/shm"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fmt.Errorf("private /dev: %w", err)
		}
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("private /dev: pseudo-terminals: %w", err)
	}
	for link, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd",
		"stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, "/dev/"+link); err != nil {
			return fmt.Errorf("private /dev: %w", err)
		}
	}
	return nil
}

// loopbackUp brings up the loopback interface of the jail's network
// namespace, its only one: the command may serve and reach itself on
// 127.0.0.1 and ::1 (a repository's tests often do), and nothing else,
// neither the host's loopback, where the control plane listens, nor any
// other network.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: read its flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: bring it up: %w", err)
	}
	return nil
}

// openForwards opens each forward's socket as an O_PATH descriptor, which
// the relay connects through (/proc/self/fd/N) once the socket's path is
// out of sight.
func openForwards(fs []Forward) ([]int, error) {
	fds := make([]int, 0, len(fs))
	for _, f := range fs {
		fd, err := unix.Open(f.Socket, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return nil, fmt.Errorf("forward %d: open %s: %w", f.Port, f.Socket, err)
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

// serveForwards listens on 127.0.0.1:port of the jail's loopback for each
// forward and relays every connection to its socket, for the jail's life:
// the jail's init is the relay, and dies with the command.
func serveForwards(fs []Forward, fds []int) error {
	for i, f := range fs {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.Port)))
		if err != nil {
			return fmt.Errorf("forward %d: %w", f.Port, err)
		}
		target := "/proc/self/fd/" + strconv.Itoa(fds[i])
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go relay(c, target)
			}
		}()
	}
	return nil
}

// relay copies between c and a new connection to the Unix socket at
// target until either side is done.
func relay(c net.Conn, target string) {
	defer c.Close()
	out, err := net.Dial("unix", target)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, c)
	go pipe(c, out)
	<-done
	<-done
}

// setLimits sets the rlimits of Limits for what the jail starts: the
// largest file, and the most processes of the command's user in the
// jail's user namespace (the floor where no cgroup bounds them). And it
// makes the jail and all it starts the kernel's first choice when memory
// runs out (oom_score_adj 1000, which any process may raise): where the
// command shares a memory cgroup with its caller (a container's), the
// kernel would otherwise kill the process of most memory there, the
// agent rather than a fork bomb's many small ones.
func setLimits(l Limits) error {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0); err != nil {
		return fmt.Errorf("make the command the first to go when memory runs out: %w", err)
	}
	if l.FileSize > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: uint64(l.FileSize), Max: uint64(l.FileSize)}); err != nil {
			return fmt.Errorf("limit file size: %w", err)
		}
	}
	if l.Processes > 0 {
		n := uint64(l.Processes)
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: n, Max: n}); err != nil {
			return fmt.Errorf("limit processes: %w", err)
		}
	}
	return nil
}
