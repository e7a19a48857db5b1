package git

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
)

// Pack object types (gitformat-pack).
const (
	packOfsDelta = 6
	packRefDelta = 7
)

// maxPackObjects bounds the objects of a pack read in this process, and
// maxCheckoutEntries the files a checkout from it writes: a repository
// with more is left to git.
const (
	maxPackObjects     = 1 << 20
	maxCheckoutEntries = 1 << 20
)

// packObjects are the objects of one pack, inflated and resolved.
type packObjects struct {
	list []packObject
	byID map[[hashLen]byte]int
}

type packObject struct {
	id     [hashLen]byte
	typ    int
	data   []byte
	offset uint64
	crc    uint32
	// base is the delta's base: the offset of its entry (OFS_DELTA) or
	// its id (REF_DELTA); delta is set until it is resolved.
	baseOffset uint64
	baseID     [hashLen]byte
	delta      int
}

// get returns the object with hexadecimal id.
func (p *packObjects) get(id string) (typ int, data []byte, ok bool) {
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != hashLen {
		return 0, nil, false
	}
	return p.getRaw([hashLen]byte(raw))
}

func (p *packObjects) getRaw(id [hashLen]byte) (typ int, data []byte, ok bool) {
	i, ok := p.byID[id]
	if !ok {
		return 0, nil, false
	}
	return p.list[i].typ, p.list[i].data, true
}

var objectTypeNames = map[int]string{objCommit: "commit", objTree: "tree", objBlob: "blob", objTag: "tag"}

// readPack reads a whole pack of version 2 or 3 (its checksum checked),
// inflates its objects and resolves its deltas, whose bases must be in
// the pack (it is not thin).
func readPack(pack []byte) (*packObjects, error) {
	if len(pack) < 12+hashLen || string(pack[:4]) != "PACK" {
		return nil, declined("not a pack")
	}
	body := pack[:len(pack)-hashLen]
	if sum := sha1.Sum(body); !bytes.Equal(sum[:], pack[len(body):]) {
		return nil, declined("the pack's checksum does not match")
	}
	if v := binary.BigEndian.Uint32(pack[4:8]); v != 2 && v != 3 {
		return nil, declined("pack version %d", v)
	}
	// An object takes at least a header byte and a zlib stream of eight
	// bytes: a count beyond that, or beyond maxPackObjects, is not read
	// (nor allocated for).
	n := binary.BigEndian.Uint32(pack[8:12])
	if uint64(n) > uint64(len(body))/9 || n > maxPackObjects {
		return nil, declined("a pack of %d objects in %d bytes", n, len(body))
	}
	p := &packObjects{list: make([]packObject, n), byID: make(map[[hashLen]byte]int, n)}
	byOffset := make(map[uint64]int, n)
	rd := bytes.NewReader(body)
	rd.Seek(12, io.SeekStart)
	var zr io.ReadCloser
	inflated := 0
	for i := range p.list {
		start := uint64(len(body) - rd.Len())
		typ, size, err := readObjectHeader(rd)
		if err != nil {
			return nil, err
		}
		o := &p.list[i]
		o.offset, o.typ = start, typ
		switch typ {
		case objCommit, objTree, objBlob, objTag:
		case packOfsDelta:
			back, err := readOfsDelta(rd)
			if err != nil {
				return nil, err
			}
			if back == 0 || back > start {
				return nil, declined("a delta whose base is outside the pack")
			}
			o.baseOffset, o.delta = start-back, 1
		case packRefDelta:
			if _, err := io.ReadFull(rd, o.baseID[:]); err != nil {
				return nil, declined("a cut pack")
			}
			o.delta = 1
		default:
			return nil, declined("pack object type %d", typ)
		}
		if inflated += int(size); size > maxHTTPCloneObjectBytes || inflated > maxHTTPCloneObjectBytes {
			return nil, declined("objects of more than %d MiB", maxHTTPCloneObjectBytes>>20)
		}
		if zr == nil {
			zr, err = zlib.NewReader(rd)
		} else {
			err = zr.(zlib.Resetter).Reset(rd, nil)
		}
		if err != nil {
			return nil, declined("object at %d: %v", start, err)
		}
		o.data = make([]byte, size)
		if _, err := io.ReadFull(zr, o.data); err != nil {
			return nil, declined("object at %d: %v", start, err)
		}
		// Read to the end of the stream, so that zlib checks it and the
		// reader stands at the next object.
		var extra [1]byte
		if k, err := zr.Read(extra[:]); k != 0 || err != io.EOF {
			return nil, declined("object at %d is longer than it says", start)
		}
		end := uint64(len(body) - rd.Len())
		o.crc = crc32.ChecksumIEEE(body[start:end])
		byOffset[start] = i
	}
	if rd.Len() != 0 {
		return nil, declined("%d bytes after the pack's objects", rd.Len())
	}
	for i := range p.list {
		if o := &p.list[i]; o.delta == 0 {
			o.id = objectID(o.typ, o.data)
			p.byID[o.id] = i
		}
	}
	// Resolve the deltas: each chain from its first unresolved base up.
	for i := range p.list {
		// chain[k]'s base is bases[k]: the next in the chain, or, for the
		// last, an object resolved already.
		var chain, bases []int
		for j := i; p.list[j].delta != 0; {
			if p.list[j].delta == 2 {
				return nil, declined("a delta cycle")
			}
			p.list[j].delta = 2
			chain = append(chain, j)
			o := &p.list[j]
			var ok bool
			if o.typ == packOfsDelta {
				j, ok = byOffset[o.baseOffset]
			} else if j, ok = p.byID[o.baseID]; !ok {
				// Its base may be a delta not resolved yet.
				var err error
				if j, ok, err = p.findUnresolved(o.baseID, &inflated); err != nil {
					return nil, err
				}
			}
			if !ok {
				return nil, declined("a delta whose base is not in the pack")
			}
			bases = append(bases, j)
		}
		for k := len(chain) - 1; k >= 0; k-- {
			if err := p.resolve(chain[k], bases[k], &inflated); err != nil {
				return nil, err
			}
		}
	}
	if len(p.byID) != len(p.list) {
		return nil, declined("an object twice in the pack")
	}
	return p, nil
}

