// Package argtype reads job args types for the generic helpers that take a
// kind's Go type (worker.Register, fencedqtest, asynqfence), whose type
// argument may be a pointer to the args, and tells whether a payload is
// the JSON object args must be.
package argtype

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
)

// Zero returns a value of T whose Kind method can be called: T's zero
// value, or for a pointer type a pointer to a new zero value (calling a
// method of the value type through a nil pointer panics).
func Zero[T interface{ Kind() string }]() T {
	var zero T
	if t := reflect.TypeFor[T](); t.Kind() == reflect.Pointer {
		zero = reflect.New(t.Elem()).Interface().(T)
	}
	return zero
}

// ZeroKind returns the kind T's Kind method gives on Zero[T](), or an
// error when that call panics (a Kind method reading a field through a nil
// pointer): a kind is a constant of its args type, known before any job of
// it exists.
func ZeroKind[T interface{ Kind() string }]() (kind string, err error) {
	zero := Zero[T]()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%T's Kind method panicked on the zero value (a kind is a constant of its args type): %v", zero, r)
		}
	}()
	return zero.Kind(), nil
}

// IsNil reports whether v is nil or holds a nil pointer, map, slice,
// channel, function or interface.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// CheckObject reports why the values of a job args type t cannot encode
// (encoding/json) as a JSON object, nil when they can: t, or what it points
// to, must be a struct or a map keyed by strings or integers, and reach no
// func, channel or complex number through its encoded fields. A type with
// its own MarshalJSON is trusted (Enqueue checks what it returns).
func CheckObject(t reflect.Type) error {
	for t.Kind() == reflect.Pointer && !marshals(t, jsonMarshaler) {
		t = t.Elem()
	}
	switch {
	case marshals(t, jsonMarshaler):
		return nil
	case marshals(t, textMarshaler):
		return fmt.Errorf("%v encodes as a JSON string (it has a MarshalText method), not an object", t)
	case t.Kind() == reflect.Map && !mapKey(t.Key()):
		return fmt.Errorf("%v cannot encode as JSON: its keys are neither strings nor integers", t)
	case t.Kind() != reflect.Struct && t.Kind() != reflect.Map:
		return fmt.Errorf("%v is neither a struct nor a map, so it does not encode as a JSON object: use a struct", t)
	}
	if path, bad := unsupported(t, map[reflect.Type]bool{}); bad != nil {
		return fmt.Errorf("%v cannot encode as JSON: its field %s holds a %v", t, path, bad)
	}
	return nil
}

// marshals reports whether t or a pointer to it implements m.
func marshals(t, m reflect.Type) bool {
	return t.Implements(m) || (t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(m))
}

// mapKey reports whether encoding/json encodes a map keyed by k.
func mapKey(k reflect.Type) bool {
	switch k.Kind() {
	case reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return true
	}
	return marshals(k, textMarshaler)
}

// unsupported returns the first type reachable from t through what
// encoding/json encodes that it cannot encode (a map key's type for a map
// it cannot encode), and the fields leading to it ("" for t itself); nil
// when there is none.
func unsupported(t reflect.Type, seen map[reflect.Type]bool) (string, reflect.Type) {
	if seen[t] || marshals(t, jsonMarshaler) || marshals(t, textMarshaler) {
		return "", nil
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return "", t
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return unsupported(t.Elem(), seen)
	case reflect.Map:
		if !mapKey(t.Key()) {
			return "", t.Key()
		}
		return unsupported(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Tag.Get("json") == "-" {
				continue // never encoded ("-," names a field "-")
			}
			if !f.IsExported() && (!f.Anonymous || indirect(f.Type).Kind() != reflect.Struct) {
				continue // not encoded
			}
			if path, bad := unsupported(f.Type, seen); bad != nil {
				if path != "" {
					return f.Name + "." + path, bad
				}
				return f.Name, bad
			}
		}
	}
	return "", nil
}

func indirect(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		return t.Elem()
	}
	return t
}

// IsJSONObject reports whether payload is one JSON object ("null", arrays
// and scalars are not).
func IsJSONObject(payload []byte) bool { return StartsObject(payload) && json.Valid(payload) }

// StartsObject reports whether valid JSON is an object: its first
// non-space byte is '{'. Cheap; use it on JSON already validated.
func StartsObject(valid []byte) bool {
	for _, c := range valid {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}
