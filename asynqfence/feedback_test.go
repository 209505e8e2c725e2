package asynqfence_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/hibiken/asynq"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// Storage holds a token for the job the ledger never minted (one a Redis
// failover lost). The first delivery is refused; the bridge raises the
// job's next token above storage's mark, so asynq's retry is accepted.
func TestBridgeRaisesTheTokenAboveStorage(t *testing.T) {
	store, err := redisfence.New(redistest.Start(t, redistest.Options{}).Client(), redisfence.Config{Namespace: "store"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lost := lease.Token(3) << 52 // three fencing epochs above any clock-based token of epoch 0
	if err := store.Apply(ctx, fence.Fence{Resource: jobs.LeaseResource("s1", ""), Token: lost, Owner: "lost", OperationID: "lost-op"},
		redisfence.RPush(store.DataKey(jobs.LeaseResource("s1", ""), "log"), "lost")); err != nil {
		t.Fatal(err)
	}
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("pay", func(ctx context.Context, _ *asynq.Task) error {
			f, _ := fence.FromContext(ctx)
			return store.Apply(ctx, f, redisfence.RPush(store.DataKey(f.Resource, "log"), f.Token.String()))
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("pay", []byte(`{}`)), asynq.TaskID("s1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	if err := p.next(); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("first delivery: want the storage refusal, got %v", err)
	}
	if err := p.next(); err != nil {
		t.Fatalf("the retry after the raise: %v", err)
	}
	if rec := p.record("s1"); rec.State != jobs.Succeeded || rec.Attempts != 2 || rec.Token != lost+1 {
		t.Fatalf("record %+v: want succeeded on attempt 2 with token %d", rec, lost+1)
	}
}

// A storage that refuses every delivery with a mark near 2^64 (buggy or
// hostile) must not raise the job's token to it, where no token is left to
// mint: the mark is not fed back and the job's tokens stay clock-based.
func TestBridgeIgnoresAnImplausibleStorageMark(t *testing.T) {
	p := startInProcess(t, func(mux *asynq.ServeMux) {
		mux.HandleFunc("pay", func(ctx context.Context, _ *asynq.Task) error {
			f, _ := fence.FromContext(ctx)
			return &fence.StaleError{Fence: f, StoredToken: math.MaxUint64 - 1, StoredOwner: "hostile"}
		})
	})
	if _, err := p.client.Enqueue(asynq.NewTask("pay", []byte(`{}`)), asynq.TaskID("h1"), asynq.MaxRetry(3)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := p.next(); !errors.Is(err, fence.ErrStale) {
			t.Fatalf("delivery %d: want the storage refusal, got %v", i+1, err)
		}
	}
	if rec := p.record("h1"); rec.Attempts != 2 || rec.Token >= 1<<56 {
		t.Fatalf("record %+v: want 2 attempts with clock-based tokens", rec)
	}
}
