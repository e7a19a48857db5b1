package git

import (
	"bytes"
	"compress/zlib"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// A push's pack stores its objects when they are small together, and
// compresses them when the change is large; git reads either.
func TestPackLooseCompressesOnlyALargeChange(t *testing.T) {
	for _, files := range []int{2, 200} {
		repo := t.TempDir()
		gittest.Run(t, repo, "init", "-q")
		objects := filepath.Join(repo, ".git", "objects")
		var tree bytes.Buffer
		total := 0
		for i := range files {
			data := bytes.Repeat(fmt.Appendf(nil, "line of generated file %03d\n", i), 40)
			id, err := writeLooseObject(objects, "blob", data)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := hex.DecodeString(id)
			fmt.Fprintf(&tree, "100644 f%03d\x00%s", i, raw)
			total += len(data)
		}
		treeID, err := writeLooseObject(objects, "tree", tree.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		c, err := commitObject(treeID, nil, Identity{Name: "T", Email: "t@example.com"}, "change\n", time.Unix(1e9, 0).UTC())
		if err != nil {
			t.Fatal(err)
		}
		commit, err := writeLooseObject(objects, "commit", c)
		if err != nil {
			t.Fatal(err)
		}
		pack, err := packLoose(objects, commit)
		if err != nil {
			t.Fatal(err)
		}
		if compressed, large := len(pack) < total/2, total >= storeBelow; compressed != large {
			t.Errorf("%d files, %d bytes: a %d-byte pack; want it compressed: %v", files, total, len(pack), large)
		}
		p := filepath.Join(t.TempDir(), "change.pack")
		if err := os.WriteFile(p, pack, 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Run(t, repo, "index-pack", p)
		if out := gittest.Run(t, repo, "verify-pack", "-v", strings.TrimSuffix(p, ".pack")+".idx"); !strings.Contains(out, commit) {
			t.Errorf("git verify-pack does not list commit %s:\n%s", commit, out)
		}
	}
}
