package jail

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The test binary's helpers: helperProbe runs inside a jail (a copy of
// the binary in the workspace, which the jail shows), helperUnderTerminal
// starts a jail from under script(1)'s terminal.
const (
	helperProbe         = "jail-test-probe"
	helperUnderTerminal = "jail-test-under-terminal"
)

// probe runs one check inside the jail and prints what it found:
//
//	dial ADDR    whether a TCP connection to ADDR opens
//	read ADDR    what a TCP connection to ADDR says
//	loopback     whether the jail can serve and reach itself on 127.0.0.1
//	terminal     what the process can do to a terminal
func probe(args []string) int {
	switch args[0] {
	case "dial":
		c, err := net.DialTimeout("tcp", args[1], 2*time.Second)
		if err != nil {
			fmt.Printf("dial %s: refused (%v)\n", args[1], err)
			return 0
		}
		c.Close()
		fmt.Printf("dial %s: connected\n", args[1])
	case "read":
		c, err := net.DialTimeout("tcp", args[1], 2*time.Second)
		if err != nil {
			fmt.Printf("read %s: %v\n", args[1], err)
			return 1
		}
		got, _ := io.ReadAll(c)
		fmt.Printf("read %s: %s\n", args[1], got)
	case "loopback":
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Printf("loopback: listen: %v\n", err)
			return 1
		}
		defer l.Close()
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Write([]byte("hello"))
				c.Close()
			}
		}()
		c, err := net.DialTimeout("tcp", l.Addr().String(), 2*time.Second)
		if err != nil {
			fmt.Printf("loopback: dial: %v\n", err)
			return 1
		}
		got, _ := io.ReadAll(c)
		fmt.Printf("loopback: %s\n", got)
	case "terminal":
		stat, _ := os.ReadFile("/proc/self/stat")
		// Field 7 is tty_nr, after "pid (comm) state ppid pgrp session".
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 {
			f := strings.Fields(string(stat[i+1:]))
			fmt.Printf("tty_nr: %s\n", f[4])
		}
		if f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0); err != nil {
			fmt.Printf("/dev/tty: %v\n", err)
		} else {
			fmt.Printf("/dev/tty: opened\n")
			sti(int(f.Fd()), "/dev/tty")
			f.Close()
		}
		for fd := 0; fd <= 2; fd++ {
			sti(fd, "fd "+strconv.Itoa(fd))
		}
		pts, _ := filepath.Glob("/dev/pts/[0-9]*")
		fmt.Printf("pts: %q\n", pts)
		for _, p := range append(pts, "/dev/console", "/dev/tty0", "/dev/tty1") {
			if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
				fmt.Printf("opened %s\n", p)
				f.Close()
			}
		}
	}
	return 0
}

// sti tries to push a character into fd's terminal input (TIOCSTI).
func sti(fd int, name string) {
	b := byte('#')
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); errno == 0 {
		fmt.Printf("TIOCSTI %s: injected\n", name)
	}
}

// underTerminal runs args[1:] in a box's jail, args[0] being the box's
// state directory, with this process's terminal (script's) as everyone's
// controlling terminal and standard streams.
func underTerminal(args []string) int {
	b := boxAt(args[0])
	cmd, err := b.jail().Command(args[1:])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	cmd.Dir = b.ws
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Printf("jail: %v (%v)\n", err, cmd.SetupError())
		return 1
	}
	return 0
}

// helper copies this test binary into b's workspace, where the jail shows
// it (the binary's own directory may be one the jail makes private), and
// returns the argv that runs probe with args.
func (b box) helper(t *testing.T, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(b.ws, "probe")
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return append([]string{dst, helperProbe}, args...)
}

