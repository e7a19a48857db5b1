package git

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A pack git made, with deltas against an offset or an id, is read into
// the objects git reads from it, and indexed byte for byte as git
// index-pack indexes it.
func TestReadPackAndIndexAsGitDoes(t *testing.T) {
	work := t.TempDir()
	run := func(stdin string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
			"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@example.com")
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	run("", "init", "--quiet", "-b", "main")
	long := strings.Repeat("a line that deltas compress well\n", 300)
	for i := range 8 {
		for j := range 3 {
			name := filepath.Join(work, "dir", string(rune('a'+j))+".txt")
			os.MkdirAll(filepath.Dir(name), 0o755)
			os.WriteFile(name, []byte(long+strings.Repeat("change\n", i*3+j)), 0o644)
		}
		// A file each version of which is like only the one before:
		// deltas of deltas (chains longer than one).
		var slide strings.Builder
		for b := i; b < i+3; b++ {
			for l := range 300 {
				fmt.Fprintf(&slide, "block %d line %d\n", b, l)
			}
		}
		os.WriteFile(filepath.Join(work, "slide.txt"), []byte(slide.String()), 0o644)
		run("", "add", "-A")
		run("", "commit", "--quiet", "-m", "c")
	}
	for _, flags := range [][]string{{"--delta-base-offset"}, nil} {
		args := append([]string{"pack-objects", "--revs", "--stdout", "-q"}, flags...)
		pack := run("main\n", args...)
		objs, err := readPack(pack)
		if err != nil {
			t.Fatalf("%v: %v", flags, err)
		}
		packFile := filepath.Join(t.TempDir(), "p.pack")
		os.WriteFile(packFile, pack, 0o644)
		idx := strings.TrimSuffix(packFile, ".pack") + ".idx"
		run("", "index-pack", "-o", idx, packFile)
		want, _ := os.ReadFile(idx)
		deltas := 0
		for _, line := range strings.Split(string(run("", "verify-pack", "-v", idx)), "\n") {
			if len(strings.Fields(line)) == 7 { // id type size size-in-pack offset depth base
				deltas++
			}
		}
		if deltas == 0 {
			t.Fatalf("%v: the pack has no deltas to resolve", flags)
		}
		if got := objs.index(pack[len(pack)-hashLen:]); !bytes.Equal(got, want) {
			t.Errorf("%v: the index differs from git index-pack's", flags)
		}
		for _, o := range objs.list {
			typ := strings.TrimSpace(string(run("", "cat-file", "-t", hexID(o.id))))
			data := run("", "cat-file", typ, hexID(o.id))
			if typ != objectTypeNames[o.typ] || !bytes.Equal(data, o.data) {
				t.Errorf("%v: object %x differs from git's", flags, o.id)
			}
		}
		if flags != nil {
			continue
		}
		// Deltas against an id may come before their bases, and a base
		// may be such a delta itself: the same pack's entries in reverse
		// order give the same objects.
		rev, err := readPack(reversed(pack, objs))
		if err != nil {
			t.Fatalf("the pack in reverse: %v", err)
		}
		for _, o := range objs.list {
			if _, data, ok := rev.getRaw(o.id); !ok || !bytes.Equal(data, o.data) {
				t.Errorf("the pack in reverse: object %x differs", o.id)
			}
		}
	}
}

// reversed is pack (of REF_DELTAs only, whose entries do not depend on
// where they are) with its entries in reverse order.
func reversed(pack []byte, objs *packObjects) []byte {
	body := pack[:len(pack)-hashLen]
	starts := make([]int, 0, len(objs.list)+1)
	for _, o := range objs.list {
		starts = append(starts, int(o.offset))
	}
	slices.Sort(starts)
	starts = append(starts, len(body))
	out := bytes.Clone(body[:12])
	for k := len(starts) - 2; k >= 0; k-- {
		out = append(out, body[starts[k]:starts[k+1]]...)
	}
	sum := sha1.Sum(out)
	return append(out, sum[:]...)
}

func hexID(id [hashLen]byte) string { return hex.EncodeToString(id[:]) }

// A pack from a server is read without panicking whatever its bytes:
// anything that is not a sound pack is declined (left to git).
func FuzzReadPack(f *testing.F) {
	work := f.TempDir()
	for _, args := range [][]string{
		{"init", "--quiet", "-b", "main"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			f.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	long := strings.Repeat("a line that deltas compress well\n", 50)
	var packs [][]byte
	for i := range 3 {
		os.WriteFile(filepath.Join(work, "f.txt"), []byte(long+strings.Repeat("x\n", i)), 0o644)
		for _, args := range [][]string{{"add", "-A"}, {"-c", "user.name=T", "-c", "user.email=t@example.com", "commit", "--quiet", "-m", "c"}} {
			cmd := exec.Command("git", args...)
			cmd.Dir = work
			if out, err := cmd.CombinedOutput(); err != nil {
				f.Fatalf("git %v: %v %s", args, err, out)
			}
		}
	}
	for _, flags := range [][]string{{"--delta-base-offset"}, nil} {
		cmd := exec.Command("git", append([]string{"pack-objects", "--revs", "--stdout", "-q"}, flags...)...)
		cmd.Dir = work
		cmd.Stdin = strings.NewReader("main\n")
		pack, err := cmd.Output()
		if err != nil {
			f.Fatal(err)
		}
		packs = append(packs, pack)
	}
	// The fuzzed bytes are a pack's body: its checksum is made for them,
	// so that what follows the check is what gets fuzzed.
	for _, pack := range packs {
		body := pack[:len(pack)-hashLen]
		f.Add(body)
		f.Add(body[:len(body)/2])
		bad := bytes.Clone(body)
		bad[20] ^= 0xff
		f.Add(bad)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sum := sha1.Sum(body)
		pack := append(bytes.Clone(body), sum[:]...)
		objs, err := readPack(pack)
		if err != nil {
			if !errors.Is(err, errLeftToGit) {
				t.Fatalf("error %v does not leave the clone to git", err)
			}
			return
		}
		for _, o := range objs.list {
			if objectID(o.typ, o.data) != o.id {
				t.Fatalf("object %x does not hash to its id", o.id)
			}
		}
		objs.index(pack[len(pack)-hashLen:])
	})
}

// Deltas of any bytes apply or are declined, never panic.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("hello world"), []byte{11, 5, 0x90, 5, 'x'})
	f.Add([]byte("abc"), []byte{3, 3, 0x91, 0, 3})
	f.Add([]byte(""), []byte{0, 1, 1, 'a'})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		if _, err := applyDelta(base, delta); err != nil && !errors.Is(err, errLeftToGit) {
			t.Fatalf("error %v does not leave the clone to git", err)
		}
	})
}
