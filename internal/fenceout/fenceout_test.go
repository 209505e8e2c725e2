package fenceout_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/fenceout"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// TestFenceOutRefusesOnlyTheUncertainAttempt: once Attempt returns, a
// write with the uncertain attempt's fence is refused as stale, whether the
// attempt already wrote with its token, holds its resource's lease still,
// or another job holds that lease now; the current holder's writes, and a
// later attempt's, are accepted. A log that cannot raise marks is left
// alone.
func TestFenceOutRefusesOnlyTheUncertainAttempt(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	store, err := redisfence.New(rdb, redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	leases := lease.NewManager(rdb, lease.Config{Namespace: ns})
	const by = "reconciler:w1"
	write := func(f fence.Fence, op string) error {
		f.OperationID = op
		return store.Apply(ctx, f, redisfence.Set("{"+f.Resource+"}:k", op))
	}
	mustStale := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fence.ErrStale) {
			t.Fatalf("%s: %v, want fence.ErrStale", what, err)
		}
	}
	mustOK := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v, want accepted", what, err)
		}
	}

	t.Run("job resource, written with its token", func(t *testing.T) {
		rec := &jobs.Record{ID: "j1", Token: 1000, Owner: "w0", OperationID: "op-j1"}
		zombie := fence.Fence{Resource: rec.LeaseResource(), Token: rec.Token, Owner: "w0/j1"}
		mustOK("the attempt's first write", write(zombie, "first"))
		mustOK("Attempt", fenceout.Attempt(ctx, rec, store, nil, by))
		mustStale("the attempt's write after Attempt", write(zombie, "op-j1"))
		mustOK("a later attempt's write", write(fence.Fence{Resource: zombie.Resource, Token: 2000, Owner: "w1/j1"}, "op-j1"))
		mustOK("Attempt again, the mark above", fenceout.Attempt(ctx, rec, store, nil, by))
	})

	t.Run("named resource, the attempt still holds the lease", func(t *testing.T) {
		rec := &jobs.Record{ID: "j2", Resource: "acct:2", Owner: "w0", OperationID: "op-j2"}
		l, err := leases.Acquire(ctx, rec.Resource, "w0/j2", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		zombie := fence.Fence{Resource: rec.Resource, Token: l.Token, Owner: l.Owner}
		mustOK("the attempt's first write", write(zombie, "first-2"))
		mustOK("Attempt", fenceout.Attempt(ctx, rec, store, leases, by))
		mustStale("the attempt's write after Attempt", write(zombie, "op-j2"))
	})

	t.Run("named resource, another job holds the lease", func(t *testing.T) {
		rec := &jobs.Record{ID: "j3", Resource: "acct:3", Owner: "w0", OperationID: "op-j3"}
		old, err := leases.Acquire(ctx, rec.Resource, "w0/j3", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := leases.Release(ctx, old); err != nil { // as if it expired
			t.Fatal(err)
		}
		cur, err := leases.Acquire(ctx, rec.Resource, "w1/j4", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		mustOK("Attempt", fenceout.Attempt(ctx, rec, store, leases, by))
		mustStale("the attempt's write after Attempt", write(fence.Fence{Resource: rec.Resource, Token: old.Token, Owner: old.Owner}, "op-j3"))
		mustOK("the holder's write", write(fence.Fence{Resource: rec.Resource, Token: cur.Token, Owner: cur.Owner}, "op-j4"))
	})

	t.Run("named resource, free", func(t *testing.T) {
		rec := &jobs.Record{ID: "j5", Resource: "acct:5", Owner: "w0", OperationID: "op-j5"}
		old, err := leases.Acquire(ctx, rec.Resource, "w0/j5", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := leases.Release(ctx, old); err != nil {
			t.Fatal(err)
		}
		mustOK("Attempt", fenceout.Attempt(ctx, rec, store, leases, by))
		mustStale("the attempt's write after Attempt", write(fence.Fence{Resource: rec.Resource, Token: old.Token, Owner: old.Owner}, "op-j5"))
		next, err := leases.Acquire(ctx, rec.Resource, "w1/j6", time.Minute)
		if err != nil {
			t.Fatalf("the resource's lease after Attempt: %v, want free (Attempt released its own)", err)
		}
		mustOK("the next holder's write", write(fence.Fence{Resource: rec.Resource, Token: next.Token, Owner: next.Owner}, "op-j6"))
	})

	t.Run("a log that cannot raise marks", func(t *testing.T) {
		rec := &jobs.Record{ID: "j7", Token: 1000, Owner: "w0", OperationID: "op-j7"}
		fr, _ := fence.EffectLog(logOnly{store}).(fence.Fencer) // as the resolver finds it: none
		if err := fenceout.Attempt(ctx, rec, fr, nil, by); err != nil {
			t.Fatalf("Attempt: %v, want nothing done", err)
		}
		if tok, _, err := store.HighWater(ctx, rec.LeaseResource()); err != nil || tok != 0 {
			t.Fatalf("mark %d (%v), want none", tok, err)
		}
	})
}

// logOnly is an effect log that is not a fence.Fencer.
type logOnly struct{ s *redisfence.Store }

func (l logOnly) Applied(ctx context.Context, op string) (fence.Effect, bool, error) {
	return l.s.Applied(ctx, op)
}
