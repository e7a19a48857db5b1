package devserver

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite reference.json")

// reference.json is the reference schema the linked Temporal server's
// statements make, as a start would make it: starts that take it check
// databases as those that make it do.
func TestStoredReferenceIsTheLinkedSchema(t *testing.T) {
	statements, digest, err := schemaStatements()
	if err != nil {
		t.Fatal(err)
	}
	made, err := makeReference()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		f := referenceFile{Digest: digest, Objects: made.objects, Columns: map[string][]string{}}
		for _, st := range made.statements {
			f.Creates = append(f.Creates, st.creates)
		}
		for table, cols := range made.columns {
			f.Columns[table] = slices.Sorted(maps.Keys(cols))
		}
		data, err := json.MarshalIndent(f, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("reference.json", append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		referenceJSON = data
	}
	stored, ok := storedReference(statements, digest)
	if !ok {
		t.Fatal("reference.json was made from other statements than the linked server's: go test -update ./internal/devserver rewrites it")
	}
	if !reflect.DeepEqual(stored.objects, made.objects) || !reflect.DeepEqual(stored.columns, made.columns) || len(stored.statements) != len(made.statements) {
		t.Fatal("reference.json differs from the reference the linked schema makes: go test -update ./internal/devserver rewrites it")
	}
	for i := range made.statements {
		if stored.statements[i].sql != made.statements[i].sql || !slices.Equal(stored.statements[i].creates, made.statements[i].creates) {
			t.Fatalf("statement %d: stored %+v, made %+v", i, stored.statements[i], made.statements[i])
		}
	}
	// A schema of other statements is made, not taken from the file.
	if _, ok := storedReference(statements[1:], digest+"0"); ok {
		t.Error("a reference was taken for statements it was not made from")
	}
}

// schema.db.gz is the database buildTempSQL makes from the linked
// server's statements: the same objects, columns and schema versions.
// A first start writes it, and a template of other statements is not
// taken.
func TestStoredTemplateIsTheLinkedSchema(t *testing.T) {
	_, digest, err := schemaStatements()
	if err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(t.TempDir(), "made.db")
	if err := os.WriteFile(made, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := buildTempSQL(made, func(string) {}); err != nil {
		t.Fatal(err)
	}
	if *update {
		data, err := os.ReadFile(made)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Comment = digest
		if _, err := zw.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("schema.db.gz", buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		schemaTemplate = buf.Bytes()
	}
	data, ok := storedTemplate(digest)
	if !ok {
		t.Fatal("schema.db.gz was made from other statements than the linked server's: go test -update ./internal/devserver rewrites it")
	}
	stored := filepath.Join(t.TempDir(), "stored.db")
	if err := os.WriteFile(stored, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want, wantVersions := schemaAndVersions(t, made)
	got, gotVersions := schemaAndVersions(t, stored)
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotVersions, wantVersions) {
		t.Fatalf("schema.db.gz differs from the database the linked schema makes: go test -update ./internal/devserver rewrites it\nstored: %v %v\nmade:   %v %v", got, gotVersions, want, wantVersions)
	}
	if _, ok := storedTemplate(digest + "0"); ok {
		t.Error("a template was taken for statements it was not made from")
	}
	if built, ok := schemaTemplateFor(); !ok || !bytes.Equal(built, data) {
		t.Error("a first start does not write the template")
	}
}

// schemaAndVersions are the schema and schema versions of the database
// at path.
func schemaAndVersions(t *testing.T, path string) (schema, map[string]string) {
	t.Helper()
	db, err := openDatabase(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := readSchema(db)
	if err != nil {
		t.Fatal(err)
	}
	v, err := readVersions(db, s)
	if err != nil {
		t.Fatal(err)
	}
	return s, v
}