// A jailed command reaches nothing on the host's network: not a port the
// control plane listens on at the host's 127.0.0.1, nor anything else;
// on its own loopback it can still serve and reach itself.
func TestJailedCommandReachesNoHostNetwork(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	requireJail(t, j)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	code, out, err := runArgv(t, j, b.ws, b.helper(t, "dial", l.Addr().String()))
	if code != 0 || err != nil {
		t.Fatalf("exit %d, setup error %v:\n%s", code, err, out)
	}
	if !strings.Contains(out, "refused") || accepted.Load() != 0 {
		t.Errorf("the jailed command reached the host's loopback (%d connections accepted):\n%s", accepted.Load(), out)
	}
	code, out, err = runArgv(t, j, b.ws, b.helper(t, "loopback"))
	if code != 0 || err != nil || !strings.Contains(out, "loopback: hello") {
		t.Errorf("the jailed command cannot serve itself on its loopback: exit %d, setup error %v:\n%s", code, err, out)
	}
}

// Started under an operator's terminal, a jailed command has no
// controlling terminal: it can neither open /dev/tty nor push input into
// the operator's shell (TIOCSTI), and sees none of the host's terminals.
func TestJailedCommandHasNoTerminal(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Fatalf("script(1) runs the jail under a terminal: apt-get install bsdutils (%v)", err)
	}
	b := newBox(t)
	requireJail(t, b.jail())
	argv := b.helper(t, "terminal")
	inner := []string{"/proc/self/exe", helperUnderTerminal, b.state}
	inner = append(inner, argv...)
	exe, _ := os.Executable()
	inner[0] = exe
	line := strings.Join(quoteAll(inner), " ")
	cmd := exec.Command(script, "-qec", line, "/dev/null")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	got := string(out)
	if !strings.Contains(got, "tty_nr:") {
		t.Fatalf("the probe did not run:\n%s", got)
	}
	if !strings.Contains(got, "tty_nr: 0") {
		t.Errorf("the jailed command has a controlling terminal:\n%s", got)
	}
	for _, bad := range []string{"/dev/tty: opened", "injected", "opened /dev/"} {
		if strings.Contains(got, bad) {
			t.Errorf("the jailed command can reach the terminal (%q):\n%s", bad, got)
		}
	}
}

// boxAt is newBox's layout at state, for a helper process.
func boxAt(state string) box {
	b := box{
		state:  state,
		ws:     filepath.Join(state, "sandboxes", "s1", "workspace"),
		home:   filepath.Join(state, "sandboxes", "s1", "home"),
		secret: filepath.Join(state, "tls", "client.key"),
	}
	b.pdir = filepath.Join(b.ws, ".fleetlift")
	b.prompt = filepath.Join(b.pdir, "prompt.txt")
	return b
}

func quoteAll(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return q
}

// A forward is the one way out: a connection to its port on the jail's
// loopback reaches the Unix socket it names, on the caller's side, even
// where that socket's directory is hidden from the command.
func TestForwardLeadsToItsSocketAlone(t *testing.T) {
	b := newBox(t)
	sock := filepath.Join(b.state, "egress.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("from outside"))
			c.Close()
		}
	}()
	j := b.jail()
	j.Spec.Forwards = []Forward{{Port: 18080, Socket: sock}}
	requireJail(t, j)
	code, out, err := runArgv(t, j, b.ws, b.helper(t, "read", "127.0.0.1:18080"))
	if code != 0 || err != nil || !strings.Contains(out, "read 127.0.0.1:18080: from outside") {
		t.Fatalf("exit %d, setup error %v:\n%s", code, err, out)
	}
	// The socket itself stays out of sight: the state directory is hidden.
	code, out, _ = runCmd(t, j, b.ws, `ls -A `+b.state)
	if code != 0 || strings.Contains(out, "egress.sock") {
		t.Errorf("exit %d; the socket is visible in the jail:\n%s", code, out)
	}
}

// A forward the jail cannot open fails the jail, naming it.
func TestForwardToAMissingSocketFailsTheJail(t *testing.T) {
	b := newBox(t)
	j := b.jail()
	j.Spec.Forwards = []Forward{{Port: 18080, Socket: filepath.Join(b.state, "absent.sock")}}
	code, out, err := runCmd(t, j, b.ws, "true")
	if code != ExitSetup || err == nil || !strings.Contains(err.Error(), "forward 18080") {
		t.Fatalf("exit %d, setup error %v, output %q; want the jail refused naming the forward", code, err, out)
	}
}
