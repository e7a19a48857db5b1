package node

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// proc is one of the node's processes, logging to Dir/logs/NAME.log.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // its Wait error, once done
}

// start starts path with args as the node's process name.
func (n *Node) start(name, path string, args ...string) (*proc, error) {
	logPath := filepath.Join(n.Dir, "logs", name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// bin/node first: containerd finds its shim there.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(n.bins.kubelet)+string(filepath.ListSeparator)+os.Getenv("PATH"))
	// Its own process group, so that a signal meant for the test does
	// not reach it before Stop does; killed if the test process dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p, nil
}

// proc is the node's process name, nil when it was not started.
func (n *Node) proc(name string) *proc {
	for _, p := range n.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// stop sends SIGTERM and waits up to grace before SIGKILL.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.done:
		return fmt.Errorf("%s did not exit within %s of SIGTERM: killed", p.name, grace)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// tail is the last lines of the process's log.
func (p *proc) tail(lines int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	b = bytes.TrimRight(b, "\n")
	for i, at := 0, len(b); i < lines; i++ {
		j := bytes.LastIndexByte(b[:at], '\n')
		if j < 0 {
			return fmt.Sprintf("%s log (%s):\n%s", p.name, p.log, b)
		}
		at = j
		if i == lines-1 {
			return fmt.Sprintf("%s log (%s, last %d lines):\n%s", p.name, p.log, lines, b[j+1:])
		}
	}
	return ""
}

// Logs are the last lines of each of the node's processes' logs, for a
// failing test to print before Stop removes them.
func (n *Node) Logs(lines int) string {
	var b bytes.Buffer
	for _, p := range n.procs {
		fmt.Fprintf(&b, "%s\n", p.tail(lines))
	}
	return b.String()
}
