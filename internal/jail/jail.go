package jail

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fleetlift/fleetlift/internal/gomaxprocs"
)

// Spec says what a jailed command sees of the file system. Every path is
// absolute; paths that do not exist are left out, except Writable ones,
// which must exist.
type Spec struct {
	// Writable are the directories the command may write: its workspace
	// and its home. Everything else is read-only.
	Writable []string
	// Hidden are directories the command sees empty and files it sees
	// empty, both read-only: the protocol directory, the worker's state,
	// credentials in the worker's home.
	Hidden []string
	// Readable are files or directories under a Hidden directory that the
	// command may still read (the prompt file inside the protocol
	// directory).
	Readable []string
	// Scratch are directories replaced by a private, empty, writable
	// file system for the command's life (/tmp).
	Scratch []string
	// Limits bound what the command and everything it starts may use.
	Limits Limits
	// Forwards are the ports on the jail's own loopback that lead out of
	// it: each connection to 127.0.0.1:Port is relayed to the Unix
	// socket at Socket on the caller's side (an egress proxy the worker
	// serves), the only way out of the jail's network namespace.
	Forwards []Forward

	// UID and GID are the caller's, which the command runs as; set by
	// Command.
	UID int
	GID int
}

// Limits bound a jailed command and everything it starts, together; a
// zero field bounds nothing. Memory, Processes and CPU are a cgroup's
// where the caller may make one (cgroup v1, as root: a cgroup per command
// under the caller's own, removed when it ends); where it may not,
// Processes is RLIMIT_NPROC for the command's user inside the jail (which
// the kernel does not enforce for a command run as the host's root), and
// Memory and CPU are not bounded. TmpSize and FileSize hold everywhere.
type Limits struct {
	// Memory is the most memory in bytes, swap and the scratch file
	// systems' pages included; past it the kernel kills the command.
	Memory int64
	// Processes is the most processes and threads at once: a fork bomb
	// stops there.
	Processes int
	// CPU is the most processors' worth of CPU time, as 1.5.
	CPU float64
	// TmpSize is the size of each Scratch file system in bytes (tmpfs;
	// without it, half the machine's memory).
	TmpSize int64
	// FileSize is the largest file in bytes the command may write
	// (RLIMIT_FSIZE).
	FileSize int64
}

// cgroup reports whether l asks for what a cgroup bounds.
func (l Limits) cgroup() bool { return l.Memory > 0 || l.Processes > 0 || l.CPU > 0 }

// Forward is a port on the jail's loopback relayed to a Unix socket
// outside (Spec.Forwards).
type Forward struct {
	Port   int
	Socket string
}

func (f Forward) String() string { return strconv.Itoa(f.Port) + "=" + f.Socket }

// parseForward is the inverse of Forward.String.
func parseForward(s string) (Forward, error) {
	port, socket, ok := strings.Cut(s, "=")
	n, err := strconv.Atoi(port)
	if !ok || err != nil || n <= 0 || n > 65535 {
		return Forward{}, fmt.Errorf("--forward %q: want PORT=SOCKET, a port from 1 to 65535", s)
	}
	return Forward{Port: n, Socket: socket}, nil
}

// DefaultScratch are the directories every jail gets private: what a
// command leaves in them dies with it, and it sees nothing another left.
var DefaultScratch = []string{"/tmp", "/var/tmp", "/dev/shm"}

// Jail starts jailed commands; see the package documentation.
type Jail struct {
	// Self is the argv that runs this executable's jail entry point, the
	// command that calls Main with the arguments after Self, for example
	// ["/proc/self/exe", "jail"]. /proc/self/exe names the running
	// executable wherever it was started from.
	Self []string
	Spec Spec
}

// Exit codes of Main for failures of the jail itself, as shells use them:
// 126 when the jail cannot be set up or the command cannot run, 127 when
// the command is not found.
const (
	ExitSetup    = 126
	ExitNotFound = 127
)

// Protocol is the version of Main's command line and environment: a jail
// program that prints another with --protocol (or none) does not speak
// this one. (3: the command's GOMAXPROCS comes in envGOMAXPROCS. 4: the
// spec comes as a flag per path and id, not as JSON. 5: the command has
// a network namespace of its own, and --forward.)
const Protocol = "5"

// flags of Main. The spec's: one flag per path, taken as it is, and the
// ids.
const (
	flagProtocol = "--protocol"
	flagWritable = "--writable"
	flagHidden   = "--hidden"
	flagReadable = "--readable"
	flagScratch  = "--scratch"
	flagUID      = "--uid"
	flagGID      = "--gid"
	flagForward  = "--forward"
	flagMemory   = "--max-memory"
	flagProcs    = "--max-processes"
	flagCPU      = "--max-cpu"
	flagTmpSize  = "--tmp-size"
	flagFileSize = "--max-file-size"
	flagCgroupFD = "--cgroup-fd"
	flagDrop     = "--drop"
	flagProbe    = "--probe"
	flagReport   = "--report-fd"
)

