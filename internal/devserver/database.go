package devserver

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	// The SQLite driver Temporal's plugin registers; fleetlift opens the
	// database with it directly to build, check and complete it.
	_ "modernc.org/sqlite"
)

// The database's companions in its directory: SQLite's write-ahead log
// and its index, the lock that makes starts take turns, and the prefix
// of a database being built.
const (
	walSuffix  = "-wal"
	shmSuffix  = "-shm"
	lockSuffix = ".lock"
	tmpInfix   = ".tmp-"
)

// lockWait bounds how long a start waits for another one preparing the
// same database.
const lockWait = 30 * time.Second

// runTables are the tables whose rows are the runs a database must never
// lose, and whether each keeps the namespace ID as text (or as 16 bytes).
var runTables = []struct {
	name     string
	textNSID bool
}{{"executions", false}, {"current_executions", false}, {"executions_visibility", true}}

// prepared says what prepareDatabase found and did.
type prepared struct {
	// fresh: the database was made by this start.
	fresh bool
	// repairs say what was put right in an existing database.
	repairs []string
}

// prepareDatabase makes sure path holds a database with the whole of
// Temporal's SQLite schema before the server opens it. A missing one is
// built under a temporary name and renamed into place once complete, so
// that a start killed at any moment leaves either no database or a
// whole one. An existing one is checked: one that a start of an earlier
// fleetlift left unfinished, holding no runs, is completed in place; one
// missing part of its schema while holding runs is refused, never
// deleted.
// Leftovers of a killed build are removed first. step, when set, is told
// each step of a build (tests kill the process there). The caller holds
// the database's lock (lockDatabase).
func prepareDatabase(path string, step func(string)) (prepared, error) {
	if err := removeLeftovers(path); err != nil {
		return prepared{}, err
	}
	switch _, err := os.Stat(path); {
	case errors.Is(err, fs.ErrNotExist):
		if err := refuseOrphanLog(path); err != nil {
			return prepared{}, err
		}
		return prepared{fresh: true}, build(path, step)
	case err != nil:
		return prepared{}, fmt.Errorf("read temporal database %s: %w", path, err)
	}
	return check(path)
}

// lockDatabase makes the database's directory and takes the lock that
// makes starts sharing the database take turns to prepare it.
func lockDatabase(path string) (unlock func(), err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create database directory %s: %w", dir, err)
	}
	unlock, err = lockFile(path+lockSuffix, lockWait)
	if err != nil {
		return nil, fmt.Errorf("lock temporal database %s: %w (is another fleetlift starting with the same --state-dir?)", path, err)
	}
	return unlock, nil
}

// removeLeftovers deletes what a build killed before its rename left
// beside path: the temporary database and its journal or log. Only a
// start holding the lock builds, so none of them is in use.
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

// build makes a database with the whole schema at path: in a temporary
// file beside it (buildTemp), which is then put in place (install).
func build(path string, step func(string)) (err error) {
	report := func(name string) {
		if step != nil {
			step(name)
		}
	}
	defer func() {
		if err != nil {
			removeLeftovers(path)
		}
	}()
	tmp, err := buildTemp(path, report)
	if err != nil {
		return fmt.Errorf("create temporal database %s: %w", path, err)
	}
	if err := install(tmp, path, report); err != nil {
		return fmt.Errorf("create temporal database %s: %w", path, err)
	}
	return nil
}

// buildTemp makes the schema in a new temporary file beside path, closes
// it and syncs it; it returns the file's name. The file is the schema
// template when it was made from the linked server's statements
// (schemaTemplateFor), else the statements run in it (buildTempSQL).
func buildTemp(path string, report func(string)) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tmpInfix+"*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	data, ok := schemaTemplateFor()
	if !ok {
		f.Close()
		if err := buildTempSQL(tmp, report); err != nil {
			return "", err
		}
		return tmp, nil
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	report("schema template written")
	if err := syncFile(tmp); err != nil {
		return "", err
	}
	report("temporary file synced")
	return tmp, nil
}

// buildTempSQL makes the schema in the empty file tmp by running its
// statements in one transaction, with a rollback journal (no write-ahead
// log to carry over), closes it and syncs it.
func buildTempSQL(tmp string, report func(string)) error {
	db, err := openDatabase(tmp, "journal_mode(delete)", "synchronous(full)")
	if err != nil {
		return err
	}
	statement := func(_ *sql.Tx, n int, stmt string) error {
		report(fmt.Sprintf("statement %d: %s", n, summary(stmt)))
		return nil
	}
	if err := createSchema(db, statement, writeVersions); err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	report("schema committed")
	for _, suffix := range []string{"-journal", walSuffix, shmSuffix} {
		if _, err := os.Stat(tmp + suffix); err == nil {
			return fmt.Errorf("%s is still there after closing the database", tmp+suffix)
		}
	}
	if err := syncFile(tmp); err != nil {
		return err
	}
	report("temporary file synced")
	return nil
}

