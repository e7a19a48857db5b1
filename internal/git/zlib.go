package git

import (
	"compress/zlib"
	"encoding/binary"
	"hash/adler32"
	"io"
	"sync"
)

// Git keeps every object, loose or in a pack, as a zlib stream, and reads
// any level, stored blocks (level 0, git's core.compression=0) included.
// A Go compressor is about 700 KiB of state to allocate and clear whatever
// its level: for what an agent usually writes (a changed file or two,
// their trees, a commit: a few KiB in all) that costs far more than
// compressing saves, so small data is stored (see writeZlib). The rest is
// compressed at git's level for loose objects (best speed) by a compressor
// kept for reuse, whose cost a large change amortizes.
const storeBelow = 16 << 10

var zlibWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(io.Discard, zlib.BestSpeed)
	return zw
}}

// writeZlib writes the concatenation of parts to w as one zlib stream:
// stored when store is set and there are fewer than storeBelow bytes,
// compressed otherwise. A loose object is stored when it is small; a pack
// to push stores its objects only when they are all small together, so
// that a large change travels compressed.
func writeZlib(w io.Writer, store bool, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if !store || n >= storeBelow {
		zw := zlibWriters.Get().(*zlib.Writer)
		defer zlibWriters.Put(zw)
		zw.Reset(w)
		for _, p := range parts {
			if _, err := zw.Write(p); err != nil {
				return err
			}
		}
		return zw.Close()
	}
	// RFC 1950: a header for deflate with a 32 KiB window at the fastest
	// level (0x78 0x01, a multiple of 31); one final stored block of RFC
	// 1951 (BFINAL 1 and BTYPE 00 in a byte of its own, then LEN and its
	// complement, little-endian, then the bytes: storeBelow is under a
	// block's 64 KiB); the Adler-32 of the data.
	out := make([]byte, 0, 2+5+n+4)
	out = append(out, 0x78, 0x01, 1)
	out = binary.LittleEndian.AppendUint16(out, uint16(n))
	out = binary.LittleEndian.AppendUint16(out, ^uint16(n))
	for _, p := range parts {
		out = append(out, p...)
	}
	out = binary.BigEndian.AppendUint32(out, adler32.Checksum(out[7:]))
	_, err := w.Write(out)
	return err
}