// resolve applies delta i to the resolved object base, counting what it
// inflates against maxHTTPCloneObjectBytes in inflated.
func (p *packObjects) resolve(i, base int, inflated *int) error {
	o, b := &p.list[i], &p.list[base]
	data, err := applyDelta(b.data, o.data)
	if err != nil {
		return err
	}
	if *inflated += len(data); *inflated > maxHTTPCloneObjectBytes {
		return declined("objects of more than %d MiB", maxHTTPCloneObjectBytes>>20)
	}
	o.typ, o.data, o.delta = b.typ, data, 0
	o.id = objectID(o.typ, o.data)
	p.byID[o.id] = i
	return nil
}

// findUnresolved is for a REF_DELTA whose base is itself a delta: it
// resolves the REF_DELTAs whose bases are resolved until one has the id,
// which is slow and rare (git sends such chains as OFS_DELTA).
func (p *packObjects) findUnresolved(id [hashLen]byte, inflated *int) (int, bool, error) {
	for progress := true; progress; {
		progress = false
		for i := range p.list {
			o := &p.list[i]
			if o.delta != 1 || o.typ == packOfsDelta {
				continue
			}
			base, ok := p.byID[o.baseID]
			if !ok {
				continue
			}
			if err := p.resolve(i, base, inflated); err != nil {
				return 0, false, err
			}
			progress = true
			if o.id == id {
				return i, true, nil
			}
		}
	}
	return 0, false, nil
}

