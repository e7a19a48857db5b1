package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// record is a sandbox's state on disk, Root/<id>/sandbox.json, from which a
// restarted worker finds the sandbox again. It holds the declared
// environment (never the secrets), readable by the worker's user only.
type record struct {
	ID string `json:"id"`
	// PID is the agent's process id and process group.
	PID int `json:"pid"`
	// StartTicks is the agent's start time from /proc/<pid>/stat, which
	// tells the agent from a later process that reuses its pid.
	StartTicks uint64 `json:"start_ticks"`
	// Env is the sandbox's declared environment, PATH and HOME included:
	// what Exec'd commands start from. Secrets are not in it.
	Env     map[string]string `json:"env"`
	Created time.Time         `json:"created"`
	Timeout time.Duration     `json:"timeout,omitempty"`
	// Expired is set when Timeout elapsed and the sandbox was stopped.
	Expired bool `json:"expired,omitempty"`
	// Exit is set once a Provider has reaped the agent.
	Exit *exitRecord `json:"exit,omitempty"`
}

type exitRecord struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

// recordCache keeps the last record read from a sandbox's directory with
// the file's identity: a worker asks for it on every status poll, and it
// changes only when replaced (writeRecord renames a new file into place).
type recordCache struct {
	mu  sync.Mutex
	fi  os.FileInfo
	rec record
}

// read returns the record in dir, read again only when the file is not
// the one read last time.
func (c *recordCache) read(dir string) (*record, error) {
	fi, err := os.Stat(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fi != nil && os.SameFile(c.fi, fi) && c.fi.Size() == fi.Size() && c.fi.ModTime().Equal(fi.ModTime()) {
		rec := c.rec
		return &rec, nil
	}
	rec, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	c.fi, c.rec = fi, *rec
	return rec, nil
}

func readRecord(dir string) (*record, error) {
	data, err := os.ReadFile(filepath.Join(dir, recordFile))
	if err != nil {
		return nil, err
	}
	var rec record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, recordFile), err)
	}
	return &rec, nil
}

// writeRecord replaces the record atomically. It fails, rather than
// recreating anything, when dir has been removed.
func writeRecord(dir string, rec *record) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("encode sandbox record: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, recordFile), data); err != nil {
		return fmt.Errorf("write sandbox record: %w", err)
	}
	return nil
}

// writeFileAtomic replaces path with data through a file beside it, which
// it fails to make when path's directory has been removed.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
	}
	return err
}
