package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// CopyTo writes src to destPath inside the workspace, creating missing
// directories (owned by uid 1000): through the archive endpoint into a
// temporary name in the same directory, then renamed over destPath inside
// the container, so the agent reads the old content or the new, never part
// of it. src is read whole before anything is written: a failing reader
// leaves the sandbox as it was. A new file gets mode 0644, a replaced one
// keeps its mode. When the sandbox no longer runs (nothing reads in it),
// the file is written in place. It refuses absolute paths, paths that
// leave the workspace by "..", and directories that are symbolic links
// leading out of it.
func (p *Provider) CopyTo(ctx context.Context, id string, src io.Reader, destPath string) error {
	fail := func(err error) error { return fmt.Errorf("copy %s to sandbox %s: %w", destPath, id, err) }
	rel, err := workspacePath(destPath)
	if err == nil && rel == "." {
		err = errors.New("names the workspace, not a file")
	}
	if err != nil {
		return fail(err)
	}
	c, err := p.find(ctx, id)
	if err != nil {
		return fmt.Errorf("copy %s to sandbox: %w", destPath, err)
	}
	dir, base := path.Split(rel)
	dir = strings.TrimSuffix(dir, "/")
	existing, missing, err := p.walk(ctx, c.ID, dir)
	if err != nil {
		return fail(err)
	}
	mode := int64(0o644)
	if len(missing) == 0 {
		st, err := p.cli.ContainerStatPath(ctx, c.ID, client.ContainerStatPathOptions{Path: absolute(rel)})
		switch {
		case err == nil && st.Stat.Mode.IsDir():
			return fail(errors.New("a directory is in the way"))
		case err == nil && st.Stat.Mode.IsRegular():
			mode = int64(st.Stat.Mode.Perm())
		case err != nil && !cerrdefs.IsNotFound(err):
			return fail(err)
		}
	}
	var data bytes.Buffer
	if _, err := io.Copy(&data, ctxReader{ctx, src}); err != nil {
		return fail(fmt.Errorf("read source: %w", err))
	}

	running := c.State != nil && c.State.Running
	name := base
	if running {
		name = "." + base + ".tmp-" + randomHex(6)
	}
	var archive bytes.Buffer
	tw := tar.NewWriter(&archive)
	now := time.Now()
	prefix := ""
	for _, d := range missing {
		prefix += d + "/"
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: prefix, Mode: 0o755, Uid: UID, Gid: GID, ModTime: now, Format: tar.FormatPAX}); err != nil {
			return fail(err)
		}
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: prefix + name, Size: int64(data.Len()), Mode: mode, Uid: UID, Gid: GID, ModTime: now, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return fail(err)
	}
	if _, err := tw.Write(data.Bytes()); err != nil {
		return fail(err)
	}
	if err := tw.Close(); err != nil {
		return fail(err)
	}
	target := absolute(existing)
	if _, err := p.cli.CopyToContainer(ctx, c.ID, client.CopyToContainerOptions{DestinationPath: target, Content: &archive}); err != nil {
		if cerrdefs.IsNotFound(err) {
			err = fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
		}
		return fail(err)
	}
	if !running {
		return nil
	}
	dirAbs := absolute(dir)
	res, err := p.run(ctx, c, dirAbs, nil, []string{"mv", "-f", "--", name, base}, nil)
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("rename into place: exit code %d: %s", res.ExitCode, strings.TrimSpace(res.Stderr))
	}
	if err != nil {
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, _ = p.run(cleanCtx, c, dirAbs, nil, []string{"rm", "-f", "--", name}, nil)
		return fail(err)
	}
	return nil
}

