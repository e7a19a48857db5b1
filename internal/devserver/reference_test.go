package devserver

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
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
