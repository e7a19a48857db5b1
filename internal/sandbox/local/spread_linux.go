package local

import (
	"os"

	"golang.org/x/sys/unix"
)

// fsTopDirFlag is FS_TOPDIR_FL (chattr +T): the directories made in a
// directory that carries it are placed as top-level ones.
const fsTopDirFlag = 0x00020000

// spreadSandboxes marks root, where the sandboxes are made, as the top of
// directory hierarchies, where the file system keeps such a flag (ext4
// and others of its kind). ext4 then places each sandbox as it places a
// directory at its root, in a block group of its own choosing, rather
// than all of them beside root: a sandbox's files (its clones, the
// protocol files) are made where the sandboxes just removed were not. On
// ext4 without a journal, every new file's inode is found by stepping
// over the inodes of its group deleted in the last minute or more, and
// with every sandbox in one group, a run of many repositories spent more
// of its agents' CPU there than anywhere else. Where the flag cannot be
// set, nothing changes but the placement, and the error is not one.
func spreadSandboxes(root string) {
	f, err := os.Open(root)
	if err != nil {
		return
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil || flags&fsTopDirFlag != 0 {
		return
	}
	_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags|fsTopDirFlag))
}
