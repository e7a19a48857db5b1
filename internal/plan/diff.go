package plan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetlift/fleetlift/internal/spec"
	"github.com/fleetlift/fleetlift/internal/state"
)

// diffSpecs compares the recorded spec with the desired one and fills the
// change's Fields, FieldsKnown and Repositories. Without a recorded spec
// there is no field diff, and the repositories come from the recorded
// per-repository results.
//
// The recorded spec is decoded into the same Go type as the desired one
// and the two values are walked together, field by field, under their JSON
// names: one decode is the whole cost. When the kinds differ, both sides
// are compared as plain JSON.
func (df *differ) diffSpecs(c *Change, r *state.Campaign, d *spec.Definition) {
	newUnits := unitsOfDefinition(d)
	if len(r.Spec) == 0 {
		if len(r.Repos) > 0 {
			oldUnits := make([]string, 0, len(r.Repos))
			for _, rp := range r.Repos {
				// A group's repositories are recorded as group/name:
				// the unit is the group.
				unit, _, _ := strings.Cut(rp.Name, "/")
				oldUnits = append(oldUnits, unit)
			}
			c.Repositories = repoDiff(sortedSet(oldUnits), newUnits)
		}
		return
	}
	var old, cur any
	var oldUnits []string
	switch {
	case d.Campaign != nil && r.Kind == state.KindCampaign:
		var o spec.Campaign
		if json.Unmarshal(r.Spec, &o) != nil {
			return
		}
		old, cur = &o, d.Campaign
		oldUnits = units(o.Repositories, nil, o.Groups)
	case d.Task != nil && r.Kind == state.KindTask:
		var o spec.Task
		if json.Unmarshal(r.Spec, &o) != nil {
			return
		}
		old, cur = &o, d.Task
		oldUnits = units(o.Repositories, o.Targets, o.Groups)
	default:
		var ok bool
		if old, ok = value(r.Spec); !ok {
			return
		}
		b, err := json.Marshal(specOf(d))
		if err != nil {
			return
		}
		cur, _ = value(b)
		var u struct {
			Repositories []spec.Repository `json:"repositories"`
			Targets      []spec.Repository `json:"targets"`
			Groups       []spec.Group      `json:"groups"`
		}
		_ = json.Unmarshal(r.Spec, &u)
		oldUnits = units(u.Repositories, u.Targets, u.Groups)
	}
	c.Fields, c.FieldsKnown = df.diff(old, cur), true
	c.Repositories = repoDiff(oldUnits, newUnits)
}

func specOf(d *spec.Definition) any {
	if d.Campaign != nil {
		return d.Campaign
	}
	return d.Task
}

// differ compares two values as their JSON encodings would show them. It
// remembers what it learnt about each struct type; one differ serves one
// Compute.
type differ struct {
	types map[reflect.Type]*typeInfo
	path  []segment
	out   []FieldDiff
}

func newDiffer() *differ { return &differ{types: map[reflect.Type]*typeInfo{}} }

type typeInfo struct {
	// opaque types encode themselves (json.Marshaler) and are compared
	// whole.
	opaque bool
	fields []fieldInfo
	// name is the index of the string field tagged "name", or -1.
	name int
}

type fieldInfo struct {
	index     int
	name      string
	omitempty bool
	// inline: an embedded struct whose fields are promoted (Task's Work).
	inline bool
}

var marshaler = reflect.TypeFor[json.Marshaler]()

func (df *differ) info(t reflect.Type) *typeInfo {
	if ti, ok := df.types[t]; ok {
		return ti
	}
	ti := &typeInfo{name: -1}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		ti.opaque = t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler)
	}
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
				ti.fields = append(ti.fields, fieldInfo{index: i, inline: true})
				continue
			case !f.IsExported() || name == "-":
				continue
			case name == "":
				name = f.Name
			}
			if name == "name" && f.Type.Kind() == reflect.String {
				ti.name = i
			}
			ti.fields = append(ti.fields, fieldInfo{index: i, name: name, omitempty: strings.Contains(opts, "omitempty")})
		}
	}
	df.types[t] = ti
	return ti
}

