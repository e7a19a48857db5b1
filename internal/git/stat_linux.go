package git

import (
	"encoding/binary"
	"os"
	"syscall"
)

// stageSupported: the index's stat data are read here as git records
// them, so stageInPlace can tell an unchanged file.
const stageSupported = true

// noFollow makes opening a link fail.
const noFollow = syscall.O_NOFOLLOW

// statData fills the first 40 bytes of an index entry (times, device,
// inode, mode, owner, size) from fi, as git records a checked-out file:
// each field cut to 32 bits.
func statData(b []byte, fi os.FileInfo) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		statDataPortable(b, fi)
		return
	}
	for i, v := range []uint32{
		uint32(st.Ctim.Sec), uint32(st.Ctim.Nsec), uint32(st.Mtim.Sec), uint32(st.Mtim.Nsec),
		uint32(st.Dev), uint32(st.Ino), 0, st.Uid, st.Gid, uint32(st.Size),
	} {
		binary.BigEndian.PutUint32(b[4*i:], v)
	}
}
