package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/fleetlift/fleetlift/schemas"
)

// TestEveryPropertyDescribed: every property the generated schemas
// declare has a description, which editors show on hover; it comes from
// the field's doc comment in fleetlift.cue.
func TestEveryPropertyDescribed(t *testing.T) {
	src, err := schemas.FS.ReadFile(schemas.CUEFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := newConverter(schemas.CUEFile, src)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range schemas.Files() {
		s, err := c.Document(f.Definition)
		if err != nil {
			t.Fatalf("%s: %v", f.Definition, err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		var missing []string
		n := undescribed(doc, "#", &missing)
		for _, m := range missing {
			t.Errorf("%s: property %s has no description: give its field a doc comment in %s", f.Name, m, schemas.CUEFile)
		}
		if n == 0 {
			t.Errorf("%s: no properties found", f.Name)
		}
	}
}

// undescribed walks the JSON Schema v and adds to missing the properties
// of its object schemas (those with "type": "object") that have no
// description; the properties of rules (if, then, not: no type) only
// test fields and are not declarations. It returns how many properties
// it saw.
func undescribed(v any, at string, missing *[]string) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		props, _ := x["properties"].(map[string]any)
		if x["type"] == "object" {
			for _, name := range slices.Sorted(maps.Keys(props)) {
				n++
				if p, _ := props[name].(map[string]any); p["description"] == nil {
					*missing = append(*missing, at+"/properties/"+name)
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			n += undescribed(x[k], at+"/"+k, missing)
		}
	case []any:
		for i, e := range x {
			n += undescribed(e, fmt.Sprintf("%s/%d", at, i), missing)
		}
	}
	return n
}
