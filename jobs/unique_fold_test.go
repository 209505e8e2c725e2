package jobs_test

import (
	"context"
	"testing"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestUniqueFieldsMatchKeysAsDecoding: a unique field is looked up in
// raw args as the handler's decoding finds it: a key differing only in
// case ("Customer", "CUSTOMER" for field customer) is that field, and of
// several the last one wins. Raw jobs of two customers written that way
// are two jobs (each used to count as null, the second deduplicated to the
// first: a job lost), and one of them is a duplicate of the typed job of
// its customer.
func TestUniqueFieldsMatchKeysAsDecoding(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	byCustomer := jobs.Unique(jobs.UniqueOpts{ByFields: []string{"customer"}})
	raw := func(payload string) *jobs.Result {
		t.Helper()
		res, err := c.EnqueueRaw(ctx, "sync", []byte(payload), byCustomer, jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	acme := raw(`{"Customer":"acme"}`)
	beta := raw(`{"CUSTOMER":"beta"}`)
	if beta.Deduplicated {
		t.Fatalf("raw job of customer beta deduplicated to %s (customer acme): its customer was read as null", beta.JobID)
	}
	if typed := enqueued(t, c, syncArgs{Customer: "acme", Scope: "x"}, byCustomer); !typed.Deduplicated || typed.JobID != acme.JobID {
		t.Fatalf("typed job of customer acme: %+v, want deduplicated to the raw job %s", typed, acme.JobID)
	}
	// the handler decodes the last matching key: beta here
	if last := raw(`{"customer":"acme","Customer":"beta"}`); !last.Deduplicated || last.JobID != beta.JobID {
		t.Fatalf("raw job decoding as customer beta: %+v, want deduplicated to %s", last, beta.JobID)
	}
	if none := raw(`{"scope":"x"}`); none.Deduplicated {
		t.Fatalf("a job without the field was deduplicated to %s", none.JobID)
	}
}
