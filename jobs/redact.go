package jobs

import (
	"encoding/json"
	"reflect"
	"strings"
)

// Redacted replaces every sensitive value wherever args are shown.
const Redacted = "[redacted]"

// Sensitive fields are marked with the struct tag `fencedq:"sensitive"`:
//
//	type Charge struct {
//		Account string
//		CardNumber string `json:"card" fencedq:"sensitive"`
//	}
//
// RedactJSON returns args as JSON with every sensitive field (at any depth
// of nested structs, slices and maps of structs) replaced by "[redacted]".
// Logs, the CLI and the dashboard only ever see this form.
func RedactJSON(args any) ([]byte, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, err
	}
	return json.Marshal(redact(reflect.TypeOf(args), tree))
}

// redact walks the decoded JSON tree alongside the Go type.
func redact(t reflect.Type, v any) any {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return v
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := jsonName(f)
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				redact(f.Type, m) // embedded fields are promoted
				continue
			}
			if name == "" {
				name = f.Name
			}
			val, present := m[name]
			if !present {
				continue
			}
			if isSensitive(f) {
				m[name] = Redacted
			} else {
				m[name] = redact(f.Type, val)
			}
		}
		return m
	case reflect.Slice, reflect.Array:
		s, ok := v.([]any)
		if !ok {
			return v
		}
		for i := range s {
			s[i] = redact(t.Elem(), s[i])
		}
		return s
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for k := range m {
			m[k] = redact(t.Elem(), m[k])
		}
		return m
	}
	return v
}

func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	return name
}

func isSensitive(f reflect.StructField) bool {
	for _, opt := range strings.Split(f.Tag.Get("fencedq"), ",") {
		if strings.TrimSpace(opt) == "sensitive" {
			return true
		}
	}
	return false
}
