package git

import (
	"bytes"
	"compress/zlib"
	"io"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/fleetlift/fleetlift/internal/git/gittest"
)

// Data under storeBelow is written as a stored zlib stream when storing is
// asked for, anything else compressed; every stream reads back as what was
// written.
func TestWriteZlibStoresSmallObjectsAndCompressesLargeOnes(t *testing.T) {
	text := bytes.Repeat([]byte("module example.com/svc\n\ngo 1.26\n"), 2000)
	noise := make([]byte, 3*storeBelow)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(noise)
	for _, tc := range []struct {
		name   string
		store  bool
		parts  [][]byte
		stored bool
	}{
		{"empty", true, nil, true},
		{"header only", true, [][]byte{[]byte("blob 0\x00")}, true},
		{"header and body", true, [][]byte{[]byte("blob 6\x00"), []byte("hello\n")}, true},
		{"just under", true, [][]byte{text[:storeBelow-1]}, true},
		{"small, not to be stored", false, [][]byte{text[:storeBelow-1]}, false},
		{"at the bound", true, [][]byte{text[:storeBelow]}, false},
		{"large text", true, [][]byte{[]byte("blob x\x00"), text}, false},
		{"large noise", true, [][]byte{noise}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeZlib(&buf, tc.store, tc.parts...); err != nil {
				t.Fatal(err)
			}
			want := bytes.Join(tc.parts, nil)
			zr, err := zlib.NewReader(bytes.NewReader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(zr)
			if err != nil {
				t.Fatalf("read back: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("read back %d bytes, wrote %d", len(got), len(want))
			}
			// A stored stream is the data and 11 bytes of framing.
			if stored := buf.Len() == len(want)+11; stored != tc.stored {
				t.Errorf("%d bytes of data made a %d-byte stream: stored %v, want %v", len(want), buf.Len(), stored, tc.stored)
			}
			if tc.name == "large text" && buf.Len() > len(want)/10 {
				t.Errorf("%d bytes of repeated text compressed to %d", len(want), buf.Len())
			}
		})
	}
}

// git reads loose objects fleetlift writes, stored or compressed, and
// finds nothing wrong with them.
func TestGitReadsLooseObjectsWrittenInProcess(t *testing.T) {
	repo := t.TempDir()
	gittest.Run(t, repo, "init", "-q")
	objects := filepath.Join(repo, ".git", "objects")
	small := []byte("module svc\n\ngo 1.26\n")
	large := bytes.Repeat([]byte("a line of a generated file\n"), 4000)
	for _, data := range [][]byte{small, large} {
		id, err := writeLooseObject(objects, "blob", data)
		if err != nil {
			t.Fatal(err)
		}
		if got := gittest.Run(t, repo, "cat-file", "blob", id); got != string(bytes.TrimSpace(data)) {
			t.Fatalf("git cat-file blob %s: %d bytes, want %d", id, len(got), len(data))
		}
		dir := t.TempDir()
		gittest.WriteFiles(t, dir, map[string]string{"f": string(data)})
		if want := gittest.Run(t, repo, "hash-object", "--no-filters", filepath.Join(dir, "f")); want != id {
			t.Fatalf("object id %s, git hashes the content to %s", id, want)
		}
	}
	gittest.Run(t, repo, "fsck", "--full", "--strict", "--no-dangling")
}
