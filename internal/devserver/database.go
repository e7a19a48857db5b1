package devserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	// The SQLite driver Temporal's plugin registers; fleetlift opens the
	// database with it directly to build, check and stamp it.
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

// runTables are the tables that hold what a database must never lose:
// workflow runs, their histories and their visibility records.
var runTables = []string{"executions", "current_executions", "history_tree", "history_node", "executions_visibility"}

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
// fleetlift left unfinished, holding no runs, is built anew; one missing
// part of its schema while holding runs is refused, never deleted.
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
	return check(path, step)
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
// file beside it, in one transaction, with a rollback journal (no
// write-ahead log to carry over); then synced, renamed over path (whose
// own log and index, of a database being replaced, go first), and the
// directory synced.
func build(path string, step func(string)) (err error) {
	report := func(name string) {
		if step != nil {
			step(name)
		}
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+tmpInfix+"*")
	if err != nil {
		return fmt.Errorf("create temporal database %s: %w", path, err)
	}
	tmp := f.Name()
	f.Close()
	defer func() {
		if err != nil {
			removeLeftovers(path)
		}
	}()
	db, err := openDatabase(tmp, "journal_mode(delete)", "synchronous(full)")
	if err != nil {
		return fmt.Errorf("create temporal database %s: %w", path, err)
	}
	if err := createSchema(db, report, writeVersions); err != nil {
		db.Close()
		return fmt.Errorf("create temporal database %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("create temporal database %s: close %s: %w", path, tmp, err)
	}
	report("schema committed")
	for _, suffix := range []string{"-journal", walSuffix, shmSuffix} {
		if _, err := os.Stat(tmp + suffix); err == nil {
			return fmt.Errorf("create temporal database %s: %s is still there after closing the database", path, tmp+suffix)
		}
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("create temporal database %s: %w", path, err)
	}
	report("temporary file synced")
	for _, suffix := range []string{walSuffix, shmSuffix} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("create temporal database %s: remove %s: %w", path, path+suffix, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("create temporal database %s: %w", path, err)
	}
	report("renamed")
	if err := syncFile(dir); err != nil {
		return fmt.Errorf("create temporal database %s: sync its directory: %w", path, err)
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
// all in one transaction. step, when set, is told "statement N: CREATE
// TABLE name" after each statement of the schema.
func createSchema(db *sql.DB, step func(string), then func(execer) error) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := sqliteschema.SetupSchemaOnDB(&schemaTx{tx: tx, step: step}); err != nil {
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
	tx   *sql.Tx
	n    int
	step func(string)
}

// Exec runs one schema statement.
func (s *schemaTx) Exec(stmt string, args ...any) error {
	if _, err := s.tx.Exec(stmt, args...); err != nil {
		return err
	}
	s.n++
	if s.step != nil {
		s.step(fmt.Sprintf("statement %d: %s", s.n, summary(stmt)))
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
// schema versions recorded; unfinished ones without runs are built anew;
// the rest are refused with what they lack.
func check(path string, step func(string)) (prepared, error) {
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
		return rebuildUnfinished(db, path, got, missing, versions, step)
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

// rebuildUnfinished builds anew a database that lacks part of its schema
// and holds no runs: a start of an earlier fleetlift, killed while it
// made the schema in place, left it so. One that holds runs is refused.
func rebuildUnfinished(db *sql.DB, path string, got schema, missing []missingPart, versions map[string]string, step func(string)) (prepared, error) {
	runs, err := holdsRuns(db, got)
	if err != nil {
		return prepared{}, fmt.Errorf("read temporal database %s: %w", path, err)
	}
	if runs {
		made := ""
		if v, ok := versions[mainSchemaName]; ok && v != sqliteschema.Version {
			made = fmt.Sprintf(" (it was made with Temporal schema %s; this fleetlift's is %s)", v, sqliteschema.Version)
		}
		return prepared{}, fmt.Errorf("temporal database %s lacks %s%s and holds runs, so fleetlift leaves it alone: "+
			"restore it from a backup, or move it aside with its %s and %s files to start with an empty database (its runs are then lost)",
			path, describeMissing(missing), made, walSuffix, shmSuffix)
	}
	if err := db.Close(); err != nil {
		return prepared{}, fmt.Errorf("close temporal database %s: %w", path, err)
	}
	if err := build(path, step); err != nil {
		return prepared{}, err
	}
	return prepared{repairs: []string{fmt.Sprintf("%s: lacked %s and held no runs (a start killed while making it): made it anew", path, describeMissing(missing))}}, nil
}

// holdsRuns reports whether any table of runs that the database has
// holds a row.
func holdsRuns(db *sql.DB, got schema) (bool, error) {
	for _, t := range runTables {
		if got.objects[t] != "table" {
			continue
		}
		var n int
		if err := db.QueryRow(`SELECT EXISTS (SELECT 1 FROM "` + t + `")`).Scan(&n); err != nil {
			return false, fmt.Errorf("look for runs in table %s: %w", t, err)
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

// schema is what a database's catalogue holds: each object's type by
// name, and each table's columns.
type schema struct {
	objects map[string]string
	columns map[string]map[string]bool
}

// missingPart is an object or a column the database lacks.
type missingPart struct {
	kind string // table, index, trigger, view, column
	name string // for a column, table.column
}

// referenceSchema is the schema of the Temporal server linked in, read
// back from an in-memory database it was made in. It leaves out the
// schema_version table: earlier fleetlifts made none.
func referenceSchema() (schema, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return schema{}, fmt.Errorf("make the reference schema: %w", err)
	}
	defer db.Close()
	// One connection: each would have its own in-memory database.
	db.SetMaxOpenConns(1)
	if err := createSchema(db, nil, nil); err != nil {
		return schema{}, fmt.Errorf("make the reference schema: %w", err)
	}
	s, err := readSchema(db)
	if err != nil {
		return schema{}, fmt.Errorf("make the reference schema: %w", err)
	}
	return s, nil
}

// readSchema reads a database's catalogue.
func readSchema(db *sql.DB) (schema, error) {
	s := schema{objects: map[string]string{}, columns: map[string]map[string]bool{}}
	rows, err := db.QueryContext(context.Background(), `SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\'`)
	if err != nil {
		return s, err
	}
	for rows.Next() {
		var typ, name string
		if err := rows.Scan(&typ, &name); err != nil {
			rows.Close()
			return s, err
		}
		s.objects[name] = typ
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, err
	}
	for name, typ := range s.objects {
		if typ != "table" {
			continue
		}
		cols, err := readColumns(db, name)
		if err != nil {
			return s, err
		}
		s.columns[name] = cols
	}
	return s, nil
}

// readColumns reads the names of a table's columns.
func readColumns(db *sql.DB, table string) (map[string]bool, error) {
	rows, err := db.Query(`SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", table, err)
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("read the columns of %s: %w", table, err)
		}
		cols[c] = true
	}
	return cols, rows.Err()
}

// missingFrom lists what of s the database got lacks: objects by name and
// type, and columns of the tables it has. Extra objects and columns are
// not counted.
func (s schema) missingFrom(got schema) []missingPart {
	var missing []missingPart
	for name, typ := range s.objects {
		if got.objects[name] != typ {
			missing = append(missing, missingPart{kind: typ, name: name})
			continue
		}
		for c := range s.columns[name] {
			if !got.columns[name][c] {
				missing = append(missing, missingPart{kind: "column", name: name + "." + c})
			}
		}
	}
	order := map[string]int{"table": 0, "view": 1, "column": 2, "index": 3, "trigger": 4}
	sort.Slice(missing, func(i, j int) bool {
		if missing[i].kind != missing[j].kind {
			return order[missing[i].kind] < order[missing[j].kind]
		}
		return missing[i].name < missing[j].name
	})
	return missing
}

// describeMissing names the first missing tables and columns (sorted
// first), and counts the rest: indexes and triggers go with their tables.
func describeMissing(missing []missingPart) string {
	const shown = 6
	var named []string
	others := 0
	for _, m := range missing {
		if len(named) < shown && m.kind != "index" && m.kind != "trigger" {
			named = append(named, m.kind+" "+m.name)
			continue
		}
		others++
	}
	if others > 0 {
		named = append(named, fmt.Sprintf("%d more tables, columns, indexes or triggers", others))
	}
	return strings.Join(named, ", ")
}
