package main

import (
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// watchCreated watches dir from now on; what it returns lists the names
// made in dir since.
func watchCreated(t *testing.T, dir string) func() []string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		var names []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err == unix.EAGAIN {
				return names
			}
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
					t.Fatalf("watching %s: events were lost", dir)
				}
				name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				names = append(names, strings.TrimRight(string(name), "\x00"))
				off += unix.SizeofInotifyEvent + int(ev.Len)
			}
		}
	}
}
