package agent

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fleetlift/fleetlift/internal/git"
)

// seen is what the agent saw of a repository it cloned, before any
// command it does not trust ran there: the directories themselves (device
// and inode) and the content of .git/config.
type seen struct {
	dir, gitDir os.FileInfo
	config      [sha256.Size]byte
}

// errTampered is a repository the work changed in a way that would steer
// the agent's own git, which runs outside the jail and pushes: it fails
// the run, and nothing is pushed.
var errTampered = errors.New("the work tampered with the repository")

// redirects are files in .git that make git read objects or a
// repository elsewhere: a path the work cannot see may still be one the
// agent can.
var redirects = []string{"commondir", "objects/info/alternates", "objects/info/http-alternates", "info/grafts"}

// remember records what u's repository is, right after it was cloned and
// before its setup runs.
func (r *runner) remember(u *unit) error {
	dir, err := os.Lstat(u.dir)
	if err != nil {
		return err
	}
	gitDir, err := os.Lstat(filepath.Join(u.dir, ".git"))
	if err != nil {
		return err
	}
	if !gitDir.IsDir() {
		return fmt.Errorf("%s/.git is not a directory", u.repo.Name)
	}
	config, err := os.ReadFile(filepath.Join(u.dir, ".git", "config"))
	if err != nil {
		return err
	}
	u.seen = &seen{dir: dir, gitDir: gitDir, config: sha256.Sum256(config)}
	return nil
}

// intact checks, before the agent reads or pushes u's repository after
// work ran in it, that it is still the repository the agent cloned: the
// same directory (no path component a symbolic link, same inode), the
// same .git directory, holding no symbolic link, nothing but files and
// directories, no file that points git elsewhere, and the configuration
// the agent wrote. The work may change the work tree, the index, refs and
// objects as it likes: that is the change it proposes.
func (r *runner) intact(u *unit) error {
	if u.seen == nil {
		return fmt.Errorf("%w: %s was never checked out", errTampered, u.repo.Name)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", errTampered, u.repo.Name, fmt.Sprintf(format, args...))
	}
	if _, err := git.SafeJoin(r.ws, u.elems...); err != nil {
		return fail("%v", err)
	}
	dir, err := os.Lstat(u.dir)
	if err != nil || !dir.IsDir() || !os.SameFile(dir, u.seen.dir) {
		return fail("its directory was replaced")
	}
	gitDir := filepath.Join(u.dir, ".git")
	gd, err := os.Lstat(gitDir)
	if err != nil || !gd.IsDir() || !os.SameFile(gd, u.seen.gitDir) {
		return fail(".git was replaced")
	}
	for _, p := range redirects {
		if _, err := os.Lstat(filepath.Join(gitDir, p)); err == nil {
			return fail(".git/%s would point git elsewhere", p)
		}
	}
	err = filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if t := d.Type(); !t.IsDir() && !t.IsRegular() {
			rel, _ := filepath.Rel(u.dir, p)
			return fail("%s is a %s, not a file or directory", rel, kindOf(t))
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, errTampered) {
			return err
		}
		return fail("read .git: %v", err)
	}
	config, err := os.ReadFile(filepath.Join(gitDir, "config"))
	if err != nil || sha256.Sum256(config) != u.seen.config {
		return fail(".git/config was changed")
	}
	return nil
}

func kindOf(t fs.FileMode) string {
	switch {
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