// diff returns the differences between old and cur, sorted by path.
func (df *differ) diff(old, cur any) []FieldDiff {
	df.out, df.path = nil, df.path[:0]
	df.walk(reflect.ValueOf(old), reflect.ValueOf(cur))
	out := df.out
	df.out = nil
	slices.SortStableFunc(out, func(a, b FieldDiff) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// segment is one step of a path: a key, a list element by name, or a list
// element by position.
type segment struct {
	key   string
	index int
	kind  byte // 'k' key, 'n' name, 'i' index
}

func (df *differ) push(s segment) { df.path = append(df.path, s) }
func (df *differ) pop()           { df.path = df.path[:len(df.path)-1] }

// pathString writes the current path: keys joined by ".", elements as
// [name] or [index], keys that are not plain names as ["key"].
func (df *differ) pathString() string {
	var b strings.Builder
	for i, s := range df.path {
		switch s.kind {
		case 'k':
			if !plainKey(s.key) {
				b.WriteString("[" + strconv.Quote(s.key) + "]")
				continue
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		case 'n':
			b.WriteString("[" + s.key + "]")
		case 'i':
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return b.String()
}

// unitList reports whether the current path holds the repositories a run
// is made of, whose additions and removals the RepoDiff reports:
// repositories, targets, groups, groups[g].repositories.
func (df *differ) unitList() bool {
	p := df.path
	switch {
	case len(p) == 1 && p[0].kind == 'k':
		return p[0].key == "repositories" || p[0].key == "targets" || p[0].key == "groups"
	case len(p) == 3:
		return p[0].kind == 'k' && p[0].key == "groups" && p[1].kind == 'n' && p[2].kind == 'k' && p[2].key == "repositories"
	}
	return false
}

func (df *differ) record(old, cur json.RawMessage) {
	df.out = append(df.out, FieldDiff{Path: df.pathString(), Old: old, New: cur})
}

// walk compares old and cur at the current path. An invalid
// reflect.Value is an absent field.
func (df *differ) walk(old, cur reflect.Value) {
	old, cur = unwrap(old), unwrap(cur)
	switch {
	case !old.IsValid() && !cur.IsValid():
		return
	case !old.IsValid() || !cur.IsValid() || old.Type() != cur.Type():
		df.whole(old, cur)
		return
	}
	switch old.Kind() {
	case reflect.Pointer:
		if old.IsNil() || cur.IsNil() {
			df.whole(old, cur)
			return
		}
		df.walk(old.Elem(), cur.Elem())
	case reflect.Struct:
		if df.info(old.Type()).opaque {
			df.whole(old, cur)
			return
		}
		df.walkStruct(old, cur)
	case reflect.Map:
		if df.info(old.Type()).opaque || old.Type().Key().Kind() != reflect.String {
			df.whole(old, cur)
			return
		}
		df.walkMap(old, cur)
	case reflect.Slice, reflect.Array:
		if df.info(old.Type()).opaque {
			df.whole(old, cur)
			return
		}
		df.walkList(old, cur)
	default:
		df.whole(old, cur)
	}
}

// unwrap looks through interfaces; a nil interface stays (it is JSON null).
func unwrap(v reflect.Value) reflect.Value {
	for v.IsValid() && v.Kind() == reflect.Interface && !v.IsNil() {
		v = v.Elem()
	}
	return v
}

// whole records old → cur as one change when they differ.
func (df *differ) whole(old, cur reflect.Value) {
	if old.IsValid() && cur.IsValid() && same(old, cur) {
		return
	}
	df.record(encodeValue(old), encodeValue(cur))
}

// same compares two values of one type; plain kinds without allocating.
func same(a, b reflect.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Kind() {
	case reflect.String:
		return a.String() == b.String()
	case reflect.Bool:
		return a.Bool() == b.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return a.Int() == b.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return a.Uint() == b.Uint()
	case reflect.Float32, reflect.Float64:
		return a.Float() == b.Float()
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func (df *differ) walkStruct(old, cur reflect.Value) {
	for _, f := range df.info(old.Type()).fields {
		o, n := old.Field(f.index), cur.Field(f.index)
		if f.inline {
			df.walkStruct(o, n)
			continue
		}
		if f.omitempty {
			if empty(o) {
				o = reflect.Value{}
			}
			if empty(n) {
				n = reflect.Value{}
			}
		}
		df.push(segment{kind: 'k', key: f.name})
		df.walk(o, n)
		df.pop()
	}
}

// empty is encoding/json's omitempty test.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

func (df *differ) walkMap(old, cur reflect.Value) {
	keys := make([]string, 0, old.Len()+cur.Len())
	for _, k := range old.MapKeys() {
		keys = append(keys, k.String())
	}
	for _, k := range cur.MapKeys() {
		if !old.MapIndex(k).IsValid() {
			keys = append(keys, k.String())
		}
	}
	slices.Sort(keys)
	kt := old.Type().Key()
	for _, k := range keys {
		kv := reflect.ValueOf(k).Convert(kt)
		df.push(segment{kind: 'k', key: k})
		df.walk(old.MapIndex(kv), cur.MapIndex(kv))
		df.pop()
	}
}

// walkList pairs list elements by name when every element has a distinct
// one (repositories, groups, verifiers, for_each), by position when both
// lists hold objects and are of one length, and otherwise compares the
// lists whole. Repositories and groups added or removed are left to the
// RepoDiff; a list whose named elements only moved shows their names in
// order.
func (df *differ) walkList(old, cur reflect.Value) {
	oldNames, okOld := df.names(old)
	curNames, okCur := df.names(cur)
	if okOld && okCur && (old.Len() > 0 || cur.Len() > 0) {
		units := df.unitList()
		oldAt := make(map[string]int, len(oldNames))
		for i, n := range oldNames {
			oldAt[n] = i
		}
		curAt := make(map[string]int, len(curNames))
		for i, n := range curNames {
			curAt[n] = i
		}
		var keptOld, keptCur []string
		for i, n := range oldNames {
			if _, ok := curAt[n]; ok {
				keptOld = append(keptOld, n)
			} else if !units {
				df.push(segment{kind: 'n', key: n})
				df.record(encodeValue(old.Index(i)), nil)
				df.pop()
			}
		}
		for i, n := range curNames {
			df.push(segment{kind: 'n', key: n})
			if j, ok := oldAt[n]; ok {
				keptCur = append(keptCur, n)
				df.walk(old.Index(j), cur.Index(i))
			} else if !units {
				df.record(nil, encodeValue(cur.Index(i)))
			}
			df.pop()
		}
		if !slices.Equal(keptOld, keptCur) {
			df.record(encode(keptOld), encode(keptCur))
		}
		return
	}
	if old.Len() == cur.Len() && objects(old) && objects(cur) {
		for i := range old.Len() {
			df.push(segment{kind: 'i', index: i})
			df.walk(old.Index(i), cur.Index(i))
			df.pop()
		}
		return
	}
	df.whole(old, cur)
}

// names returns the name of every element of a list, if every element is
// an object with a distinct, non-empty "name".
func (df *differ) names(list reflect.Value) ([]string, bool) {
	out := make([]string, list.Len())
	seen := make(map[string]bool, list.Len())
	for i := range list.Len() {
		n, ok := df.nameOf(list.Index(i))
		if !ok || n == "" || seen[n] {
			return nil, false
		}
		seen[n] = true
		out[i] = n
	}
	return out, true
}

func (df *differ) nameOf(v reflect.Value) (string, bool) {
	v = deref(v)
	switch v.Kind() {
	case reflect.Struct:
		if i := df.info(v.Type()).name; i >= 0 {
			return v.Field(i).String(), true
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return "", false
		}
		f := unwrap(v.MapIndex(reflect.ValueOf("name").Convert(v.Type().Key())))
		if f.IsValid() && f.Kind() == reflect.String {
			return f.String(), true
		}
	}
	return "", false
}

func deref(v reflect.Value) reflect.Value {
	v = unwrap(v)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = unwrap(v.Elem())
	}
	return v
}

// objects reports whether every element of a list is a JSON object.
func objects(list reflect.Value) bool {
	for i := range list.Len() {
		if k := deref(list.Index(i)).Kind(); k != reflect.Struct && k != reflect.Map {
			return false
		}
	}
	return true
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// value decodes a JSON value, keeping numbers as written.
func value(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func encodeValue(v reflect.Value) json.RawMessage {
	if !v.IsValid() {
		return nil
	}
	return encode(v.Interface())
}

// encode writes v as compact JSON without HTML escaping.
func encode(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(`null`)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// unitsOfDefinition lists a definition's repositories by name, "group/name"
// within groups, sorted.
func unitsOfDefinition(d *spec.Definition) []string {
	switch {
	case d.Campaign != nil:
		return units(d.Campaign.Repositories, nil, d.Campaign.Groups)
	case d.Task != nil:
		return units(d.Task.Repositories, d.Task.Targets, d.Task.Groups)
	}
	return nil
}

func units(repos, targets []spec.Repository, groups []spec.Group) []string {
	var out []string
	add := func(prefix string, rs []spec.Repository) {
		for _, r := range rs {
			n := r.Name
			if n == "" {
				n = r.URL
			}
			out = append(out, prefix+n)
		}
	}
	add("", repos)
	add("", targets)
	for _, g := range groups {
		add(g.Name+"/", g.Repositories)
	}
	return sortedSet(out)
}

func sortedSet(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func repoDiff(old, cur []string) RepoDiff {
	var d RepoDiff
	oldSet := make(map[string]bool, len(old))
	for _, n := range old {
		oldSet[n] = true
	}
	curSet := make(map[string]bool, len(cur))
	for _, n := range cur {
		curSet[n] = true
		if !oldSet[n] {
			d.Added = append(d.Added, n)
		}
	}
	for _, n := range old {
		if !curSet[n] {
			d.Removed = append(d.Removed, n)
		}
	}
	return d
}
