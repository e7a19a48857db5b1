package git

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// looseWriters are the zlib writers of loose objects, kept from object
// to object: a writer is about 650 KB to allocate and clear, and a
// commit a few hundred bytes to compress. Git's own loose objects are at
// zlib's best speed too (core.looseCompression); it reads any level.
var looseWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed) // a valid level: no error
	return zw
}}

// writeLooseObject stores an object in the objects directory as git does
// (zlib-compressed, read-only, renamed into place) and returns its SHA-1
// id. An object already stored is left as it is.
func writeLooseObject(objects, typ string, data []byte) (string, error) {
	header := fmt.Sprintf("%s %d\x00", typ, len(data))
	h := sha1.New()
	h.Write([]byte(header))
	h.Write(data)
	id := hex.EncodeToString(h.Sum(nil))
	dir := filepath.Join(objects, id[:2])
	path := filepath.Join(dir, id[2:])
	if _, err := os.Stat(path); err == nil {
		return id, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	zw := looseWriters.Get().(*zlib.Writer)
	defer looseWriters.Put(zw)
	zw.Reset(f)
	_, err = zw.Write([]byte(header))
	if err == nil {
		_, err = zw.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Chmod(0o444)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return "", err
	}
	return id, nil
}

// commitObject is the content of a commit of tree with parents, authored
// and committed by who at when (in when's time zone), as git commit-tree
// writes it.
func commitObject(tree string, parents []string, who Identity, message string, when time.Time) ([]byte, error) {
	who, err := who.resolved()
	if err != nil {
		return nil, err
	}
	var c bytes.Buffer
	fmt.Fprintf(&c, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&c, "parent %s\n", p)
	}
	sig := fmt.Sprintf("%s <%s> %d %s", who.Name, who.Email, when.Unix(), when.Format("-0700"))
	fmt.Fprintf(&c, "author %s\ncommitter %s\n\n%s", sig, sig, message)
	return c.Bytes(), nil
}
