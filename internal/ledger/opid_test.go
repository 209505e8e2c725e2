package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestOperationIDNamesTheJob: an operation id of letters, digits and ._-
// names the job ('=<queue>=<op>') with no operation key; enqueueing it
// again is deduplicated, and every reader (record, claim, lookup by
// operation, prefix search) reports the operation id. An operation id
// with other characters keeps a random id and an operation key, and an
// operation key of the earlier layout still deduplicates.
func TestOperationIDNamesTheJob(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	f := newFixture(t, srv.Client())

	res, err := f.c.Enqueue(f.ctx, noteArgs{Text: "a"}, jobs.OperationID("charge-7.a_b"))
	if err != nil || res.JobID != "=default=charge-7.a_b" || res.Deduplicated || res.OperationID != "charge-7.a_b" {
		t.Fatalf("enqueue: %+v, %v; want job =default=charge-7.a_b", res, err)
	}
	if n, _ := f.rdb.Exists(f.ctx, f.l.OperationKey(f.q, "charge-7.a_b")).Result(); n != 0 {
		t.Fatal("an operation key was written for an operation id that names its job")
	}
	again, err := f.c.Enqueue(f.ctx, noteArgs{Text: "b"}, jobs.OperationID("charge-7.a_b"))
	if err != nil || !again.Deduplicated || again.JobID != res.JobID {
		t.Fatalf("second enqueue: %+v, %v; want deduplicated to %s", again, err, res.JobID)
	}
	rec, err := f.l.Get(f.ctx, f.q, res.JobID)
	if err != nil || rec.OperationID != "charge-7.a_b" {
		t.Fatalf("record: %+v, %v", rec, err)
	}
	if h, _ := f.rdb.HGetAll(f.ctx, f.l.JobKey(f.q, res.JobID)).Result(); h["op"] != "" {
		t.Fatalf("record has an op field %q: the id names it", h["op"])
	}
	if found, err := f.l.FindByOperation(f.ctx, "charge-7.a_b"); err != nil || found.ID != res.JobID {
		t.Fatalf("FindByOperation: %+v, %v", found, err)
	}
	var searched []string
	if _, err := f.l.SearchPrefix(f.ctx, "charge-", func(by string, r *ledger.Record) {
		searched = append(searched, by+" "+r.ID)
	}); err != nil || len(searched) != 1 || searched[0] != ledger.ByOperationIDPrefix+" "+res.JobID {
		t.Fatalf("SearchPrefix(charge-): %v, %v", searched, err)
	}
	claimed, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
	if err != nil || len(claimed.Jobs) != 1 || claimed.Jobs[0].OperationID != "charge-7.a_b" {
		t.Fatalf("claim: %+v, %v", claimed, err)
	}

	// other characters: a random id and an operation key
	colon, err := f.c.Enqueue(f.ctx, noteArgs{Text: "c"}, jobs.OperationID("order:7"))
	if err != nil || colon.JobID[0] == '=' {
		t.Fatalf("enqueue order:7: %+v, %v; want a random id", colon, err)
	}
	if id, _ := f.rdb.Get(f.ctx, f.l.OperationKey(f.q, "order:7")).Result(); id != colon.JobID {
		t.Fatalf("operation key of order:7 holds %q, want %s", id, colon.JobID)
	}
	if dup, err := f.c.Enqueue(f.ctx, noteArgs{Text: "d"}, jobs.OperationID("order:7")); err != nil || !dup.Deduplicated || dup.JobID != colon.JobID {
		t.Fatalf("second enqueue of order:7: %+v, %v", dup, err)
	}

	// an operation key of the earlier layout (a job enqueued before it)
	old := f.enqueue()
	if err := f.rdb.Set(f.ctx, f.l.OperationKey(f.q, "legacy-1"), old, 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, many := range []bool{false, true} {
		var got *jobs.Result
		if many {
			out, err := f.c.EnqueueMany(f.ctx, []jobs.Params{{Args: noteArgs{Text: "e"}, Options: []jobs.Option{jobs.OperationID("legacy-1")}}})
			if err != nil {
				t.Fatal(err)
			}
			got = out[0]
		} else if got, err = f.c.Enqueue(f.ctx, noteArgs{Text: "e"}, jobs.OperationID("legacy-1"), jobs.Unique(jobs.UniqueOpts{ByArgs: true})); err != nil {
			t.Fatal(err)
		}
		if !got.Deduplicated || got.JobID != old {
			t.Fatalf("enqueue of an operation id with a key of the earlier layout (many %v): %+v; want deduplicated to %s", many, got, old)
		}
	}
	if n, _ := f.rdb.Exists(f.ctx, f.l.JobKey(f.q, ledger.OpJobID(f.q, "legacy-1"))).Result(); n != 0 {
		t.Fatal("a job named by legacy-1 was created beside the earlier layout's")
	}
	// an id that would exceed 200 bytes: a random id and an operation key
	long := strings.Repeat("x", 200-len("=default="))
	if res, err := f.c.Enqueue(f.ctx, noteArgs{Text: "g"}, jobs.OperationID(long)); err != nil || res.JobID != "="+f.q+"="+long {
		t.Fatalf("enqueue of a %d-byte operation id: %+v, %v; want it named", len(long), res, err)
	}
	longer := long + "y"
	res2, err := f.c.Enqueue(f.ctx, noteArgs{Text: "h"}, jobs.OperationID(longer))
	if err != nil || res2.JobID[0] == '=' {
		t.Fatalf("enqueue of a %d-byte operation id: %+v, %v; want a random id", len(longer), res2, err)
	}
	if dup, err := f.c.Enqueue(f.ctx, noteArgs{Text: "h"}, jobs.OperationID(longer)); err != nil || !dup.Deduplicated || dup.JobID != res2.JobID {
		t.Fatalf("second enqueue of a %d-byte operation id: %+v, %v", len(longer), dup, err)
	}
	// the same operation id in another queue is another job, with another id
	other, err := f.c.Enqueue(f.ctx, noteArgs{Text: "f"}, jobs.OperationID("charge-7.a_b"), jobs.Queue("other"))
	if err != nil || other.Deduplicated || other.JobID != "=other=charge-7.a_b" {
		t.Fatalf("enqueue of charge-7.a_b in queue other: %+v, %v", other, err)
	}
}
