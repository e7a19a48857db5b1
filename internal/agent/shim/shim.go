package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Exit codes of the shim's own outcomes; a command's exit code passes
// through otherwise.
const (
	// ExitMissing: file get of a file that does not exist.
	ExitMissing = 3
	// ExitTimeout: the command ran past its timeout and was killed.
	ExitTimeout = 124
	// ExitShim: the shim itself failed (a refused path, a bad flag).
	ExitShim = 125
	// ExitCannotRun: the command exists but cannot be executed.
	ExitCannotRun = 126
	// ExitNotFound: the command does not exist.
	ExitNotFound = 127
	// ExitHangup: the exec stream went away and the command was killed.
	ExitHangup = 129
)

// Binary is the file name install gives the agent.
const Binary = "fleetlift-agent"

// Install copies the executable self into dir as Binary, mode 0555,
// atomically (a temporary name renamed into place).
func Install(self, dir string) error {
	src, err := os.Open(self)
	if err != nil {
		return fmt.Errorf("install: open %s: %w", self, err)
	}
	defer src.Close()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+Binary+".*")
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install: copy %s: %w", self, err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("install: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, Binary)); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}

// confine cleans rel, a path relative to the workspace, refusing
// absolute paths and ".." past the top. Symbolic links that lead out are
// refused where the caller opens the path through os.Root.
func confine(rel string) (string, error) {
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%s: an absolute path; want one relative to the workspace", rel)
	}
	clean := filepath.Clean(rel)
	if clean == ".." || len(clean) > 2 && clean[:3] == "../" {
		return "", fmt.Errorf("%s: leads out of the workspace", rel)
	}
	return clean, nil
}

// errMissing marks a file that does not exist.
var errMissing = errors.New("no such file")