// CopyFrom reads srcPath inside the workspace: through the archive
// endpoint, or, when the engine runs on this host and this process can
// read the workspace volume where the engine says it is, from there (the
// worker polls status.json every 100 ms: the engine answers an archive
// request in about 40 ms, a file is read in well under one). A missing file gives an error wrapping sandbox.ErrNotFound;
// directories, symbolic links and other non-regular files are refused, as
// are absolute paths, paths that leave the workspace by "..", and
// directories that are symbolic links leading out of it. It works on a
// sandbox whose agent has exited.
func (p *Provider) CopyFrom(ctx context.Context, id string, srcPath string) (io.ReadCloser, error) {
	fail := func(err error) (io.ReadCloser, error) {
		return nil, fmt.Errorf("copy %s from sandbox %s: %w", srcPath, id, err)
	}
	rel, err := workspacePath(srcPath)
	if err != nil {
		return fail(err)
	}
	if err := checkID(id); err != nil {
		return fail(fmt.Errorf("%w: %w", sandbox.ErrNotFound, err))
	}
	if f, err, ok := p.openLocal(ctx, id, rel); ok {
		if errors.Is(err, fs.ErrNotExist) {
			return fail(fmt.Errorf("%w: %w", sandbox.ErrNotFound, err))
		}
		if err != nil {
			return fail(err)
		}
		return f, nil
	}
	ref := p.containerName(id)
	_, missing, err := p.walk(ctx, ref, path.Dir(rel))
	if err != nil {
		return fail(err)
	}
	if len(missing) > 0 {
		return fail(fmt.Errorf("%w: no directory %s", sandbox.ErrNotFound, path.Dir(rel)))
	}
	// The engine takes the entry's size from one look at the file and its
	// bytes from another: a file replaced in between (the agent rewrites
	// status.json while the worker reads it) comes out cut. Such a read is
	// made again, whole, a few times.
	for attempt := 1; ; attempt++ {
		rc, err := p.archiveRead(ctx, ref, rel)
		if err != nil {
			return fail(err)
		}
		data, err := io.ReadAll(io.LimitReader(rc, maxArchiveRead+1))
		if err == nil && len(data) <= maxArchiveRead {
			// A file replaced by a longer one between the two looks
			// fills the entry with the new file's first bytes: the
			// engine may break the stream after it, or (Docker 20.10)
			// log the error and end the archive cleanly all the same.
			// Only a stream that ends cleanly, with as many bytes as
			// the file had when the request began and the file
			// unchanged since, holds one version whole.
			er := rc.(*entryReader)
			if err = er.ended(); err == nil {
				err = p.unchanged(ctx, ref, rel, er.before, len(data))
			}
		}
		rc.Close()
		switch {
		case err == nil && len(data) > maxArchiveRead:
			return fail(fmt.Errorf("file over %d bytes", maxArchiveRead))
		case err == nil:
			return io.NopCloser(bytes.NewReader(data)), nil
		case errors.Is(err, io.ErrUnexpectedEOF) && attempt < maxArchiveAttempts:
			// Replaced again and again (a writer in a loop): wait a
			// little longer each time for a quiet moment.
			select {
			case <-ctx.Done():
				return fail(ctx.Err())
			case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
			}
			continue
		default:
			return fail(err)
		}
	}
}

// maxArchiveAttempts bounds the reads of a file replaced while it is read.
const maxArchiveAttempts = 20

// maxArchiveRead bounds a file read through the archive endpoint, which
// is read whole: the protocol files are far smaller.
const maxArchiveRead = 256 << 20

// archiveRead opens rel, a regular file, through the archive endpoint.
func (p *Provider) archiveRead(ctx context.Context, ref, rel string) (io.ReadCloser, error) {
	res, err := p.cli.CopyFromContainer(ctx, ref, client.CopyFromContainerOptions{SourcePath: absolute(rel)})
	if cerrdefs.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %w", sandbox.ErrNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	if !res.Stat.Mode.IsRegular() {
		res.Content.Close()
		return nil, fmt.Errorf("not a regular file (%s)", res.Stat.Mode.Type())
	}
	tr := tar.NewReader(res.Content)
	hdr, err := tr.Next()
	if err == nil && hdr.Typeflag != tar.TypeReg {
		err = fmt.Errorf("not a regular file (tar type %c)", hdr.Typeflag)
	}
	if err != nil {
		res.Content.Close()
		return nil, err
	}
	return &entryReader{Reader: tr, Closer: res.Content, before: res.Stat}, nil
}

