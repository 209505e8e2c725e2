// Fuzz target for reading a job hash back into a Record: whatever a
// corrupt, truncated or hand-edited hash holds, recordFrom returns a
// Record (never panics) that the CLI and the dashboard can encode.
//
// To fuzz it for longer than its seeds:
//
//	go test -run '^$' -fuzz=FuzzRecordFrom -fuzztime=1m ./jobs/

package ledger

import (
	"bytes"
	"encoding/json"
	"testing"
)

// hashFrom turns fuzz input into job hash fields: lines "field=value",
// separated by NUL bytes so that values may hold line breaks.
func hashFrom(data []byte) map[string]string {
	h := map[string]string{}
	for _, kv := range bytes.Split(data, []byte{0}) {
		k, v, _ := bytes.Cut(kv, []byte("="))
		h[string(k)] = string(v)
	}
	return h
}

func FuzzRecordFrom(f *testing.F) {
	join := func(kv ...string) []byte {
		var b []byte
		for i, s := range kv {
			if i > 0 {
				b = append(b, 0)
			}
			b = append(b, s...)
		}
		return b
	}
	f.Add("q", "j6", join("created=9999999999999999", "deadline=-99999999999999"))
	f.Add("default", "j1", join("kind=email", "state=pending", "args={\"to\":\"a\"}", "payload={\"to\":\"a\"}",
		"created=1700000000000", "run_at=1700000000000", "max_retries=3", "op=op-1", "resource=acct:1"))
	f.Add("q", "j2", join("state=running", "token=18446744073709551615", "fence=18446744073709551616",
		"deadline=-1", "attempts=-5", "timeout_ms=9223372036854775807"))
	f.Add("q", "j3", join("args={not json", "payload=", "created=abc", "finished=1e9"))
	f.Add("q", "j4", join("args=", "payload=[1,2]", "started=99999999999", "uncertain_since=0"))
	f.Add("", "", join("state=\x00", "kind=\xff\xfe", "error=\n\r", "args=null"))
	f.Add("q", "j5", []byte{})
	f.Fuzz(func(t *testing.T, q, id string, data []byte) {
		h := hashFrom(data)
		r := recordFrom(q, id, h)
		if r == nil {
			t.Fatal("nil record")
		}
		if r.ID != id || r.Queue != q {
			t.Fatalf("identity changed: got (%q, %q), want (%q, %q)", r.Queue, r.ID, q, id)
		}
		if !json.Valid(r.Args) {
			t.Fatalf("Args are not JSON: %q", r.Args)
		}
		if h["op"] != "" && r.OperationID != h["op"] || h["op"] == "" && r.OperationID != id {
			t.Fatalf("operation id %q from field %q and id %q", r.OperationID, h["op"], id)
		}
		if r.RunAt.IsZero() && !r.Created.IsZero() {
			t.Fatalf("run_at left zero although created is %v", r.Created)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("record of a corrupt hash cannot be shown: %v\nfields %q", err, h)
		}
	})
}
