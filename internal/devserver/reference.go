package devserver

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	sqliteschema "go.temporal.io/server/schema/sqlite"
)

// reference.json is the reference schema of the Temporal server linked in
// (referenceSchema), made once here instead of at every start, where
// making it runs the whole schema in a database in memory: what each
// statement makes, and each object's type and each table's columns, with
// the digest of the statements it was made from. A start whose linked
// schema has another digest makes the reference itself. go test -update
// rewrites the file.
//
//go:embed reference.json
var referenceJSON []byte

// schema.db.gz is a database holding the linked server's whole schema
// and nothing else, as buildTempSQL makes it (the statements, then
// writeVersions), gzipped, with the digest of the statements it was made
// from as the gzip comment. A first start writes it in place of running
// the statements: that took about 10 ms of CPU, for every `fleetlift
// run` with a new --state-dir and every test's server. The schema
// versions it records were made when the template was (go test -update
// rewrites it with reference.json).
//
//go:embed schema.db.gz
var schemaTemplate []byte

// maxTemplateBytes bounds the template's size once unzipped.
const maxTemplateBytes = 16 << 20

// schemaTemplateFor is the template database, when it was made from the
// linked server's statements.
func schemaTemplateFor() ([]byte, bool) {
	_, digest, err := schemaStatements()
	if err != nil {
		return nil, false
	}
	return storedTemplate(digest)
}

// storedTemplate is the template database of schema.db.gz, if it was
// made from statements whose digest is digest.
func storedTemplate(digest string) ([]byte, bool) {
	zr, err := gzip.NewReader(bytes.NewReader(schemaTemplate))
	if err != nil || zr.Comment != digest {
		return nil, false
	}
	data, err := io.ReadAll(io.LimitReader(zr, maxTemplateBytes+1))
	if err != nil || len(data) > maxTemplateBytes || len(data) == 0 {
		return nil, false
	}
	return data, true
}

// referenceFile is reference.json's form.
type referenceFile struct {
	Digest  string              `json:"digest"`
	Creates [][]string          `json:"creates"`
	Objects map[string]string   `json:"objects"`
	Columns map[string][]string `json:"columns"`
}

// schemaStatements are the statements of the linked Temporal server's
// SQLite schema, as SetupSchemaOnDB hands them out, and their digest.
func schemaStatements() ([]string, string, error) {
	var r statementRecorder
	if err := sqliteschema.SetupSchemaOnDB(&r); err != nil {
		return nil, "", fmt.Errorf("read the schema's statements: %w", err)
	}
	h := sha256.New()
	for _, s := range r.statements {
		fmt.Fprintf(h, "%d:%s\n", len(s), s)
	}
	return r.statements, hex.EncodeToString(h.Sum(nil)), nil
}

// statementRecorder records the statements SetupSchemaOnDB runs, running
// none. Of the admin interface, SetupSchemaOnDB uses only Exec.
type statementRecorder struct {
	sqlplugin.AdminDB
	statements []string
}

func (r *statementRecorder) Exec(stmt string, _ ...any) error {
	r.statements = append(r.statements, stmt)
	return nil
}

// storedReference is the reference of reference.json, if it was made
// from statements whose digest is digest.
func storedReference(statements []string, digest string) (reference, bool) {
	var f referenceFile
	if err := json.Unmarshal(referenceJSON, &f); err != nil || f.Digest != digest || len(f.Creates) != len(statements) {
		return reference{}, false
	}
	ref := reference{schema: schema{objects: f.Objects, columns: map[string]map[string]bool{}}}
	for table, cols := range f.Columns {
		set := map[string]bool{}
		for _, c := range cols {
			set[c] = true
		}
		ref.columns[table] = set
	}
	for i, s := range statements {
		ref.statements = append(ref.statements, statement{sql: s, creates: f.Creates[i]})
	}
	return ref, true
}
