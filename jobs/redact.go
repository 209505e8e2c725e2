package jobs

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/fencedq/fencedq/internal/ledger"
)

// Redacted replaces every sensitive value wherever args are shown.
const Redacted = ledger.Redacted

// RedactJSON returns args as JSON with every sensitive value replaced by
// "[redacted]". Logs, the CLI, the dashboard and metrics only ever see this
// form; the raw payload goes only to the handler.
//
// Sensitive fields are marked with the struct tag `fencedq:"sensitive"`:
//
//	type Charge struct {
//		Account    string
//		CardNumber string `json:"card" fencedq:"sensitive"`
//		Login      `fencedq:"sensitive"` // every promoted field of Login
//	}
//
// The walk follows the value, not only its static type, and the rules of
// encoding/json:
//
//   - nested structs, pointers, slices, arrays and map values, at any depth;
//   - interface-typed fields, slices and maps (any, []any, map[string]any):
//     the dynamic value's type decides what is sensitive;
//   - embedded structs: their promoted fields inherit the tag of the
//     embedding field, so an embedded struct tagged sensitive hides all of
//     its promoted fields; name conflicts resolve as encoding/json resolves
//     them;
//   - json tags: renames, omitempty, omitzero, string and "-";
//   - a value whose type implements json.Marshaler or
//     encoding.TextMarshaler (on the value or its pointer) can encode its
//     fields in any shape, so if it holds any sensitive field, anywhere
//     below it, the whole value is replaced.
//
// Numbers are kept exactly. Keys of objects come out sorted. A map key is
// never redacted: do not put sensitive data in map keys.
func RedactJSON(args any) ([]byte, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	return json.Marshal(redact(reflect.ValueOf(args), tree))
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// redact walks the decoded JSON tree alongside the value it was encoded
// from. The recursion is driven by the tree, so it always ends.
func redact(v reflect.Value, tree any) any {
	for v.IsValid() && (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) {
		if v.IsNil() {
			return tree
		}
		if v.Kind() == reflect.Pointer && marshals(v.Type()) {
			break
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		return tree
	}
	if marshals(v.Type()) {
		if containsSensitive(v, map[uintptr]bool{}, 0) {
			return Redacted
		}
		return tree
	}
	switch v.Kind() {
	case reflect.Struct:
		m, ok := tree.(map[string]any)
		if !ok {
			return tree
		}
		l := fieldsOf(v.Type())
		for k := range m {
			if !l.names[k] && containsSensitive(v, map[uintptr]bool{}, 0) {
				// A member this walk cannot place: hide it rather than guess.
				m[k] = Redacted
			}
		}
		for _, f := range l.fields {
			val, present := m[f.name]
			if !present {
				continue
			}
			if f.sensitive {
				m[f.name] = Redacted
				continue
			}
			fv, err := v.FieldByIndexErr(f.index)
			if err != nil { // a nil embedded pointer: encoding/json skipped it
				continue
			}
			m[f.name] = redact(fv, val)
		}
		return m
	case reflect.Slice, reflect.Array:
		s, ok := tree.([]any)
		if !ok || len(s) != v.Len() {
			return tree
		}
		for i := range s {
			s[i] = redact(v.Index(i), s[i])
		}
		return s
	case reflect.Map:
		m, ok := tree.(map[string]any)
		if !ok {
			return tree
		}
		it := v.MapRange()
		for it.Next() {
			k, ok := mapKey(it.Key())
			if !ok {
				continue
			}
			if val, present := m[k]; present {
				m[k] = redact(it.Value(), val)
			}
		}
		return m
	}
	return tree
}

// marshals reports whether encoding/json may encode t (or *t) by a method
// of its own, in a shape the field walk cannot follow.
func marshals(t reflect.Type) bool {
	if t.Implements(marshalerType) || t.Implements(textMarshalerType) {
		return true
	}
	if t.Kind() != reflect.Pointer {
		p := reflect.PointerTo(t)
		return p.Implements(marshalerType) || p.Implements(textMarshalerType)
	}
	return false
}

// containsSensitive reports whether v holds a field tagged sensitive
// anywhere below it, exported or not, following pointers, interfaces,
// slices and maps.
func containsSensitive(v reflect.Value, seen map[uintptr]bool, depth int) bool {
	if depth > 64 {
		return true // too deep to be sure: assume the worst
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return typeSensitive(v.Type().Elem())
		}
		if seen[v.Pointer()] {
			return false
		}
		seen[v.Pointer()] = true
		return containsSensitive(v.Elem(), seen, depth+1)
	case reflect.Interface:
		if v.IsNil() {
			return false
		}
		return containsSensitive(v.Elem(), seen, depth+1)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if isSensitive(t.Field(i)) || containsSensitive(v.Field(i), seen, depth+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if typeSensitive(v.Type().Elem()) {
			return true
		}
		for i := range v.Len() {
			if containsSensitive(v.Index(i), seen, depth+1) {
				return true
			}
		}
	case reflect.Map:
		if typeSensitive(v.Type().Elem()) {
			return true
		}
		it := v.MapRange()
		for it.Next() {
			if containsSensitive(it.Value(), seen, depth+1) {
				return true
			}
		}
	}
	return false
}

var typeSensitiveCache sync.Map // reflect.Type → bool

// typeSensitive reports whether values of t can hold a sensitive field,
// judged from the type alone (interfaces count as not sensitive here; their
// values are checked by containsSensitive).
func typeSensitive(t reflect.Type) bool {
	if v, ok := typeSensitiveCache.Load(t); ok {
		return v.(bool)
	}
	r := typeSensitiveWalk(t, map[reflect.Type]bool{})
	typeSensitiveCache.Store(t, r)
	return r
}

func typeSensitiveWalk(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return typeSensitiveWalk(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if isSensitive(f) || typeSensitiveWalk(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

var plainTypeCache sync.Map // reflect.Type → bool

// plainType reports whether values of t can never hold a sensitive field:
// none is tagged anywhere in the type, and no interface field could carry
// one in at run time. Such args are shown as encoded, with no redaction pass.
func plainType(t reflect.Type) bool {
	if v, ok := plainTypeCache.Load(t); ok {
		return v.(bool)
	}
	r := !typeSensitive(t) && !holdsInterface(t, map[reflect.Type]bool{})
	plainTypeCache.Store(t, r)
	return r
}

func holdsInterface(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsInterface(t.Elem(), seen)
	case reflect.Map:
		return holdsInterface(t.Key(), seen) || holdsInterface(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsInterface(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// mapKey is the object key encoding/json writes for a map key.
func mapKey(k reflect.Value) (string, bool) {
	if k.Kind() == reflect.String {
		return k.String(), true
	}
	if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
		if k.Kind() == reflect.Pointer && k.IsNil() {
			return "", true
		}
		b, err := tm.MarshalText()
		return string(b), err == nil
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(k.Uint(), 10), true
	}
	return "", false
}

// field is one JSON member of a struct type, as encoding/json lays it out.
type field struct {
	name      string
	index     []int
	tagged    bool // the name comes from a json tag
	sensitive bool // the field, or a struct embedding it, is tagged sensitive
}

// layout is a struct type's JSON members and the names that may appear in
// its encoding.
type layout struct {
	fields []field
	names  map[string]bool
}

var layoutCache sync.Map // reflect.Type → *layout

// fieldsOf returns t's JSON members following encoding/json's rules:
// embedded structs without a json name are flattened, breadth first; of
// several fields with one name the shallowest wins, then the only one with
// a json tag; a remaining tie drops the name. A member is sensitive if any
// field competing for its name is, so a conflict can only hide more.
func fieldsOf(t reflect.Type) *layout {
	if l, ok := layoutCache.Load(t); ok {
		return l.(*layout)
	}
	type walk struct {
		typ       reflect.Type
		index     []int
		sensitive bool
	}
	var all []field
	var current []walk
	next := []walk{{typ: t}}
	var count map[reflect.Type]int
	nextCount := map[reflect.Type]int{}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current, next = next, nil
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, w := range current {
			if visited[w.typ] {
				continue
			}
			visited[w.typ] = true
			for i := range w.typ.NumField() {
				sf := w.typ.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(append([]int(nil), w.index...), i)
				sensitive := w.sensitive || isSensitive(sf)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					tagged := name != ""
					if name == "" {
						name = sf.Name
					}
					all = append(all, field{name: name, index: index, tagged: tagged, sensitive: sensitive})
					if count[w.typ] > 1 {
						// Embedded twice at this depth: encoding/json
						// drops the name, and so does the duplicate.
						all = append(all, all[len(all)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, walk{typ: ft, index: index, sensitive: sensitive})
				} else if sensitive {
					for j := range next {
						if next[j].typ == ft {
							next[j].sensitive = true
						}
					}
				}
			}
		}
	}
	byName := map[string][]field{}
	var order []string
	for _, f := range all {
		if _, ok := byName[f.name]; !ok {
			order = append(order, f.name)
		}
		byName[f.name] = append(byName[f.name], f)
	}
	l := &layout{names: make(map[string]bool, len(order))}
	for _, name := range order {
		l.names[name] = true
		f, ok := dominant(byName[name])
		if !ok {
			continue
		}
		for _, other := range byName[name] {
			f.sensitive = f.sensitive || other.sensitive
		}
		l.fields = append(l.fields, f)
	}
	layoutCache.Store(t, l)
	return l
}

// dominant picks, among fields of one name, the one encoding/json encodes:
// the shallowest; at equal depth the only tagged one, or the only one.
func dominant(fs []field) (field, bool) {
	depth := len(fs[0].index)
	for _, f := range fs {
		depth = min(depth, len(f.index))
	}
	var top []field
	for _, f := range fs {
		if len(f.index) == depth {
			top = append(top, f)
		}
	}
	if len(top) == 1 {
		return top[0], true
	}
	var tagged []field
	for _, f := range top {
		if f.tagged {
			tagged = append(tagged, f)
		}
	}
	if len(tagged) == 1 {
		return tagged[0], true
	}
	return field{}, false
}

// validTagName mirrors encoding/json: a tag name that is not valid is
// ignored and the Go field name is used instead.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

func isSensitive(f reflect.StructField) bool {
	for _, opt := range strings.Split(f.Tag.Get("fencedq"), ",") {
		if strings.TrimSpace(opt) == "sensitive" {
			return true
		}
	}
	return false
}

// minHiddenLen is the shortest sensitive value RedactText replaces: a
// shorter one would match too much unrelated text.
const minHiddenLen = 3

// RedactText returns text with every sensitive value of args replaced by
// Redacted: each string or number (as JSON writes it, at least 3 bytes
// long) that RedactJSON hides. Enqueues apply it to the texts user code
// builds for args of a type that can hold sensitive fields (a Validate
// error, a panic in an args method, an encoding error), and pools to those
// of an attempt (a Validate error, a handler's or Reconcile's error, a
// panic's value), before they are returned, stored, logged or traced.
// Args of a type that can hold none leave text as it is; other args that
// do not encode hide the whole text.
func RedactText(args any, text string) string {
	if t := reflect.TypeOf(args); t == nil || plainType(t) {
		return text
	}
	hidden, ok := hiddenValues(args)
	if !ok {
		return Redacted
	}
	if len(hidden) == 0 || text == "" {
		return text
	}
	// The longest first, so a value holding another is replaced whole.
	slices.SortFunc(hidden, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b))
	})
	pairs := make([]string, 0, 2*len(hidden))
	for _, s := range slices.Compact(hidden) {
		pairs = append(pairs, s, Redacted)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// hiddenValues returns the strings and numbers RedactJSON hides in args,
// each as JSON writes it (strings also as they are), and whether args
// encode.
func hiddenValues(args any) ([]string, bool) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, false
	}
	full, err1 := decodeTree(raw)
	shown, err2 := decodeTree(raw)
	if err1 != nil || err2 != nil {
		return nil, false
	}
	var out []string
	collectHidden(full, redact(reflect.ValueOf(args), shown), &out)
	return out, true
}

func decodeTree(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	err := dec.Decode(&tree)
	return tree, err
}

// collectHidden adds to out the leaves of full that shown, its redacted
// form, replaced by Redacted.
func collectHidden(full, shown any, out *[]string) {
	if s, ok := shown.(string); ok && s == Redacted {
		leaves(full, out)
		return
	}
	switch f := full.(type) {
	case map[string]any:
		if m, ok := shown.(map[string]any); ok {
			for k, v := range f {
				collectHidden(v, m[k], out)
			}
		}
	case []any:
		if s, ok := shown.([]any); ok && len(s) == len(f) {
			for i := range f {
				collectHidden(f[i], s[i], out)
			}
		}
	}
}

// leaves adds to out every string and number in tree long enough to hide.
func leaves(tree any, out *[]string) {
	add := func(s string) {
		if len(s) >= minHiddenLen && s != Redacted {
			*out = append(*out, s)
		}
	}
	switch t := tree.(type) {
	case string:
		add(t)
		if b, err := json.Marshal(t); err == nil {
			add(string(b[1 : len(b)-1])) // as quoted in a JSON payload
		}
	case json.Number:
		add(t.String())
	case map[string]any:
		for _, v := range t {
			leaves(v, out)
		}
	case []any:
		for _, v := range t {
			leaves(v, out)
		}
	}
}

// RedactError returns err with every sensitive value of args in its text
// replaced (RedactText); errors.Is and errors.As see it as err. A nil err
// stays nil.
func RedactError(args any, err error) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if hidden := RedactText(args, text); hidden != text {
		return &redactedError{text: hidden, err: err}
	}
	return err
}

// redactedError is an error whose text had sensitive values replaced.
type redactedError struct {
	text string
	err  error
}

func (e *redactedError) Error() string { return e.text }
func (e *redactedError) Unwrap() error { return e.err }
