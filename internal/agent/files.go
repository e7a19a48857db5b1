package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// writeFileAtomic writes data to path atomically (a temporary file renamed
// over it), so a poller never reads half a file.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Bounds on the protocol files the agent reads: what the worker writes is
// small, and nothing larger is read into memory.
const (
	maxManifestBytes = 16 << 20
	maxSteeringBytes = 1 << 20
	maxStatusBytes   = 1 << 20
)

// readJSON reads path, a regular file of at most limit bytes, into v; a
// missing file gives an error wrapping fs.ErrNotExist.
func readJSON(path string, v any, limit int64) error {
	data, err := readRegular(path, limit)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %s: %w", filepath.Base(path), err)
	}
	return nil
}

// errTooLarge is returned by readRegular for files over the limit.
var errTooLarge = errors.New("file too large")

// readRegular reads a regular file without following a symbolic link at
// path, up to limit bytes.
func readRegular(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollow, 0)
	if err != nil {
		if isSymlinkErr(path, err) {
			return nil, fmt.Errorf("%s is a symbolic link: refused", filepath.Base(path))
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", filepath.Base(path), errTooLarge, limit)
	}
	return data, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return !errors.Is(err, fs.ErrNotExist)
}
