package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/jobs"
)

type plainDecode struct {
	N int       `json:"n"`
	T time.Time `json:"t"`
}

type sensitiveDecode struct {
	N int       `json:"n" fencedq:"sensitive"`
	T time.Time `json:"t" fencedq:"sensitive"`
}

// TestDecodeArgsQuotesNoSensitiveValue: args that can hold sensitive
// fields decode with errors that name the field and the JSON type but
// never the value; other args keep encoding/json's error.
func TestDecodeArgsQuotesNoSensitiveValue(t *testing.T) {
	for _, payload := range []string{`{"n":4242424242424242.5}`, `{"t":"12/31/1990"}`, `{"n":"4242424242424242"}`, `[4242424242424242]`} {
		var s sensitiveDecode
		err := jobs.DecodeArgs([]byte(payload), &s)
		if err == nil || strings.Contains(err.Error(), "4242") || strings.Contains(err.Error(), "1990") {
			t.Errorf("%s: %v, want an error quoting no value", payload, err)
		}
		var p plainDecode
		if perr := jobs.DecodeArgs([]byte(payload), &p); perr == nil {
			t.Errorf("%s: plain args decoded", payload)
		}
	}
	var s sensitiveDecode
	if err := jobs.DecodeArgs([]byte(`{"n":1.5}`), &s); err == nil || !strings.Contains(err.Error(), "number into Go struct field sensitiveDecode.n of type int") {
		t.Errorf("wrong type: %v, want the field and the JSON type named", err)
	}
	var p plainDecode
	if err := jobs.DecodeArgs([]byte(`{"t":"12/31/1990"}`), &p); err == nil || !strings.Contains(err.Error(), "12/31/1990") {
		t.Errorf("plain args: %v, want encoding/json's error", err)
	}
	if err := jobs.DecodeArgs([]byte(`{"n":1,"t":"2020-01-02T03:04:05Z"}`), &s); err != nil || s.N != 1 {
		t.Errorf("valid args: %+v %v", s, err)
	}
}
