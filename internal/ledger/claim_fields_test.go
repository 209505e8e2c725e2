package ledger_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// TestClaimReadsEveryShapeOfOptionalFields: a claim reads a job's optional
// fields by the shortest path its field count allows (one optional field:
// a group, run_at, headers, a timeout or a resource read together), and
// hands over the same values whichever path it took, in a queue with and
// without fair groups.
func TestClaimReadsEveryShapeOfOptionalFields(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "shapes"})
	hdr := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	shapes := []struct {
		name string
		job  ledger.NewJob
	}{
		{"plain", ledger.NewJob{}},
		{"delayed", ledger.NewJob{Delay: -time.Millisecond}},
		{"headers", ledger.NewJob{Headers: hdr}},
		{"timeout", ledger.NewJob{Timeout: 30 * time.Second}},
		{"resource", ledger.NewJob{Resource: "printer"}},
		{"op", ledger.NewJob{OperationID: "op with spaces"}},
		{"grouped", ledger.NewJob{Group: "acme"}},
		{"everything", ledger.NewJob{Delay: -time.Millisecond, Headers: hdr, Timeout: time.Minute, Resource: "printer",
			OperationID: "op with spaces too", Group: "acme"}},
	}
	for _, q := range []string{"ungrouped", "grouped"} {
		want := map[string]ledger.NewJob{}
		for _, s := range shapes {
			if s.job.Group != "" && q == "ungrouped" {
				continue
			}
			j := s.job
			j.ID, j.Kind, j.Queue, j.Payload, j.MaxRetries = q+"-"+s.name, "k", q, []byte(`{}`), 3
			if _, err := l.Insert(ctx, []*ledger.NewJob{&j}); err != nil {
				t.Fatalf("%s: %v", j.ID, err)
			}
			want[j.ID] = j
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Jobs) != len(want) {
			t.Fatalf("%s: claimed %d of %d (dropped %v)", q, len(r.Jobs), len(want), r.Dropped)
		}
		for _, c := range r.Jobs {
			w := want[c.ID]
			op := w.OperationID
			if op == "" {
				op = c.ID
			}
			if c.Resource != w.Resource || c.Timeout != w.Timeout || !maps.Equal(c.Headers, w.Headers) || c.OperationID != op ||
				c.Attempt != 1 || c.MaxRetries != 3 || string(c.Payload) != `{}` || c.Kind != "k" {
				t.Errorf("%s claimed as %+v; enqueued %+v", c.ID, c, w)
			}
		}
	}
}
