package devserver

import (
	"reflect"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
)

func TestMissingFrom(t *testing.T) {
	want := schema{
		objects: map[string]string{"runs": "table", "runs_by_id": "index", "runs_ai": "trigger", "names": "table"},
		columns: map[string]map[string]bool{"runs": {"id": true, "data": true}, "names": {"name": true}},
	}
	for _, tc := range []struct {
		name     string
		got      schema
		missing  []missingPart
		describe string
	}{
		{"no change", want, nil, ""},
		{"extra objects and columns", schema{
			objects: map[string]string{"runs": "table", "runs_by_id": "index", "runs_ai": "trigger", "names": "table", "schema_version": "table"},
			columns: map[string]map[string]bool{"runs": {"id": true, "data": true, "more": true}, "names": {"name": true}},
		}, nil, ""},
		{"table removed, with its index and trigger", schema{
			objects: map[string]string{"names": "table"},
			columns: map[string]map[string]bool{"names": {"name": true}},
		}, []missingPart{{"table", "runs"}, {"index", "runs_by_id"}, {"trigger", "runs_ai"}}, "table runs, 2 more tables, columns, indexes or triggers"},
		{"column removed", schema{
			objects: map[string]string{"runs": "table", "runs_by_id": "index", "runs_ai": "trigger", "names": "table"},
			columns: map[string]map[string]bool{"runs": {"id": true}, "names": {"name": true}},
		}, []missingPart{{"column", "runs.data"}}, "column runs.data"},
		{"a view where a table belongs", schema{
			objects: map[string]string{"runs": "table", "runs_by_id": "index", "runs_ai": "trigger", "names": "view"},
			columns: map[string]map[string]bool{"runs": {"id": true, "data": true}},
		}, []missingPart{{"table", "names"}}, "table names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := want.missingFrom(tc.got)
			if !reflect.DeepEqual(got, tc.missing) {
				t.Errorf("missing %v, want %v", got, tc.missing)
			}
			if d := describeMissing(got); d != tc.describe {
				t.Errorf("described %q, want %q", d, tc.describe)
			}
		})
	}
}

func TestNewerVersion(t *testing.T) {
	for _, tc := range []struct {
		a, b  string
		newer bool
	}{
		{"0.11", "0.11", false},
		{"0.11", "0.9", true},
		{"0.9", "0.11", false},
		{"1.0", "0.11", true},
		{"0.11.1", "0.11", true},
		{"0.11", "0.11.1", false},
	} {
		if got := newerVersion(tc.a, tc.b); got != tc.newer {
			t.Errorf("newerVersion(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.newer)
		}
	}
}

func TestAssignColumns(t *testing.T) {
	keyword, integer := enumspb.INDEXED_VALUE_TYPE_KEYWORD, enumspb.INDEXED_VALUE_TYPE_INT
	for _, tc := range []struct {
		name    string
		aliases map[string]string
		attrs   map[string]enumspb.IndexedValueType
		want    map[string]string
		added   []string
		err     bool
	}{
		{"no change", map[string]string{"Keyword01": "A"}, map[string]enumspb.IndexedValueType{"A": keyword},
			map[string]string{"Keyword01": "A"}, nil, false},
		{"added on the first free columns of their types", map[string]string{"Keyword01": "A"},
			map[string]enumspb.IndexedValueType{"A": keyword, "B": keyword, "N": integer},
			map[string]string{"Keyword01": "A", "Keyword02": "B", "Int01": "N"}, []string{"B", "N"}, false},
		{"others' attributes kept", map[string]string{"Keyword01": "Theirs"}, map[string]enumspb.IndexedValueType{"A": keyword},
			map[string]string{"Keyword01": "Theirs", "Keyword02": "A"}, []string{"A"}, false},
		{"there with another type", map[string]string{"Int01": "A"}, map[string]enumspb.IndexedValueType{"A": keyword},
			nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			added, err := assignColumns(tc.aliases, tc.attrs)
			if tc.err {
				if err == nil {
					t.Fatalf("no error; aliases %v", tc.aliases)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(tc.aliases, tc.want) || !reflect.DeepEqual(added, tc.added) {
				t.Errorf("aliases %v, added %v; want %v, %v", tc.aliases, added, tc.want, tc.added)
			}
		})
	}
}
