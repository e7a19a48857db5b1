package devserver

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	// The SQLite driver Temporal's plugin registers; a first start builds
	// the database with it on a connection of its own.
	_ "modernc.org/sqlite"
)

// The database's companions in its directory: SQLite's write-ahead log
// and its index, the lock held while a server uses the database, and the
// infix of a database being built.
const (
	walSuffix  = "-wal"
	shmSuffix  = "-shm"
	lockSuffix = ".lock"
	tmpInfix   = ".tmp-"
)

// lockDatabase makes the database's directory and takes the lock that
// keeps a second server off the database for as long as this one runs.
// It does not wait: a lock held means a server is running.
func lockDatabase(path string) (unlock func(), err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create database directory %s: %w", dir, err)
	}
	unlock, err = lockFile(path + lockSuffix)
	if errors.Is(err, errLocked) {
		if addr := servedAt(path); addr != "" {
			return nil, fmt.Errorf("temporal database %s is in use by another fleetlift server (one with the same --state-dir is running) at %s: use it with --temporal-address %s, or stop it, or use another --state-dir", path, addr, addr)
		}
		return nil, fmt.Errorf("temporal database %s is in use by another fleetlift server (one with the same --state-dir is running): stop it, or use another --state-dir", path)
	}
	if err != nil {
		return nil, fmt.Errorf("lock temporal database %s: %w", path, err)
	}
	return unlock, nil
}

// servedAt is the address the server holding the database at path
// serves at, as it wrote it in the lock file; "" when it did not.
func servedAt(path string) string {
	data, err := os.ReadFile(path + lockSuffix)
	if err != nil || len(data) > 256 {
		return ""
	}
	addr := strings.TrimSpace(string(data))
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return ""
	}
	return addr
}

// InUse reports whether a server (in this process or another) holds the
// database at path: an embedded server serves it.
func InUse(path string) bool {
	if _, err := os.Stat(path); err != nil {
		return false
	}
	unlock, err := lockFile(path + lockSuffix)
	if err != nil {
		return errors.Is(err, errLocked)
	}
	unlock()
	return false
}

// errLocked is lockFile's error when another holds the lock.
var errLocked = errors.New("locked by another process")

// prepareDatabase makes sure a database with Temporal's whole schema is
// at path. A missing one is built under a temporary name and renamed
// into place once complete, so that a first start killed at any moment
// leaves either no database or a whole one; leftovers of a killed build
// are removed first. An existing database is taken as it is. step, when
// set, is told each step of a build (tests kill the process there). The
// caller holds the database's lock (lockDatabase).
func prepareDatabase(path string, step func(string)) error {
	if err := removeLeftovers(path); err != nil {
		return err
	}
	switch _, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		if err := refuseOrphanLog(path); err != nil {
			return err
		}
		if err := build(path, step); err != nil {
			removeLeftovers(path)
			return fmt.Errorf("create temporal database %s: %w", path, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read temporal database %s: %w", path, err)
	}
	return nil
}

// removeLeftovers deletes what a build killed before its rename left
// beside path: the temporary database and its journal. Only the start
// holding the lock builds, so none of them is in use.
func removeLeftovers(path string) error {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+tmpInfix
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("read database directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s, left by a start that was killed: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	return nil
}

// refuseOrphanLog refuses to make a database at path while a write-ahead
// log of an earlier one lies there: SQLite would replay it into the new
// database, and it may be the only copy of the old one's last writes.
func refuseOrphanLog(path string) error {
	fi, err := os.Stat(path + walSuffix)
	if err != nil || fi.Size() == 0 {
		return nil
	}
	return fmt.Errorf("temporal database %s is missing but its write-ahead log %s is there: put the database back, or remove %s and %s to start with an empty database",
		path, path+walSuffix, path+walSuffix, path+shmSuffix)
}

// build makes Temporal's schema in a new file beside path, in one
// transaction with a rollback journal (no write-ahead log to carry
// over), syncs the file, renames it to path and syncs the directory.
// The empty log and the index of an earlier database at path, if any, go
// before the rename: SQLite would take them for the new one's.
func build(path string, step func(string)) error {
	report := func(name string) {
		if step != nil {
			step(name)
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tmpInfix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	if err := createSchema(tmp, report); err != nil {
		return err
	}
	report("schema committed")
	if err := syncFile(tmp); err != nil {
		return err
	}
	report("temporary file synced")
	for _, suffix := range []string{walSuffix, shmSuffix} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	report("renamed")
	if err := syncFile(filepath.Dir(path)); err != nil {
		return fmt.Errorf("sync its directory: %w", err)
	}
	report("directory synced")
	return nil
}

// createSchema runs Temporal's SQLite schema in the empty file path, in
// one transaction, on a connection of its own that it closes: Temporal's
// plugin keeps every database it opens open until the process ends, and
// this one is about to be renamed.
func createSchema(path string, report func(string)) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(delete)&_pragma=synchronous(full)")
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := sqliteschema.SetupSchemaOnDB(&schemaTx{tx: tx, report: report}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return db.Close()
}

// schemaTx runs Temporal's schema statements in a transaction. Of the
// admin interface, SetupSchemaOnDB uses only Exec; the embedded
// interface is nil, so any other method would fail loudly.
type schemaTx struct {
	sqlplugin.AdminDB
	tx     *sql.Tx
	n      int
	report func(string)
}

// Exec runs one schema statement.
func (s *schemaTx) Exec(stmt string, args ...any) error {
	if _, err := s.tx.Exec(stmt, args...); err != nil {
		return err
	}
	s.n++
	s.report(fmt.Sprintf("statement %d", s.n))
	return nil
}

// syncFile flushes a file or directory to disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
