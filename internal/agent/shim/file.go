package shim

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Get reads a file of the workspace.
type Get struct {
	Workspace string
	// Path is relative to Workspace.
	Path string
	// Offset and Length select a range; Length zero means to the end.
	Offset, Length int64
	// Base64 encodes the output (standard encoding), for transports that
	// carry text only.
	Base64 bool
}

// Run writes the file (the range) to stdout. A file that does not exist
// gives ExitMissing; a path that leads out of the workspace, or that is
// not a regular file, ExitShim.
func (g Get) Run(stdout, stderr io.Writer) int {
	if err := g.run(stdout); err != nil {
		fmt.Fprintf(stderr, "fleetlift-agent file get: %v\n", err)
		if errors.Is(err, errMissing) {
			return ExitMissing
		}
		return ExitShim
	}
	return 0
}

func (g Get) run(stdout io.Writer) error {
	root, err := os.OpenRoot(g.Workspace)
	if err != nil {
		return fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	rel, err := confine(g.Path)
	if err != nil {
		return err
	}
	f, err := root.Open(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", g.Path, errMissing)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", g.Path)
	}
	if _, err := f.Seek(g.Offset, io.SeekStart); err != nil {
		return err
	}
	var r io.Reader = f
	if g.Length > 0 {
		r = io.LimitReader(f, g.Length)
	}
	w := bufio.NewWriterSize(stdout, 64<<10)
	var out io.Writer = w
	var enc io.WriteCloser
	if g.Base64 {
		enc = base64.NewEncoder(base64.StdEncoding, w)
		out = enc
	}
	if _, err := io.Copy(out, r); err != nil {
		return fmt.Errorf("read %s: %w", g.Path, err)
	}
	if enc != nil {
		enc.Close()
	}
	return w.Flush()
}

// Put writes a file of the workspace, in steps: each call appends Data
// to the upload Upload in Scratch, and the call with Commit renames the
// whole upload into place.
type Put struct {
	Workspace string
	// Scratch is a directory outside the workspace for uploads.
	Scratch string
	// Upload names the upload: letters, digits, '-', '_' and '.'.
	Upload string
	// Data are base64 chunks (standard encoding) to append.
	Data []string
	// Commit, when set, is the path relative to Workspace the upload
	// replaces, atomically, once Data is appended.
	Commit string
	// Abort removes the upload instead.
	Abort bool
}

// Run does the step; a path that leads out of the workspace gives
// ExitShim.
func (p Put) Run(stderr io.Writer) int {
	if err := p.run(); err != nil {
		fmt.Fprintf(stderr, "fleetlift-agent file put: %v\n", err)
		return ExitShim
	}
	return 0
}

func (p Put) run() error {
	if p.Upload == "" || strings.Trim(p.Upload, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != "" || strings.HasPrefix(p.Upload, ".") {
		return fmt.Errorf("upload name %q: want letters, digits, '-', '_' and '.'", p.Upload)
	}
	partial := filepath.Join(p.Scratch, p.Upload)
	if p.Abort {
		if err := os.Remove(partial); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(p.Scratch, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	for i, chunk := range p.Data {
		b, err := base64.StdEncoding.DecodeString(chunk)
		if err != nil {
			f.Close()
			return fmt.Errorf("data %d: %w", i, err)
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	if p.Commit == "" {
		return nil
	}
	err = p.commit(partial)
	os.Remove(partial)
	return err
}

// commit copies the upload next to its destination and renames it there.
func (p Put) commit(partial string) error {
	root, err := os.OpenRoot(p.Workspace)
	if err != nil {
		return fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	rel, err := confine(p.Commit)
	if err != nil {
		return err
	}
	if rel == "." {
		return fmt.Errorf("%s: not a file name", p.Commit)
	}
	dir, base := filepath.Dir(rel), filepath.Base(rel)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	tmp := filepath.Join(dir, "."+base+".fleetlift-"+p.Upload)
	root.Remove(tmp)
	src, err := os.Open(partial)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", p.Commit, err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		root.Remove(tmp)
		return fmt.Errorf("write %s: %w", p.Commit, err)
	}
	if err := dst.Close(); err != nil {
		root.Remove(tmp)
		return fmt.Errorf("write %s: %w", p.Commit, err)
	}
	if err := root.Rename(tmp, rel); err != nil {
		root.Remove(tmp)
		return fmt.Errorf("replace %s: %w", p.Commit, err)
	}
	return nil
}
