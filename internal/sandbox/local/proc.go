package local

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStat returns a process's start time in clock ticks since boot and
// its state letter (R, S, Z, ...), from /proc/<pid>/stat.
func procStat(pid int) (uint64, byte, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: too few fields", pid)
	}
	ticks, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: start time: %w", pid, err)
	}
	return ticks, fields[0][0], nil
}

// procAlive reports whether pid is still the process that started at
// ticks and has not exited.
func procAlive(pid int, ticks uint64) bool {
	got, state, err := procStat(pid)
	return err == nil && got == ticks && state != 'Z' && state != 'X'
}

// homeProcesses lists the live processes, other than this one, whose
// environment holds HOME=home: the processes of the sandbox with that home,
// wherever they moved in the process tree.
//
// It reads every process's environment, so it reads each with one buffer
// and no more system calls than an open, the reads and a close.
func homeProcesses(home string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte("HOME=" + home)
	self := os.Getpid()
	buf := make([]byte, 0, 16<<10)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		// Unreadable (another user's process) or empty (a zombie, a
		// kernel thread): not ours to stop.
		if buf, err = readProc("/proc/"+e.Name()+"/environ", buf[:0]); err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(buf, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// readProc appends the content of the /proc file path to buf.
func readProc(path string, buf []byte) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return buf, err
	}
	defer syscall.Close(fd)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return buf, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}
