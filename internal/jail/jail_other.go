//go:build !linux

package jail

import (
	"errors"
	"sync/atomic"
)

// errUnsupported: the jail needs Linux namespaces.
var errUnsupported = errors.New("jail unavailable: it needs Linux user, mount and PID namespaces")

// Command fails: the jail needs Linux.
func (j *Jail) Command(argv []string) (*Cmd, error) { return nil, errUnsupported }

// Check fails: the jail needs Linux.
func (j *Jail) Check() error { return errUnsupported }

// Main fails: the jail needs Linux.
func Main(args []string) int { return fail(ExitSetup, "%v", errUnsupported) }

// group is a jailed command's cgroup: none without Linux.
type group struct{ memory string }

func (*group) closeProcs()                {}
func (*group) remove()                    {}
func (*group) outOfMemory() (int64, bool) { return 0, false }

// memoryWatch watches the caller's memory cgroup: none without Linux.
type memoryWatch struct{ limit int64 }

func watchEnclosing() *memoryWatch                             { return nil }
func (*memoryWatch) outOfMemory() (int64, bool)                { return 0, false }
func (*memoryWatch) guard(int, <-chan struct{}, *atomic.Int64) {}
