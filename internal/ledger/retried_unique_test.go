package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestRetriedEnqueueDeduplicatedByUniqueKeyIsNotRecorded: the retry of an
// enqueue whose outcome was unknown (here: never sent) finds another job
// holding its unique key. Its own job was never created, so the client
// records nothing: a later loss does not bring the other job back under
// this call's operation and arguments.
func TestRetriedEnqueueDeduplicatedByUniqueKeyIsNotRecorded(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	ctx := context.Background()
	const q = "default"
	client := ledger.New(rdb, ledger.Config{Namespace: ns, Name: "client", Recent: 100})
	other := ledger.New(rdb, ledger.Config{Namespace: ns, Name: "other"})
	unique := func(op, payload string) *ledger.NewJob {
		j := newJob(q, op)
		j.Payload = []byte(payload)
		j.Unique = &ledger.Unique{Digest: "d", States: []ledger.State{ledger.Pending, ledger.Running}}
		return j
	}

	mine := unique("mine", `{"from":"client"}`)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := client.Insert(cancelled, []*ledger.NewJob{mine}); !errors.Is(err, ledger.ErrEnqueueUnknown) {
		t.Fatalf("enqueue with its context cancelled: %v, want ErrEnqueueUnknown", err)
	}
	if _, err := client.Get(ctx, q, mine.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the unsent enqueue wrote its job: %v", err)
	}
	held := unique("held", `{"from":"other"}`)
	if ins, err := other.Insert(ctx, []*ledger.NewJob{held}); err != nil || ins[0].Deduplicated {
		t.Fatalf("the other job: %+v, %v", ins, err)
	}
	ins, err := client.Insert(ctx, []*ledger.NewJob{mine})
	if err != nil || !ins[0].Deduplicated || ins[0].JobID != held.ID {
		t.Fatalf("the retry: %+v, %v; want deduplicated to %s", ins, err, held.ID)
	}
	kept := newJob(q, "kept")
	if _, err := client.Insert(ctx, []*ledger.NewJob{kept}); err != nil {
		t.Fatal(err)
	}

	srv.Restart() // no persistence: every key is gone
	res, err := client.Resubmit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Checked != 1 || res[0].Restored != 1 {
		t.Fatalf("resubmitted %+v, want only the client's own job", res)
	}
	if rec, err := client.Get(ctx, q, held.ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("the other client's job came back with this client's enqueue: %+v, %v", rec, err)
	}
	if rec, err := client.Get(ctx, q, kept.ID); err != nil || rec.State != jobs.Pending {
		t.Fatalf("the client's own job after re-submission: %+v, %v", rec, err)
	}
}