// Cmd is a command to run in a jail (Jail.Command). Besides its exit
// status it tells whether the jail itself could be made: the jail says so
// on a pipe of its own, closed before the command starts, so nothing the
// command does can pass for a jail that failed. Start, Wait, Run and
// CombinedOutput are exec.Cmd's, with the pipe looked after.
type Cmd struct {
	*exec.Cmd
	// report is read once the jail ended; reportW is the jail's end,
	// given to it at Start and closed here then.
	report, reportW *os.File
	setupErr        error
	// group is the command's cgroup, nil without one; watch, where the
	// command has no memory cgroup of its own, is the one it runs in.
	// oom is whether the kernel killed in either for memory, and
	// memLimit the limit there.
	group    *group
	watch    *memoryWatch
	oom      bool
	memLimit int64
	// guardDone ends the memory guard (memoryWatch.guard), which has
	// ended once guardEnded is closed; reserve is the memory it kept for
	// the caller when it stopped the command, 0 when it did not.
	guardDone, guardEnded chan struct{}
	reserve               atomic.Int64
}

// Start starts the jail; see exec.Cmd.Start. The jail runs on one
// processor (it sets up, then waits and reaps): it starts with
// GOMAXPROCS=1, and gives the command the GOMAXPROCS of Env, or none,
// which it carries in envGOMAXPROCS (about 5% of a jailed command's
// CPU).
func (c *Cmd) Start() error {
	c.Env = oneProcessor(c.Env)
	if c.group == nil || c.group.memory == "" {
		c.watch = watchEnclosing()
	}
	err := c.Cmd.Start()
	c.reportW.Close()
	if err == nil && c.watch != nil {
		c.guardDone, c.guardEnded = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(c.guardEnded)
			c.watch.guard(c.Process.Pid, c.guardDone, &c.reserve)
		}()
	}
	if c.group != nil {
		c.group.closeProcs()
	}
	if err != nil {
		c.report.Close()
		if c.group != nil {
			c.group.remove()
		}
	}
	return err
}

// Wait waits for the jail to end; see exec.Cmd.Wait.
func (c *Cmd) Wait() error {
	err := c.Cmd.Wait()
	if c.guardDone != nil {
		close(c.guardDone)
		<-c.guardEnded
	}
	if c.group != nil {
		c.memLimit, c.oom = c.group.outOfMemory()
		c.group.remove()
	}
	if c.watch != nil && !c.oom {
		c.memLimit, c.oom = c.watch.outOfMemory()
		if c.reserve.Load() > 0 {
			c.memLimit, c.oom = c.watch.limit, true
		}
	}
	// Every writer is gone once the jail ended; a deadline all the same,
	// so that no mistake can hang the caller.
	_ = c.report.SetReadDeadline(time.Now().Add(time.Second))
	data, _ := io.ReadAll(io.LimitReader(c.report, 4096))
	c.report.Close()
	if reason := strings.TrimSpace(string(data)); reason != "" {
		c.setupErr = errors.New(reason)
	}
	return err
}

// envGOMAXPROCS carries the command's GOMAXPROCS (empty: none) past the
// jail's own.
const envGOMAXPROCS = "FLEETLIFT_JAIL_GOMAXPROCS"

// oneProcessor is env (nil: this process's) for the jail: GOMAXPROCS=1,
// the command's own in envGOMAXPROCS.
func oneProcessor(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	return gomaxprocs.Carry(env, envGOMAXPROCS, 1)
}

// commandEnv is env, the jail's, for the command: its own GOMAXPROCS
// back (oneProcessor).
func commandEnv(env []string) []string { return gomaxprocs.Restore(env, envGOMAXPROCS) }

// Run starts the jail and waits for it.
func (c *Cmd) Run() error {
	if err := c.Start(); err != nil {
		return err
	}
	return c.Wait()
}

// CombinedOutput runs the jail and returns its standard output and error.
func (c *Cmd) CombinedOutput() ([]byte, error) {
	var b bytes.Buffer
	c.Stdout, c.Stderr = &b, &b
	err := c.Run()
	return b.Bytes(), err
}

// OutOfMemory, once Wait returned, reports whether the kernel killed a
// process of the command for memory: for reaching Limits.Memory in the
// command's own cgroup, or, where it has none (a container's read-only
// cgroup file system), the limit of the cgroup the caller runs in (the
// container's).
func (c *Cmd) OutOfMemory() bool { return c.oom }