func objectID(typ int, data []byte) [hashLen]byte {
	h := sha1.New()
	h.Write([]byte(objectTypeNames[typ] + " " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	return [hashLen]byte(h.Sum(nil))
}

// readObjectHeader reads an entry's type and inflated size.
func readObjectHeader(rd io.ByteReader) (typ int, size uint64, err error) {
	c, err := rd.ReadByte()
	if err != nil {
		return 0, 0, declined("a cut pack")
	}
	typ, size = int(c>>4&7), uint64(c&15)
	for shift := 4; c&0x80 != 0; shift += 7 {
		if shift > 56 {
			return 0, 0, declined("an object size too large")
		}
		if c, err = rd.ReadByte(); err != nil {
			return 0, 0, declined("a cut pack")
		}
		size |= uint64(c&0x7f) << shift
	}
	return typ, size, nil
}

// readOfsDelta reads how far back an OFS_DELTA's base starts.
func readOfsDelta(rd io.ByteReader) (uint64, error) {
	c, err := rd.ReadByte()
	if err != nil {
		return 0, declined("a cut pack")
	}
	back := uint64(c & 0x7f)
	for c&0x80 != 0 {
		if back >= 1<<56 {
			return 0, declined("a delta offset too large")
		}
		if c, err = rd.ReadByte(); err != nil {
			return 0, declined("a cut pack")
		}
		back = (back+1)<<7 | uint64(c&0x7f)
	}
	return back, nil
}

// applyDelta applies a git delta to base.
func applyDelta(base, delta []byte) ([]byte, error) {
	bad := declined("a malformed delta")
	varint := func() (uint64, bool) {
		var v uint64
		for shift := 0; shift < 64; shift += 7 {
			if len(delta) == 0 {
				return 0, false
			}
			c := delta[0]
			delta = delta[1:]
			v |= uint64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	srcSize, ok1 := varint()
	dstSize, ok2 := varint()
	if !ok1 || !ok2 || srcSize != uint64(len(base)) || dstSize > maxHTTPCloneObjectBytes {
		return nil, bad
	}
	out := make([]byte, 0, dstSize)
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0:
			var off, n uint64
			for bit := range 7 {
				if op&(1<<bit) == 0 {
					continue
				}
				if len(delta) == 0 {
					return nil, bad
				}
				if bit < 4 {
					off |= uint64(delta[0]) << (8 * bit)
				} else {
					n |= uint64(delta[0]) << (8 * (bit - 4))
				}
				delta = delta[1:]
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > uint64(len(base)) || uint64(len(out))+n > dstSize {
				return nil, bad
			}
			out = append(out, base[off:off+n]...)
		case op != 0:
			if int(op) > len(delta) || uint64(len(out))+uint64(op) > dstSize {
				return nil, bad
			}
			out = append(out, delta[:op]...)
			delta = delta[op:]
		default:
			return nil, bad
		}
	}
	if uint64(len(out)) != dstSize {
		return nil, bad
	}
	return out, nil
}

// index is the version 2 pack index (.idx) of p for the pack whose
// checksum is packSum, as git index-pack writes it.
func (p *packObjects) index(packSum []byte) []byte {
	order := make([]int, len(p.list))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(p.list[a].id[:], p.list[b].id[:]) })
	var b bytes.Buffer
	b.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	var fan [256]uint32
	for _, o := range p.list {
		fan[o.id[0]]++
	}
	var total uint32
	for i := range fan {
		total += fan[i]
		b.Write(binary.BigEndian.AppendUint32(nil, total))
	}
	for _, i := range order {
		b.Write(p.list[i].id[:])
	}
	for _, i := range order {
		b.Write(binary.BigEndian.AppendUint32(nil, p.list[i].crc))
	}
	var large []uint64
	for _, i := range order {
		off := p.list[i].offset
		if off >= 1<<31 {
			b.Write(binary.BigEndian.AppendUint32(nil, 1<<31|uint32(len(large))))
			large = append(large, off)
			continue
		}
		b.Write(binary.BigEndian.AppendUint32(nil, uint32(off)))
	}
	for _, off := range large {
		b.Write(binary.BigEndian.AppendUint64(nil, off))
	}
	b.Write(packSum)
	sum := sha1.Sum(b.Bytes())
	b.Write(sum[:])
	return b.Bytes()
}
