package local

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// statFields are the fields of /proc/<pid>/stat after the command name:
// fields[0] is field 3 (the state letter), fields[6] field 9 (the
// flags), fields[19] field 22 (the start time). It holds at least 20.
func statFields(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	// "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return nil, fmt.Errorf("parse /proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 20 || len(fields[0]) != 1 {
		return nil, fmt.Errorf("parse /proc/%d/stat: too few fields", pid)
	}
	return fields, nil
}

// procStat returns a process's start time in clock ticks since boot and
// its state letter (R, S, Z, ...), from /proc/<pid>/stat.
func procStat(pid int) (uint64, byte, error) {
	fields, err := statFields(pid)
	if err != nil {
		return 0, 0, err
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
		// Unreadable: another user's process, not ours to stop.
		if buf, err = readProc("/proc/"+e.Name()+"/environ", buf[:0]); err != nil {
			continue
		}
		if len(buf) == 0 {
			if buf, err = settledEnviron(pid, buf); err != nil {
				continue
			}
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

// noHomeProcesses reports whether no live process has HOME=home, by two
// scans a millisecond apart: on a loaded machine one scan still, rarely,
// misses a process that execs in a loop (2 in 3,000 scans while Go
// compiled beside it), and one miss would end Cleanup with the process
// running.
func noHomeProcesses(home string) bool {
	if len(homeProcesses(home)) > 0 {
		return false
	}
	time.Sleep(time.Millisecond)
	return len(homeProcesses(home)) == 0
}

// execSettle bounds how long settledEnviron waits for a process inside
// execve. The kernel lays out the new image in well under a millisecond
// once the process runs, but on a starved machine a runnable process can
// wait far longer for a CPU: 50 ms missed one in 300 under CI's load
// (two cores, a load average near 16). Only a process inside execve is
// waited for, so the bound costs nothing otherwise.
const execSettle = time.Second

// settledEnviron reads again the environment of pid, which read empty.
// Kernel threads and zombies have none, and a process may have been
// started with none; but a process inside execve, between dropping its
// old memory and laying out the new one, shows an empty environment and
// an empty command line too, and a scan that skipped it would miss a
// process that is about to run with HOME set. Such a process is read
// again until its new image is in place, for at most execSettle.
func settledEnviron(pid int, buf []byte) ([]byte, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	deadline := time.Now().Add(execSettle)
	for {
		cmdline, err := readProc(dir+"/cmdline", buf[:0])
		if err != nil {
			return buf[:0], err
		}
		if len(cmdline) > 0 {
			// An image in place: started with an empty environment,
			// or the first read held the memory execve had just
			// dropped. A new read sees the image's.
			return readProc(dir+"/environ", buf[:0])
		}
		if !inExec(pid) || time.Now().After(deadline) {
			// No memory of its own at all: a kernel thread, a zombie.
			return buf[:0], nil
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// pfKthread is the kernel's PF_KTHREAD, in the flags of /proc/<pid>/stat.
const pfKthread = 0x00200000

// inExec reports whether pid, whose command line reads empty, is a user
// process that has not exited: one inside execve.
func inExec(pid int) bool {
	fields, err := statFields(pid)
	if err != nil || fields[0] == "Z" || fields[0] == "X" {
		return false
	}
	flags, err := strconv.ParseUint(fields[6], 10, 64)
	return err == nil && flags&pfKthread == 0
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