// MemoryLimit, where OutOfMemory, is the limit in bytes the command
// reached; 0 when it is unknown.
func (c *Cmd) MemoryLimit() int64 { return c.memLimit }

// MemoryReserve, once Wait returned, is the memory in bytes the jail kept
// for its caller when it stopped the command, killing the jail, for
// coming within it of its container's memory limit (OutOfMemory is true
// then); 0 when it did not. A command with no memory cgroup of its own
// shares its container's limit with its caller: the kernel, at that
// limit, kills the process of most memory in the container, which may
// be the caller rather than the command's many small ones.
func (c *Cmd) MemoryReserve() int64 { return c.reserve.Load() }

// SetupError, once Wait returned, is why the jail could not be made (the
// kernel refused a namespace or a mount, so the command never ran), or nil
// when the jail was made, whatever the command then did.
func (c *Cmd) SetupError() error { return c.setupErr }

// validate checks the spec's paths.
func (s Spec) validate() error {
	for _, group := range [][]string{s.Writable, s.Hidden, s.Readable, s.Scratch} {
		for _, p := range group {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
				return fmt.Errorf("jail path %q must be absolute, clean and not /", p)
			}
		}
	}
	if l := s.Limits; l.Memory < 0 || l.Processes < 0 || l.CPU < 0 || l.TmpSize < 0 || l.FileSize < 0 {
		return fmt.Errorf("jail limits %+v: none may be negative", l)
	}
	ports := map[int]bool{}
	for _, f := range s.Forwards {
		if f.Port <= 0 || f.Port > 65535 || ports[f.Port] {
			return fmt.Errorf("jail forward port %d must be from 1 to 65535, once", f.Port)
		}
		ports[f.Port] = true
		if !filepath.IsAbs(f.Socket) || filepath.Clean(f.Socket) != f.Socket {
			return fmt.Errorf("jail forward socket %q must be absolute and clean", f.Socket)
		}
	}
	return nil
}

// resolved returns the spec with symbolic links in its paths resolved
// (the jail mounts on real directories) and missing optional paths left
// out. A missing writable directory is an error.
func (s Spec) resolved() (Spec, error) {
	if err := s.validate(); err != nil {
		return s, err
	}
	out := Spec{UID: s.UID, GID: s.GID, Forwards: s.Forwards, Limits: s.Limits}
	resolve := func(paths []string, required bool) ([]string, error) {
		var res []string
		for _, p := range paths {
			real, err := filepath.EvalSymlinks(p)
			if errors.Is(err, os.ErrNotExist) && !required {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("jail path %s: %w", p, err)
			}
			if !slices.Contains(res, real) {
				res = append(res, real)
			}
		}
		return res, nil
	}
	var err error
	if out.Writable, err = resolve(s.Writable, true); err != nil {
		return s, err
	}
	if out.Hidden, err = resolve(s.Hidden, false); err != nil {
		return s, err
	}
	if out.Readable, err = resolve(s.Readable, false); err != nil {
		return s, err
	}
	if out.Scratch, err = resolve(s.Scratch, false); err != nil {
		return s, err
	}
	return out, nil
}

// args is the argv after Self that runs argv in the jail; cgroupFDs are
// the descriptors of the cgroups the jail joins.
func (j *Jail) args(spec Spec, probe bool, argv []string, cgroupFDs []int) ([]string, error) {
	if len(j.Self) == 0 || j.Self[0] == "" {
		return nil, errors.New("jail: Self is empty")
	}
	args := append([]string{}, j.Self[1:]...)
	for _, g := range specFlags(&spec) {
		for _, p := range *g.paths {
			args = append(args, g.flag, p)
		}
	}
	for _, f := range spec.Forwards {
		args = append(args, flagForward, f.String())
	}
	l := spec.Limits
	for _, v := range []struct {
		flag string
		n    int64
	}{{flagMemory, l.Memory}, {flagProcs, int64(l.Processes)}, {flagTmpSize, l.TmpSize}, {flagFileSize, l.FileSize}} {
		if v.n > 0 {
			args = append(args, v.flag, strconv.FormatInt(v.n, 10))
		}
	}
	if l.CPU > 0 {
		args = append(args, flagCPU, strconv.FormatFloat(l.CPU, 'f', -1, 64))
	}
	for _, fd := range cgroupFDs {
		args = append(args, flagCgroupFD, strconv.Itoa(fd))
	}
	args = append(args, flagUID, strconv.Itoa(spec.UID), flagGID, strconv.Itoa(spec.GID))
	if probe {
		args = append(args, flagProbe)
	} else {
		args = append(args, flagReport, strconv.Itoa(reportFD))
	}
	return append(append(args, "--"), argv...), nil
}

