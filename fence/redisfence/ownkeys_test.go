package redisfence_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// The store's own keys (the high-water mark, effect records, the
// operation index) share the resource's hash slot, but no mutation may
// write them: deleting or overwriting the mark would let a lower token
// write after a higher one, and a forged effect record would make an
// operation look applied.
func TestOpsOnTheStoresOwnKeysRefused(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	r := "acct:1"
	if err := s.Apply(ctx, fz(r, 10, "new", "op-new"), redisfence.Set(s.DataKey(r, "v"), "new")); err != nil {
		t.Fatal(err)
	}
	for i, op := range []redisfence.Op{
		redisfence.Del(s.HighWaterKey(r)),
		redisfence.HSet(s.HighWaterKey(r), map[string]string{"token": "1"}),
		redisfence.Del(s.EffectKey(r, "op-new")),
		redisfence.HSet(s.EffectKey(r, "op-other"), map[string]string{"state": "applied"}),
		redisfence.Set(s.IndexKey(r), r), // an operation id equal to the resource shares its slot
	} {
		if err := s.Apply(ctx, fz(r, 11, "new", "op-x"), op); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("case %d (%s): err = %v, want ErrInvalid", i, op, err)
		}
	}
	// Whatever the cases above did, a lower token must still be refused.
	if err := s.Apply(ctx, fz(r, 5, "old", "op-old"), redisfence.Set(s.DataKey(r, "v"), "stale")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token 5 after token 10: err = %v, want ErrStale", err)
	}
	if v := c.Get(ctx, s.DataKey(r, "v")).Val(); v != "new" {
		t.Fatalf("value %q, want the newer write's", v)
	}
}

// The leases' keys share their resource's hash slot, and a queue's keys
// share it when the queue is named like the resource: no mutation may
// write them either. Overwriting the lease key would hand the resource to
// a forged holder or rewind its token counter, so a later lease would mint
// a token storage already saw.
func TestOpsOnLeaseAndQueueKeysRefused(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	ns := redistest.Namespace(t)
	s := newStore(t, c, redisfence.Config{Namespace: ns})
	m := lease.NewManager(c, lease.Config{Namespace: ns})
	r := "default"
	l, err := m.Acquire(ctx, r, "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range []redisfence.Op{
		redisfence.Set(m.Key(r), "1 0 "),
		redisfence.Del(m.Key(r)),
		redisfence.HSet(m.Key(r)+":clock", map[string]string{"max": "0"}),
		redisfence.Del(ns + ":epoch"),
		redisfence.HSet(ns+":{"+r+"}:job:x", map[string]string{"state": "succeeded"}),
	} {
		err := s.Apply(ctx, fz(r, l.Token, "holder", fmt.Sprint("op-", i)), op)
		if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "fencedq's own keys") {
			t.Errorf("case %d (%s): err = %v, want ErrInvalid naming fencedq's own keys", i, op, err)
		}
	}
	if h, err := m.Holder(ctx, r); err != nil || h == nil || h.Owner != "holder" || h.Token != l.Token {
		t.Fatalf("holder %+v (%v), want the lease acquired", h, err)
	}
	if err := m.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	next, err := m.Acquire(ctx, r, "next", time.Minute)
	if err != nil || next.Token <= l.Token {
		t.Fatalf("next lease %v (%v), want a token above %d", next, err, l.Token)
	}
	// The partition registry's change logs are tagged by <ns>:partitions.
	reg := ns + ":partitions"
	err = s.Apply(ctx, fz(reg, 1, "w", "op-reg"), redisfence.Del(reg+":{"+reg+"}:changes:q"))
	if !errors.Is(err, fence.ErrInvalid) || !strings.Contains(err.Error(), "fencedq's own keys") {
		t.Errorf("partition change log: err = %v, want ErrInvalid naming fencedq's own keys", err)
	}
	// A data key in the slot is still written.
	if err := s.Apply(ctx, fz(r, next.Token, "next", "op-data"), redisfence.Set(s.DataKey(r, "v"), "x")); err != nil {
		t.Fatal(err)
	}
}
