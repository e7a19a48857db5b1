package kube

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/fleetlift/fleetlift/internal/agent/shim"
	"github.com/fleetlift/fleetlift/internal/jobspec"
	"github.com/fleetlift/fleetlift/internal/sandbox"
)

// Sizes of the file protocol's steps.
const (
	// uploadChunk is how many bytes one exec uploads: base64 in
	// arguments of 64 KiB (Linux allows 128 KiB per argument), 256 KiB
	// in all, within what an exec URL or a SandboxRequest's spec holds.
	uploadChunk = 192 << 10
	uploadArg   = 64 << 10
	// downloadChunk is how many bytes one exec reads: 683 KiB of base64,
	// within a result's 1 MiB.
	downloadChunk = 512 << 10
)

// runner runs a command (argv, in dir relative to the workspace, killed
// after timeout) in a sandbox's exec container, through the shim.
type runner interface {
	run(ctx context.Context, id string, argv []string, dir string, timeout time.Duration) (*sandbox.ExecResult, error)
}

func newUploadID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "up-" + hex.EncodeToString(b)
}

// checkPath refuses what the shim would refuse anyway, without a round
// trip: absolute paths and ".." past the workspace.
func checkPath(p string) error {
	if path.IsAbs(p) {
		return fmt.Errorf("%s: an absolute path; want one relative to the workspace", p)
	}
	if c := path.Clean(p); c == ".." || len(c) > 2 && c[:3] == "../" {
		return fmt.Errorf("%s: leads out of the workspace", p)
	}
	return nil
}

// shimFailed is the error of a shim step that did not exit 0.
func shimFailed(step string, res *sandbox.ExecResult) error {
	switch res.ExitCode {
	case shim.ExitMissing:
		return fmt.Errorf("%s: %s: %w", step, trim(res.Stderr), sandbox.ErrNotFound)
	default:
		return fmt.Errorf("%s: exit status %d: %s", step, res.ExitCode, trim(res.Stderr))
	}
}

func trim(s string) string { return string(bytes.TrimSpace([]byte(s))) }

// upload appends src to the upload up in the exec container's scratch
// directory, in chunks, and with commit set, renames it there.
func upload(ctx context.Context, r runner, id, workspace string, src io.Reader, up, commit string) error {
	buf := make([]byte, uploadChunk)
	for first := true; ; first = false {
		n, err := io.ReadFull(src, buf)
		last := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !last {
			abort(ctx, r, id, workspace, up)
			return fmt.Errorf("read: %w", err)
		}
		if n == 0 && !first && !(last && commit != "") {
			return nil
		}
		argv := []string{jobspec.Agent, "file", "put", "--workspace", workspace, "--scratch", jobspec.ScratchDir, "--upload", up}
		enc := base64.StdEncoding.EncodeToString(buf[:n])
		for len(enc) > 0 {
			k := min(len(enc), uploadArg)
			argv = append(argv, "--data", enc[:k])
			enc = enc[k:]
		}
		if last && commit != "" {
			argv = append(argv, "--commit", commit)
		}
		res, err := r.run(ctx, id, argv, "", time.Minute)
		if err != nil {
			abort(ctx, r, id, workspace, up)
			return err
		}
		if res.ExitCode != 0 {
			abort(ctx, r, id, workspace, up)
			return shimFailed("upload", res)
		}
		if last {
			return nil
		}
	}
}

// abort removes an upload, best effort: a failed upload leaves nothing in
// the workspace either way.
func abort(ctx context.Context, r runner, id, workspace, up string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	r.run(ctx, id, []string{jobspec.Agent, "file", "put", "--workspace", workspace, "--scratch", jobspec.ScratchDir, "--upload", up, "--abort"}, "", time.Minute)
}

// copyTo writes src to dest in the workspace, atomically.
func copyTo(ctx context.Context, r runner, id, workspace string, src io.Reader, dest string) error {
	if err := checkPath(dest); err != nil {
		return fmt.Errorf("copy to %s: %w", dest, err)
	}
	if err := upload(ctx, r, id, workspace, src, newUploadID(), dest); err != nil {
		return fmt.Errorf("copy to %s: %w", dest, err)
	}
	return nil
}

// copyFrom reads src from the workspace, in ranges.
func copyFrom(ctx context.Context, r runner, id, workspace, src string) (io.ReadCloser, error) {
	if err := checkPath(src); err != nil {
		return nil, fmt.Errorf("copy from %s: %w", src, err)
	}
	var out bytes.Buffer
	for offset := 0; ; offset += downloadChunk {
		argv := []string{jobspec.Agent, "file", "get", "--workspace", workspace, "--base64",
			"--offset", strconv.Itoa(offset), "--length", strconv.Itoa(downloadChunk), src}
		res, err := r.run(ctx, id, argv, "", time.Minute)
		if err != nil {
			return nil, fmt.Errorf("copy from %s: %w", src, err)
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("copy from %s: %w", src, shimFailed("read", res))
		}
		b, err := base64.StdEncoding.DecodeString(res.Stdout)
		if err != nil {
			return nil, fmt.Errorf("copy from %s: decode: %w", src, err)
		}
		out.Write(b)
		if len(b) < downloadChunk {
			return io.NopCloser(&out), nil
		}
	}
}

// execute runs cmd: its Stdin uploaded first, its Env and the upload
// given to a second shim inside the controller's (or the provider's)
// one, its timeout the sooner of cmd.Timeout and ctx's deadline.
func execute(ctx context.Context, r runner, id, workspace string, cmd sandbox.ExecCommand) (*sandbox.ExecResult, error) {
	if len(cmd.Command) == 0 {
		return nil, errors.New("exec: no command")
	}
	if cmd.WorkingDir != "" {
		if err := checkPath(cmd.WorkingDir); err != nil {
			return nil, fmt.Errorf("exec: working directory %w", err)
		}
	}
	timeout := cmd.Timeout
	if d, ok := ctx.Deadline(); ok && (timeout == 0 || time.Until(d) < timeout) {
		timeout = max(time.Until(d), time.Millisecond)
	}
	argv := cmd.Command
	if cmd.Stdin != nil || len(cmd.Env) > 0 {
		inner := []string{jobspec.Agent, "exec"}
		for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
			inner = append(inner, "--env", k+"="+cmd.Env[k])
		}
		if cmd.Stdin != nil {
			up := newUploadID()
			if err := upload(ctx, r, id, workspace, cmd.Stdin, up, ""); err != nil {
				return nil, fmt.Errorf("exec: standard input: %w", err)
			}
			inner = append(inner, "--stdin-file", path.Join(jobspec.ScratchDir, up))
		}
		argv = append(append(inner, "--"), cmd.Command...)
	}
	res, err := r.run(ctx, id, argv, cmd.WorkingDir, timeout)
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", cmd.Command[0], err)
	}
	return res, nil
}
