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

	"go.temporal.io/server/common/persistence/sql/sqlplugin"
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

// The names under which the database records the Temporal schema
// versions it holds, in the layout of Temporal's schema_version table.
const (
	mainSchemaName       = "temporal"
	visibilitySchemaName = "temporal_visibility"
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

// buildTemp makes the schema in a new temporary file beside path, in
// one transaction, with a rollback journal (no write-ahead log to carry
// over), closes it and syncs it; it returns the file's name.
func buildTemp(path string, report func(string)) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tmpInfix+"*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	f.Close()
	db, err := openDatabase(tmp, "journal_mode(delete)", "synchronous(full)")
	if err != nil {
		return "", err
	}
	statement := func(_ *sql.Tx, n int, stmt string) error {
		report(fmt.Sprintf("statement %d: %s", n, summary(stmt)))
		return nil
	}
	if err := createSchema(db, statement, writeVersions); err != nil {
		db.Close()
		return "", err
	}
	if err := db.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", tmp, err)
	}
	report("schema committed")
	for _, suffix := range []string{"-journal", walSuffix, shmSuffix} {
		if _, err := os.Stat(tmp + suffix); err == nil {
			return "", fmt.Errorf("%s is still there after closing the database", tmp+suffix)
		}
	}
	if err := syncFile(tmp); err != nil {
		return "", err
	}
	report("temporary file synced")
	return tmp, nil
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

// createSchema runs Temporal's SQLite schema and then, when set, then,
// all in one transaction. after, when set, is called after each
// statement of the schema with the transaction, the statement's number
// (from 1) and its text.
func createSchema(db *sql.DB, after func(tx *sql.Tx, n int, stmt string) error, then func(execer) error) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := sqliteschema.SetupSchemaOnDB(&schemaTx{tx: tx, after: after}); err != nil {
		return err
	}
	if then != nil {
		if err := then(tx); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// schemaTx runs Temporal's schema statements in a transaction of
// fleetlift's own connection, not one from Temporal's connection pool,
// which keeps every database it opens open until the process ends. Of
// the admin interface, SetupSchemaOnDB uses only Exec; the embedded
// interface is nil, so any other method would fail loudly.
type schemaTx struct {
	sqlplugin.AdminDB
	tx    *sql.Tx
	n     int
	after func(tx *sql.Tx, n int, stmt string) error
}

// Exec runs one schema statement.
func (s *schemaTx) Exec(stmt string, args ...any) error {
	if _, err := s.tx.Exec(stmt, args...); err != nil {
		return err
	}
	s.n++
	if s.after != nil {
		return s.after(s.tx, s.n, stmt)
	}
	return nil
}

// summary is the start of a statement, such as "CREATE TABLE namespaces".
func summary(stmt string) string {
	var lines []string
	for _, l := range strings.Split(stmt, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			lines = append(lines, l)
		}
	}
	head, _, _ := strings.Cut(strings.Join(strings.Fields(strings.Join(lines, " ")), " "), "(")
	if head = strings.TrimSpace(head); len(head) > 60 {
		head = head[:60]
	}
	return head
}

// The schema_version table as Temporal's SQL tools make it.
const (
	createVersionTable = `CREATE TABLE IF NOT EXISTS schema_version(version_partition INT not null, db_name VARCHAR(255) not null, ` +
		`creation_time DATETIME(6), curr_version VARCHAR(64), min_compatible_version VARCHAR(64), PRIMARY KEY (version_partition, db_name))`
	writeVersion = `REPLACE INTO schema_version(version_partition, db_name, creation_time, curr_version, min_compatible_version) VALUES (0, ?, ?, ?, ?)`
)

// wantVersions are the schema versions of the Temporal server linked in.
func wantVersions() map[string]string {
	return map[string]string{mainSchemaName: sqliteschema.Version, visibilitySchemaName: sqliteschema.VisibilityVersion}
}

// execer is a connection or a transaction.
type execer interface {
	Exec(query string, args ...any) (sql.Result, error)
}

// writeVersions records the linked server's schema versions. Temporal's
// SQLite schema records none of its own.
func writeVersions(db execer) error {
	if _, err := db.Exec(createVersionTable); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for name, v := range wantVersions() {
		if _, err := db.Exec(writeVersion, name, now, v, v); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
	}
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

// readVersions reads the schema versions the database records, if any.
func readVersions(db *sql.DB, got schema) (map[string]string, error) {
	versions := map[string]string{}
	if got.objects["schema_version"] != "table" {
		return versions, nil
	}
	rows, err := db.Query(`SELECT db_name, curr_version FROM schema_version WHERE version_partition = 0`)
	if err != nil {
		return nil, fmt.Errorf("read schema versions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, v string
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("read schema versions: %w", err)
		}
		versions[name] = v
	}
	return versions, rows.Err()
}

// refuseNewer refuses a database a newer Temporal schema made: this
// fleetlift's server would not know what its schema means.
func refuseNewer(path string, versions map[string]string) error {
	for name, want := range wantVersions() {
		if got, ok := versions[name]; ok && newerVersion(got, want) {
			return fmt.Errorf("temporal database %s holds Temporal schema %s %s, newer than the %s this fleetlift knows: run it with the fleetlift that made it, or a newer one",
				path, name, got, want)
		}
	}
	return nil
}

// stampVersions records the linked server's schema versions in a
// complete database that records none or older ones (an earlier
// fleetlift made it), so that a later one knows what it holds.
func stampVersions(db *sql.DB, path string, versions map[string]string) error {
	stale := false
	for name, want := range wantVersions() {
		if versions[name] != want {
			stale = true
		}
	}
	if !stale {
		return nil
	}
	if err := writeVersions(db); err != nil {
		return fmt.Errorf("temporal database %s: %w", path, err)
	}
	return nil
}

// newerVersion reports whether version a (such as "0.11") is newer than
// b. Parts that are not numbers compare as text.
func newerVersion(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		if pa[i] == pb[i] {
			continue
		}
		var na, nb int
		if _, errA := fmt.Sscanf(pa[i], "%d", &na); errA == nil {
			if _, errB := fmt.Sscanf(pb[i], "%d", &nb); errB == nil {
				return na > nb
			}
		}
		return pa[i] > pb[i]
	}
	return len(pa) > len(pb)
}
