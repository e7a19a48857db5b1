package entrypoint

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Run does what the package documentation says and executes Self with
// cfg.Args, after prefix (the commands above the entrypoint's: "agent"
// for fleetlift). It returns only when something failed, and then the
// process must exit: it may have dropped privileges already.
func Run(cfg Config, prefix []string) error {
	// no_new_privs and the capability sets belong to a thread: make
	// every change on the thread that executes the agent. The thread is
	// never unlocked; a goroutine that ends locked takes its thread along.
	runtime.LockOSThread()

	env := os.Environ()
	cfg, err := cfg.settings(env)
	if err != nil {
		return err
	}
	root := os.Geteuid() == 0
	a, err := account(cfg.User, root)
	if err != nil {
		return err
	}
	if err := prepareDir("working directory", cfg.Workdir, a, root); err != nil {
		return err
	}
	if err := prepareDir("home", a.Home, a, root); err != nil {
		return err
	}
	if err := os.Chdir(cfg.Workdir); err != nil {
		return fmt.Errorf("enter the working directory: %w", err)
	}
	if err := dropPrivileges(a, root); err != nil {
		return err
	}
	err = syscall.Exec(Self, cfg.argv(os.Args[0], prefix), Environ(env, a))
	return fmt.Errorf("execute the agent (%s): %w", Self, err)
}

// account is who the agent runs as: the account user names when the
// entrypoint runs as root, else the current user, which it cannot change.
func account(user string, root bool) (Account, error) {
	fsys := os.DirFS("/")
	if root {
		return Resolve(fsys, user)
	}
	uid := os.Getuid()
	if user != "" {
		want, err := Resolve(fsys, user)
		if err != nil {
			return Account{}, err
		}
		if want.UID != uid {
			return Account{}, fmt.Errorf("running as uid %d, not root: cannot switch to user %q (uid %d); start the container as root or as that user", uid, user, want.UID)
		}
	}
	users, err := readPasswd(fsys)
	if err != nil {
		return Account{}, err
	}
	a := Account{UID: uid, GID: os.Getgid(), Home: DefaultHome}
	if e, ok := byUID(users, uid); ok {
		a.Name, a.Home = e.name, fromEntry(e).Home
	}
	return a, nil
}

// prepareDir makes dir exist and, as root, belong to a: a volume mounted
// there starts out owned by root. Only dir itself changes owner, never
// what it holds.
func prepareDir(role, dir string, a Account, root bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make the %s for uid %d: %w (mount a writable volume there)", role, a.UID, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("make the %s for uid %d: %w", role, a.UID, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("the %s %s is not a directory", role, dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !root || !ok || (int(st.Uid) == a.UID && int(st.Gid) == a.GID) {
		return nil
	}
	if err := os.Chown(dir, a.UID, a.GID); err != nil {
		return fmt.Errorf("give the %s to uid %d: %w", role, a.UID, err)
	}
	return nil
}

// dropPrivileges switches the thread, and with setgroups, setresgid and
// setresuid the whole process, to a, leaving no capability and setting
// no_new_privs; then it checks that all of it holds.
func dropPrivileges(a Account, root bool) error {
	c, err := capget()
	if err != nil {
		return err
	}
	// Clearing the bounding set needs CAP_SETPCAP, which a container
	// holding only what the entrypoint needs does not have.
	clearBounding := c[0].Effective&(1<<unix.CAP_SETPCAP) != 0
	if clearBounding {
		for _, n := range bounding() {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(n), 0, 0, 0); err != nil {
				return fmt.Errorf("drop %s from the capability bounding set: %w", capName(n), err)
			}
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	if root {
		if err := syscall.Setgroups(a.Groups); err != nil {
			return fmt.Errorf("set groups %v: %w (the container needs CAP_SETGID)", a.Groups, err)
		}
		if err := syscall.Setresgid(a.GID, a.GID, a.GID); err != nil {
			return fmt.Errorf("set gid %d: %w (the container needs CAP_SETGID)", a.GID, err)
		}
		if err := syscall.Setresuid(a.UID, a.UID, a.UID); err != nil {
			return fmt.Errorf("set uid %d: %w (the container needs CAP_SETUID)", a.UID, err)
		}
	}
	// Leaving uid 0 cleared the permitted and effective sets; the
	// inheritable set survives it.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("clear the capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return verify(a, root, clearBounding)
}

// verify checks that the switch stuck: every uid and gid is a's, the
// groups are a's, root cannot be taken back, no capability is left and
// no_new_privs is set.
func verify(a Account, root, clearedBounding bool) error {
	ruid, euid, suid := unix.Getresuid()
	rgid, egid, sgid := unix.Getresgid()
	if ruid != a.UID || euid != a.UID || suid != a.UID {
		return fmt.Errorf("the switch to uid %d did not stick: uids %d/%d/%d", a.UID, ruid, euid, suid)
	}
	if root && (rgid != a.GID || egid != a.GID || sgid != a.GID) {
		return fmt.Errorf("the switch to gid %d did not stick: gids %d/%d/%d", a.GID, rgid, egid, sgid)
	}
	if root {
		groups, err := syscall.Getgroups()
		if err != nil {
			return fmt.Errorf("read the groups: %w", err)
		}
		want := slices.Clone(a.Groups)
		slices.Sort(groups)
		slices.Sort(want)
		if !slices.Equal(slices.Compact(groups), slices.Compact(want)) {
			return fmt.Errorf("the groups are %v, want %v", groups, want)
		}
	}
	// Raw calls on this thread alone: success would mean root is back.
	if _, _, errno := unix.RawSyscall(unix.SYS_SETUID, 0, 0, 0); errno == 0 {
		return errors.New("uid 0 could be taken back after the switch")
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGID, 0, 0, 0); errno == 0 {
		return errors.New("gid 0 could be taken back after the switch")
	}
	c, err := capget()
	if err != nil {
		return err
	}
	for i, d := range c {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after the switch (word %d): effective %#x, permitted %#x, inheritable %#x", i, d.Effective, d.Permitted, d.Inheritable)
		}
	}
	for n := 0; n <= lastCap(); n++ {
		if set, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(n), 0, 0); err == nil && set == 1 {
			return fmt.Errorf("ambient capability %s left after the switch", capName(n))
		}
	}
	if left := bounding(); clearedBounding && len(left) > 0 {
		return fmt.Errorf("capabilities left in the bounding set: %s", capNames(left))
	}
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp != 1 {
		return fmt.Errorf("no_new_privs is not set (%d, %v)", nnp, err)
	}
	return nil
}

func capget() ([2]unix.CapUserData, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return data, fmt.Errorf("read the capabilities: %w", err)
	}
	return data, nil
}

// lastCap is the highest capability the kernel knows.
func lastCap() int {
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}

// bounding lists the capabilities in this thread's bounding set.
func bounding() []int {
	var in []int
	for n := 0; n <= lastCap(); n++ {
		if set, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(n), 0, 0, 0); err == nil && set == 1 {
			in = append(in, n)
		}
	}
	return in
}
