package entrypoint

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Defaults for the agent user.
const (
	// DefaultUser is the agent user's name in fleetlift's sandbox image.
	DefaultUser = "agent"
	// DefaultUID and DefaultGID are the ids the agent runs as when the
	// image has no DefaultUser: seed 003's uid 1000.
	DefaultUID = 1000
	DefaultGID = 1000
	// DefaultHome is the home of an account the image's /etc/passwd does
	// not list.
	DefaultHome = "/home/agent"
)

// Account is who the agent runs as.
type Account struct {
	// Name is the user's name, "" when /etc/passwd has no entry.
	Name string
	UID  int
	GID  int
	// Groups are the group ids the agent keeps: GID first, then the
	// groups /etc/group lists the user in, without duplicates.
	Groups []int
	// Home is the user's home directory: its /etc/passwd entry's, or
	// DefaultHome when that names none (empty, relative, / or
	// /nonexistent).
	Home string
}

// passwdEntry is one line of /etc/passwd.
type passwdEntry struct {
	name     string
	uid, gid int
	home     string
}

// Resolve finds the account spec names in the image whose root is fsys
// (its etc/passwd and etc/group). spec is NAME, UID or UID:GID; "" means
// DefaultUser, else uid DefaultUID (its /etc/passwd entry when there is
// one, else DefaultUID:DefaultGID with home DefaultHome). A name the image
// does not have is an error; a uid it does not have runs with its own
// number as gid (or the given GID) and home DefaultHome. Root, as user or
// as any group, is refused: the point is to drop its privileges.
func Resolve(fsys fs.FS, spec string) (Account, error) {
	users, err := readPasswd(fsys)
	if err != nil {
		return Account{}, err
	}
	var a Account
	switch uidText, gidText, hasGID := strings.Cut(spec, ":"); {
	case spec == "":
		if e, ok := byName(users, DefaultUser); ok {
			a = fromEntry(e)
		} else if e, ok := byUID(users, DefaultUID); ok {
			a = fromEntry(e)
		} else {
			a = Account{UID: DefaultUID, GID: DefaultGID, Home: DefaultHome}
		}
	case isNumber(uidText):
		uid, err := parseID(uidText)
		if err != nil {
			return Account{}, fmt.Errorf("user %q: %w", spec, err)
		}
		if e, ok := byUID(users, uid); ok {
			a = fromEntry(e)
		} else {
			a = Account{UID: uid, GID: uid, Home: DefaultHome}
		}
		if hasGID {
			gid, err := parseID(gidText)
			if err != nil {
				return Account{}, fmt.Errorf("user %q: group: %w", spec, err)
			}
			// An explicit group replaces the account's groups.
			a.GID = gid
			a.Groups = []int{gid}
		}
	case hasGID:
		return Account{}, fmt.Errorf("user %q: want NAME, UID or UID:GID", spec)
	default:
		e, ok := byName(users, spec)
		if !ok {
			return Account{}, fmt.Errorf("user %q is not in the image's /etc/passwd: name one it has, or give UID:GID", spec)
		}
		a = fromEntry(e)
	}
	if a.Groups == nil {
		groups, err := readGroups(fsys, a)
		if err != nil {
			return Account{}, err
		}
		a.Groups = groups
	}
	if a.UID == 0 {
		return Account{}, fmt.Errorf("user %q is root: the agent never runs as root; name an unprivileged user", spec)
	}
	if slices.Contains(a.Groups, 0) {
		return Account{}, fmt.Errorf("user %q is in group 0 (root): the agent never keeps root's group; name another user or give UID:GID", spec)
	}
	return a, nil
}

func fromEntry(e passwdEntry) Account {
	return Account{Name: e.name, UID: e.uid, GID: e.gid, Home: home(e.home)}
}

// home is the directory the agent gets as its home for an /etc/passwd
// entry's: that one, unless it says there is none (empty, relative, /, or
// Debian's /nonexistent), since the entrypoint makes the home the user's.
func home(dir string) string {
	if !path.IsAbs(dir) || path.Clean(dir) == "/" || path.Clean(dir) == "/nonexistent" {
		return DefaultHome
	}
	return path.Clean(dir)
}

func byName(users []passwdEntry, name string) (passwdEntry, bool) {
	for _, e := range users {
		if e.name == name {
			return e, true
		}
	}
	return passwdEntry{}, false
}

func byUID(users []passwdEntry, uid int) (passwdEntry, bool) {
	for _, e := range users {
		if e.uid == uid {
			return e, true
		}
	}
	return passwdEntry{}, false
}

func isNumber(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// parseID parses a user or group id: a decimal below 2^32-1 (which means
// "no id" to the kernel).
func parseID(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("%q is not a user or group id", s)
	}
	return int(n), nil
}

// readPasswd reads etc/passwd; an image without one has no users.
func readPasswd(fsys fs.FS) ([]passwdEntry, error) {
	var users []passwdEntry
	err := eachLine(fsys, "etc/passwd", func(f []string) {
		// name:password:uid:gid:gecos:home:shell
		if len(f) < 7 || f[0] == "" {
			return
		}
		uid, err1 := parseID(f[2])
		gid, err2 := parseID(f[3])
		if err1 != nil || err2 != nil {
			return
		}
		users = append(users, passwdEntry{name: f[0], uid: uid, gid: gid, home: f[5]})
	})
	return users, err
}

// readGroups returns a's groups: its gid, then every group etc/group lists
// it in.
func readGroups(fsys fs.FS, a Account) ([]int, error) {
	groups := []int{a.GID}
	if a.Name == "" {
		return groups, nil
	}
	err := eachLine(fsys, "etc/group", func(f []string) {
		// name:password:gid:member,member
		if len(f) < 4 {
			return
		}
		gid, err := parseID(f[2])
		if err != nil || slices.Contains(groups, gid) {
			return
		}
		if slices.Contains(strings.Split(f[3], ","), a.Name) {
			groups = append(groups, gid)
		}
	})
	return groups, err
}

// eachLine calls fn with the colon-separated fields of each line of name,
// skipping blank lines, comments and NIS entries; a missing file has none.
func eachLine(fsys fs.FS, name string, fn func([]string)) error {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read /%s: %w", name, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '+' || line[0] == '-' {
			continue
		}
		fn(strings.Split(line, ":"))
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read /%s: %w", name, err)
	}
	return nil
}