// install renames the complete database tmp to path and syncs the
// directory. The empty log and the index of an earlier database at path,
// if any, go first: SQLite would take them for the new one's.
func install(tmp, path string, report func(string)) error {
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

// openDatabase opens the SQLite file path with one connection, setting
// the pragmas given as name(value).
func openDatabase(path string, pragmas ...string) (*sql.DB, error) {
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)"
	for _, p := range pragmas {
		dsn += "&_pragma=" + p
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
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

// check inspects the existing database at path: complete ones get their
// schema versions recorded; unfinished ones without runs are completed;
// the rest are refused with what they lack.
func check(path string) (prepared, error) {
	want, err := referenceSchema()
	if err != nil {
		return prepared{}, err
	}
	db, err := openDatabase(path)
	if err != nil {
		return prepared{}, fmt.Errorf("open temporal database %s: %w", path, err)
	}
	defer db.Close()
	got, err := readSchema(db)
	if err != nil {
		return prepared{}, fmt.Errorf("read temporal database %s: %w: if it is not the database of fleetlift's embedded server, move it aside", path, err)
	}
	versions, err := readVersions(db, got)
	if err != nil {
		return prepared{}, fmt.Errorf("read temporal database %s: %w", path, err)
	}
	if err := refuseNewer(path, versions); err != nil {
		return prepared{}, err
	}
	if missing := want.missingFrom(got); len(missing) > 0 {
		return completeUnfinished(db, path, want, got, missing, versions)
	}
	if err := refuseRunsWithoutNamespace(db, path, got); err != nil {
		return prepared{}, err
	}
	return prepared{}, stampVersions(db, path, versions)
}

// refuseRunsWithoutNamespace refuses a database that holds runs but not
// fleetlift's namespace: a namespace made anew would have another ID, and
// the runs would be out of reach. A killed start leaves the namespace
// missing only before any run.
func refuseRunsWithoutNamespace(db *sql.DB, path string, got schema) error {
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM namespaces WHERE name = ?`, Namespace).Scan(&n); err != nil {
		return fmt.Errorf("read temporal database %s: look for namespace %s: %w", path, Namespace, err)
	}
	if n > 0 {
		return nil
	}
	runs, err := holdsRuns(db, got)
	if err != nil {
		return fmt.Errorf("read temporal database %s: %w", path, err)
	}
	if runs {
		return fmt.Errorf("temporal database %s holds runs but not their namespace %s, so fleetlift leaves it alone: restore it from a backup, or move it aside with its %s and %s files to start with an empty database (its runs are then lost)",
			path, Namespace, walSuffix, shmSuffix)
	}
	return nil
}

// completeUnfinished completes, in one transaction, a database that
// lacks part of its schema and holds no runs of fleetlift's: a start of
// an earlier fleetlift, killed while it made the schema in place
// statement by statement, left it so (and the next starts may have run
// the server on it). It runs the schema's statements that made what is
// missing, in place, so that a connection open on the file sees them. A
// database that holds runs, or lacks columns of tables it has (another
// Temporal schema made it), is refused.
func completeUnfinished(db *sql.DB, path string, want reference, got schema, missing []missingPart, versions map[string]string) (prepared, error) {
	runs, err := holdsRuns(db, got)
	if err != nil {
		return prepared{}, fmt.Errorf("read temporal database %s: %w", path, err)
	}
	made := ""
	if v, ok := versions[mainSchemaName]; ok && v != sqliteschema.Version {
		made = fmt.Sprintf(" (it was made with Temporal schema %s; this fleetlift's is %s)", v, sqliteschema.Version)
	}
	if runs {
		return prepared{}, fmt.Errorf("temporal database %s lacks %s%s and holds runs, so fleetlift leaves it alone: "+
			"restore it from a backup, or move it aside with its %s and %s files to start with an empty database (its runs are then lost)",
			path, describeMissing(missing), made, walSuffix, shmSuffix)
	}
	if err := want.complete(db, got); err != nil {
		return prepared{}, fmt.Errorf("temporal database %s lacks %s%s and cannot be completed (%w): it holds no runs of fleetlift's; "+
			"move it aside with its %s and %s files to start with an empty database", path, describeMissing(missing), made, err, walSuffix, shmSuffix)
	}
	return prepared{repairs: []string{fmt.Sprintf("%s: lacked %s and held no runs of fleetlift's (a start killed while making it): completed it", path, describeMissing(missing))}}, nil
}

// holdsRuns reports whether any table of runs that the database has
// holds a run outside Temporal's system namespace, whose own workflows
// the server starts on its first start.
func holdsRuns(db *sql.DB, got schema) (bool, error) {
	for _, t := range runTables {
		if got.objects[t.name] != "table" {
			continue
		}
		var system any = []byte(primitives.MustParseUUID(primitives.SystemNamespaceID))
		if t.textNSID {
			system = primitives.SystemNamespaceID
		}
		var n int
		if err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM "`+t.name+`" WHERE namespace_id != ?)`, system).Scan(&n); err != nil {
			return false, fmt.Errorf("look for runs in table %s: %w", t.name, err)
		}
		if n != 0 {
			return true, nil
		}
	}
	return false, nil
}
