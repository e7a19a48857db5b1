package devserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"

	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

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

// reference is the schema of the Temporal server linked in, and the
// statements that make it, each with the objects it makes.
type reference struct {
	schema
	statements []statement
}

// statement is one statement of the schema and the objects it makes
// (none: it writes an initial row).
type statement struct {
	sql     string
	creates []string
}

// referenceSchema is the schema of the Temporal server linked in: the one
// stored in reference.json when it was made from the same statements,
// otherwise made (makeReference).
func referenceSchema() (reference, error) {
	statements, digest, err := schemaStatements()
	if err != nil {
		return reference{}, err
	}
	if ref, ok := storedReference(statements, digest); ok {
		return ref, nil
	}
	return makeReference()
}

// makeReference makes the schema of the Temporal server linked in, in
// an in-memory database, and reads it back. It leaves out the
// schema_version table: earlier fleetlifts made none.
func makeReference() (reference, error) {
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		return reference{}, fmt.Errorf("make the reference schema: %w", err)
	}
	defer db.Close()
	// One connection: each would have its own in-memory database.
	db.SetMaxOpenConns(1)
	var ref reference
	known := map[string]bool{}
	record := func(tx *sql.Tx, _ int, stmt string) error {
		names, err := objectNames(tx)
		if err != nil {
			return err
		}
		st := statement{sql: stmt}
		for _, n := range names {
			if !known[n] {
				known[n] = true
				st.creates = append(st.creates, n)
			}
		}
		ref.statements = append(ref.statements, st)
		return nil
	}
	if err := createSchema(db, record, nil); err != nil {
		return reference{}, fmt.Errorf("make the reference schema: %w", err)
	}
	if ref.schema, err = readSchema(db); err != nil {
		return reference{}, fmt.Errorf("make the reference schema: %w", err)
	}
	return ref, nil
}

// complete runs, in one transaction, the statements that make what got
// lacks, and records the schema versions. A statement that writes an
// initial row runs too, keeping a row already there. An object only
// partly there, or a column missing from a table that is there, cannot
// be completed.
func (r reference) complete(db *sql.DB, got schema) error {
	for _, m := range r.missingFrom(got) {
		if m.kind == "column" {
			return fmt.Errorf("fleetlift adds no column to a table that is there")
		}
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, st := range r.statements {
		if err := completeWith(tx, st, got); err != nil {
			return err
		}
	}
	if err := writeVersions(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// completeWith runs st unless all it makes is there.
func completeWith(tx *sql.Tx, st statement, got schema) error {
	present := 0
	for _, n := range st.creates {
		if got.objects[n] != "" {
			present++
		}
	}
	switch {
	case len(st.creates) == 0:
		_, err := tx.Exec(st.sql)
		var e *sqlite.Error
		if errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT {
			return nil // the row is there
		}
		if err != nil {
			return fmt.Errorf("%s: %w", summary(st.sql), err)
		}
	case present == len(st.creates):
	case present > 0:
		return fmt.Errorf("%s: only part of what it makes is there", summary(st.sql))
	default:
		if _, err := tx.Exec(st.sql); err != nil {
			return fmt.Errorf("%s: %w", summary(st.sql), err)
		}
	}
	return nil
}

// querier is a connection or a transaction.
type querier interface {
	Query(query string, args ...any) (*sql.Rows, error)
}

// objectNames lists the names in a database's catalogue, but SQLite's
// own.
func objectNames(db querier) ([]string, error) {
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE name NOT LIKE 'sqlite\_%' ESCAPE '\' ORDER BY rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
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
