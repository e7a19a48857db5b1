package local

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// The sandbox root is marked as the top of directory hierarchies (chattr
// +T), so that ext4 places each sandbox in a block group of its own
// choosing; a file system that keeps no such flag changes nothing, and
// the provider starts all the same.
func TestSandboxRootIsATopDirectory(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sandboxes")
	p := newProvider(t, root, standInAgent(t))
	f, err := os.Open(p.root)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Logf("%s keeps no inode flags (%v): the provider started without them", p.root, err)
		return
	}
	if flags&fsTopDirFlag == 0 {
		t.Errorf("%s flags %#x: no top-directory flag (%#x)", p.root, flags, fsTopDirFlag)
	}
}