// pathFlag is a flag of the spec's paths and the list of the spec it
// fills.
type pathFlag struct {
	flag  string
	paths *[]string
}

// specFlags are the flags of spec's paths.
func specFlags(spec *Spec) []pathFlag {
	return []pathFlag{{flagWritable, &spec.Writable}, {flagHidden, &spec.Hidden}, {flagReadable, &spec.Readable}, {flagScratch, &spec.Scratch}}
}

// reportFD is the descriptor a jail says why it could not be made on:
// the first of exec.Cmd.ExtraFiles.
const reportFD = 3

// parsed is Main's command line.
type parsed struct {
	spec  *Spec
	drop  bool
	probe bool
	// report is the descriptor of --report-fd, 0 when there is none.
	report int
	// cgroups are the descriptors of --cgroup-fd: cgroup.procs files the
	// jail joins before anything else.
	cgroups []int
	argv    []string
}

func parseArgs(args []string) (parsed, error) {
	var p parsed
	var s Spec
	uid, gid := -1, -1
	paths := map[string]*[]string{}
	for _, g := range specFlags(&s) {
		paths[g.flag] = g.paths
	}
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case flagWritable, flagHidden, flagReadable, flagScratch:
			if i+1 >= len(args) {
				return p, fmt.Errorf("%s needs a path", a)
			}
			i++
			*paths[a] = append(*paths[a], args[i])
		case flagForward:
			if i+1 >= len(args) {
				return p, fmt.Errorf("%s needs PORT=SOCKET", a)
			}
			i++
			f, err := parseForward(args[i])
			if err != nil {
				return p, err
			}
			s.Forwards = append(s.Forwards, f)
		case flagMemory, flagProcs, flagTmpSize, flagFileSize, flagCgroupFD:
			if i+1 >= len(args) {
				return p, fmt.Errorf("%s needs a number", a)
			}
			i++
			n, err := strconv.ParseInt(args[i], 10, 64)
			if err != nil || n <= 0 {
				return p, fmt.Errorf("%s: %q is not a positive number", a, args[i])
			}
			switch a {
			case flagMemory:
				s.Limits.Memory = n
			case flagProcs:
				s.Limits.Processes = int(n)
			case flagTmpSize:
				s.Limits.TmpSize = n
			case flagFileSize:
				s.Limits.FileSize = n
			case flagCgroupFD:
				if n < 3 {
					return p, fmt.Errorf("%s: %d is not a descriptor above 2", a, n)
				}
				p.cgroups = append(p.cgroups, int(n))
			}
		case flagCPU:
			if i+1 >= len(args) {
				return p, fmt.Errorf("%s needs a number", a)
			}
			i++
			f, err := strconv.ParseFloat(args[i], 64)
			if err != nil || f <= 0 {
				return p, fmt.Errorf("%s: %q is not a positive number", a, args[i])
			}
			s.Limits.CPU = f
		case flagUID, flagGID:
			if i+1 >= len(args) {
				return p, fmt.Errorf("%s needs a value", a)
			}
			i++
			id, err := strconv.Atoi(args[i])
			if err != nil || id < 0 {
				return p, fmt.Errorf("%s: %q is not an id", a, args[i])
			}
			if a == flagUID {
				uid = id
			} else {
				gid = id
			}
		case flagDrop:
			p.drop = true
		case flagProbe:
			p.probe = true
		case flagReport:
			if i+1 >= len(args) {
				return p, errors.New("--report-fd needs a value")
			}
			i++
			fd, err := strconv.Atoi(args[i])
			if err != nil || fd < 3 {
				return p, fmt.Errorf("--report-fd: %q is not a descriptor above 2", args[i])
			}
			p.report = fd
		case "--":
			p.argv = args[i+1:]
			if len(p.argv) == 0 && !p.probe {
				return p, errors.New("no command after --")
			}
			if uid >= 0 && gid >= 0 {
				s.UID, s.GID = uid, gid
				if err := s.validate(); err != nil {
					return p, err
				}
				p.spec = &s
			} else if uid >= 0 || gid >= 0 || !p.drop {
				return p, errors.New("--uid and --gid, or --drop, are required")
			}
			if p.drop && !p.probe {
				return p, errors.New("--drop runs no command: it is the probe's (--probe)")
			}
			return p, nil
		default:
			return p, fmt.Errorf("unknown argument %q", a)
		}
	}
	return p, errors.New("missing -- before the command")
}

// fail prints a jail error the way the command's own errors appear: on
// its standard error.
func fail(code int, format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "fleetlift jail: "+format+"\n", args...)
	return code
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}
