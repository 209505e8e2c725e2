// Package argtype reads job args types for the generic helpers that take a
// kind's Go type (worker.Register, fencedqtest, asynqfence), whose type
// argument may be a pointer to the args.
package argtype

import "reflect"

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
