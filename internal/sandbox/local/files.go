package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// CopyTo writes src to destPath inside the workspace, creating missing
// directories, through a temporary file in the same directory renamed over
// destPath: readers see the old content or the new, never part of it. A new
// file gets mode 0644, a replaced one keeps its mode. It refuses absolute
// paths and paths that leave the workspace by ".." or by a symbolic link.
func (p *Provider) CopyTo(ctx context.Context, id string, src io.Reader, destPath string) error {
	b, _, err := p.find(id)
	if err != nil {
		return fmt.Errorf("copy %s to sandbox: %w", destPath, err)
	}
	rel, err := workspacePath(destPath)
	if err == nil && rel == "." {
		err = errors.New("names the workspace, not a file")
	}
	if err != nil {
		return fmt.Errorf("copy %s to sandbox %s: %w", destPath, id, err)
	}
	if err := copyTo(ctx, b.workspace, src, rel); err != nil {
		return fmt.Errorf("copy %s to sandbox %s: %w", destPath, id, err)
	}
	return nil
}

func copyTo(ctx context.Context, workspace string, src io.Reader, rel string) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	dir := filepath.Dir(rel)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := filepath.Join(dir, "."+filepath.Base(rel)+".tmp-"+hex.EncodeToString(suffix[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	// A replaced file keeps its permissions (an executable script stays
	// executable).
	if fi, statErr := root.Lstat(rel); statErr == nil && fi.Mode().IsRegular() {
		err = f.Chmod(fi.Mode().Perm())
	}
	if err == nil {
		_, err = io.Copy(f, ctxReader{ctx, src})
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return nil
}

// CopyFrom opens srcPath inside the workspace for reading. A missing file
// gives an error wrapping sandbox.ErrNotFound; directories and other
// non-regular files are refused, as are absolute paths and paths that leave
// the workspace by ".." or by a symbolic link.
func (p *Provider) CopyFrom(ctx context.Context, id string, srcPath string) (io.ReadCloser, error) {
	b, _, err := p.find(id)
	if err != nil {
		return nil, fmt.Errorf("copy %s from sandbox: %w", srcPath, err)
	}
	rel, err := workspacePath(srcPath)
	if err != nil {
		return nil, fmt.Errorf("copy %s from sandbox %s: %w", srcPath, id, err)
	}
	f, err := openRegular(b.workspace, rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("copy %s from sandbox %s: %w: %w", srcPath, id, sandbox.ErrNotFound, err)
	}
	if err != nil {
		return nil, fmt.Errorf("copy %s from sandbox %s: %w", srcPath, id, err)
	}
	return f, nil
}

func openRegular(workspace, rel string) (*os.File, error) {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// O_NONBLOCK: opening a FIFO must not block the worker.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// workspacePath checks that p names something inside the workspace by its
// letters alone: relative, with no ".." that climbs out. Symbolic links are
// checked when the path is used, through os.Root. An empty p means the
// workspace itself.
func workspacePath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		return "", fmt.Errorf("path %q is absolute; want one relative to the workspace", p)
	}
	if !filepath.IsLocal(p) {
		return "", fmt.Errorf("path %q leaves the workspace", p)
	}
	return filepath.Clean(p), nil
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}
