package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// DecodeArgs decodes payload, a job's JSON args, into v (a pointer to the
// kind's args) as json.Unmarshal does; pools and the asynq bridge decode
// with it. Its error becomes the job's error, shown to operators and logged,
// so when v's type can hold a field tagged `fencedq:"sensitive"` it never
// quotes the payload: a value of the wrong JSON type is named by that type
// and the field it was meant for, not by its text ("number", not
// "number 4242424242424242.5"), and an error from a type's own decoding
// method (time.Time's quotes the text it was given) is replaced by one
// naming the args' type. Args that can hold no sensitive field get
// json.Unmarshal's error as it is.
func DecodeArgs(payload []byte, v any) error { return decodeJSON(payload, v, "args") }

// decodeJSON decodes payload into v as DecodeArgs does; what names the
// value ("args", "output") in the error that replaces one it leaves out.
func decodeJSON(payload []byte, v any, what string) error {
	err := json.Unmarshal(payload, v)
	if err == nil || plainType(reflect.TypeOf(v)) {
		return err
	}
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		what, _, _ := strings.Cut(typeErr.Value, " ") // "number 1.5": keep the JSON type only
		if typeErr.Struct == "" || typeErr.Field == "" {
			return fmt.Errorf("json: cannot unmarshal %s into Go value of type %s", what, typeErr.Type)
		}
		return fmt.Errorf("json: cannot unmarshal %s into Go struct field %s.%s of type %s", what, typeErr.Struct, typeErr.Field, typeErr.Type)
	case errors.As(err, &syntaxErr):
		return err // invalid JSON: an offset and at most one character
	}
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return fmt.Errorf("json: a value of the %s %s does not decode (the error is left out: it may quote a sensitive value)", t, what)
}