// unchanged reports io.ErrUnexpectedEOF when rel no longer is the file
// before describes (size, modification time, mode), or n, the bytes read,
// is not its size: it was replaced while it was read.
func (p *Provider) unchanged(ctx context.Context, ref, rel string, before container.PathStat, n int) error {
	if int64(n) != before.Size {
		return io.ErrUnexpectedEOF
	}
	after, err := p.cli.ContainerStatPath(ctx, ref, client.ContainerStatPathOptions{Path: absolute(rel)})
	if err != nil {
		return err
	}
	if after.Stat.Size != before.Size || !after.Stat.Mtime.Equal(before.Mtime) || after.Stat.Mode != before.Mode {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// openLocal opens rel in sandbox id's workspace volume at its mount point
// on this host, confined to it (os.Root). ok is false when that is not
// possible (a remote engine, a mount point this process cannot open, a
// symbolic link that only resolves inside the container): then the
// archive endpoint is the way. A missing file is reported with ok true.
func (p *Provider) openLocal(ctx context.Context, id, rel string) (_ io.ReadCloser, _ error, ok bool) {
	if !p.hostReads || !strings.HasPrefix(p.cli.DaemonHost(), "unix://") {
		return nil, nil, false
	}
	mountpoint, err := p.mountpoint(ctx, p.workspaceVolume(id))
	if err != nil {
		return nil, nil, false
	}
	root, err := os.OpenRoot(mountpoint)
	if err != nil {
		return nil, nil, false
	}
	defer root.Close()
	// O_NONBLOCK: opening a FIFO must not block the worker.
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err, true
	}
	if err != nil {
		return nil, nil, false
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, false
	}
	return f, nil, true
}

// mountpoint is where the engine keeps a volume on its host, remembered
// per volume (the local driver's path is fixed by the volume's name).
func (p *Provider) mountpoint(ctx context.Context, volume string) (string, error) {
	p.mu.Lock()
	mp, ok := p.mountpoints[volume]
	p.mu.Unlock()
	if ok {
		return mp, nil
	}
	res, err := p.cli.VolumeInspect(ctx, volume, client.VolumeInspectOptions{})
	if err != nil {
		return "", err
	}
	mp = res.Volume.Mountpoint
	if res.Volume.Driver != "local" || !strings.HasPrefix(mp, "/") {
		return "", fmt.Errorf("volume %s is not on this host", volume)
	}
	p.mu.Lock()
	p.mountpoints[volume] = mp
	p.mu.Unlock()
	return mp, nil
}

type entryReader struct {
	*tar.Reader
	io.Closer
	// before is the file as the engine saw it when the request began.
	before container.PathStat
}

// ended reports, once the entry is read, whether the archive ends after
// it as it should; io.ErrUnexpectedEOF when it does not.
func (e *entryReader) ended() error {
	if _, err := e.Reader.Next(); err != io.EOF {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// walk checks the directories of rel, a clean path relative to the
// workspace ("." for the workspace itself), from the top: each must be a
// directory, or a symbolic link to one inside the workspace. It returns
// the deepest one that exists (relative) and the names of those below it
// that do not.
func (p *Provider) walk(ctx context.Context, ref, rel string) (existing string, missing []string, err error) {
	existing = "."
	if rel == "." || rel == "" {
		return existing, nil, nil
	}
	parts := strings.Split(rel, "/")
	for i, part := range parts {
		cur := path.Join(existing, part)
		st, err := p.cli.ContainerStatPath(ctx, ref, client.ContainerStatPathOptions{Path: absolute(cur)})
		if cerrdefs.IsNotFound(err) {
			return existing, parts[i:], nil
		}
		if err != nil {
			return "", nil, err
		}
		if err := inside(cur, st.Stat); err != nil {
			return "", nil, err
		}
		existing = cur
	}
	return existing, nil, nil
}

// inside refuses a path whose stat shows a symbolic link that leads out
// of the workspace, or something that is no directory.
func inside(rel string, st container.PathStat) error {
	if st.Mode&fs.ModeSymlink != 0 {
		target := path.Clean(st.LinkTarget)
		if target != Workspace && !strings.HasPrefix(target, Workspace+"/") {
			return fmt.Errorf("path %q leaves the workspace by a symbolic link (to %s)", rel, st.LinkTarget)
		}
		return nil
	}
	if !st.Mode.IsDir() {
		return fmt.Errorf("%s is not a directory", rel)
	}
	return nil
}

// workspacePath checks that p names something inside the workspace by its
// letters alone: relative, with no ".." that climbs out. An empty p means
// the workspace itself.
func workspacePath(p string) (string, error) {
	if p == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("path %q is absolute; want one relative to the workspace", p)
	}
	if strings.ContainsRune(p, 0) || strings.Contains(p, "\\") {
		return "", fmt.Errorf("path %q has characters a sandbox path may not", p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("path %q leaves the workspace", p)
	}
	return clean, nil
}

// absolute is rel's path in the container.
func absolute(rel string) string {
	return path.Join(Workspace, rel)
}

// demux splits the engine's multiplexed stdout and stderr stream.
func demux(stdout, stderr io.Writer, src io.Reader) (int64, error) {
	return stdcopy.StdCopy(stdout, stderr, src)
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
