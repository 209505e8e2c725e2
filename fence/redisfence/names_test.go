package redisfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/namegen"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// FuzzKeysShareASlot: for any operation id and any resource, the keys one
// script touches share a hash slot: the operation's index and claims
// keys, and the resource's high-water, effect and data keys.
func FuzzKeysShareASlot(f *testing.F) {
	for _, n := range namegen.EdgeCases {
		f.Add(n, "acct:"+n)
	}
	s, err := redisfence.New(redis.NewClient(&redis.Options{}), redisfence.Config{Namespace: "fq"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, op, resource string) {
		if op == "" {
			return
		}
		if a, b := redisfence.Slot(s.IndexKey(op)), redisfence.Slot(s.ClaimsKey(op)); a != b {
			t.Fatalf("op %q: index key %q in slot %d, claims key %q in slot %d", op, s.IndexKey(op), a, s.ClaimsKey(op), b)
		}
		if resource == "" || strings.ContainsAny(resource, "{}") { // refused by every write
			return
		}
		hw := redisfence.Slot(s.HighWaterKey(resource))
		for _, k := range []string{s.EffectKey(resource, op), s.DataKey(resource, op)} {
			if got := redisfence.Slot(k); got != hw {
				t.Fatalf("resource %q, op %q: %q in slot %d, high-water key in %d", resource, op, k, got, hw)
			}
		}
	})
}

// testClusterGeneratedNames applies, guards and looks up generated
// operation ids and resources on a Cluster: every write either works
// (never CROSSSLOT) or is refused as invalid before anything is written,
// and the slots computed here are the server's.
func testClusterGeneratedNames(t *testing.T, c *redis.ClusterClient) {
	ctx := t.Context()
	r := namegen.Rand(t)
	s := newStore(t, c, redisfence.Config{})
	ops := namegen.Names(r, 150, 8)
	tok := lease.Token(1)
	seen := map[string]bool{}
	for i, op := range ops {
		if op == "" || seen[op] {
			continue
		}
		seen[op] = true
		for _, k := range []string{s.IndexKey(op), s.ClaimsKey(op)} {
			if want, err := c.ClusterKeySlot(ctx, k).Result(); err != nil || int64(redisfence.Slot(k)) != want {
				t.Fatalf("Slot(%q) = %d, server says %d (%v)", k, redisfence.Slot(k), want, err)
			}
		}
		res := ops[(i*7+3)%len(ops)]
		tok++
		f := fz(res, tok, "w", op)
		err := s.Apply(ctx, f, redisfence.IncrBy(s.DataKey(res, "n"), 1))
		if res == "" || strings.ContainsAny(res, "{}") {
			if !errors.Is(err, fence.ErrInvalid) {
				t.Fatalf("resource %q (a brace splits its tag): Apply = %v, want ErrInvalid", res, err)
			}
			if _, err := c.Get(ctx, s.IndexKey(op)).Result(); !errors.Is(err, redis.Nil) {
				t.Fatalf("a refused Apply of %q bound it: %v", op, err)
			}
			res = "acct:" + strings.NewReplacer("{", "(", "}", ")").Replace(res)
			f.Resource = res
			err = s.Apply(ctx, f, redisfence.IncrBy(s.DataKey(res, "n"), 1))
		}
		if err != nil {
			t.Fatalf("Apply(resource %q, op %q): %v", res, op, err)
		}
		if rec, ok, err := s.Applied(ctx, op); err != nil || !ok || rec.Resource != res || rec.Token != tok {
			t.Fatalf("Applied(%q) = %+v %v %v, want applied on %q with token %d", op, rec, ok, err, res, tok)
		}
		// The same operation on another resource: refused with the record,
		// through the claim's other-resource path.
		other := "other:" + strings.NewReplacer("{", "(", "}", ")").Replace(op)
		tok++
		var ae *fence.AlreadyAppliedError
		if err := s.Apply(ctx, fz(other, tok, "w", op)); !errors.As(err, &ae) || ae.Record.Resource != res {
			t.Fatalf("op %q again on %q: %v, want already applied on %q", op, other, err, res)
		}
		// Guard a second operation on the same resource, then fence it.
		op2 := op + "/guarded"
		tok++
		if err := s.Guard(ctx, fz(res, tok, "w", op2), func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Guard(resource %q, op %q): %v", res, op2, err)
		}
		if _, ok, err := s.Applied(ctx, op2); err != nil || !ok {
			t.Fatalf("Applied(%q) after Guard: %v %v", op2, ok, err)
		}
		tok++
		if err := s.FenceOnAcquire(ctx, fz(res, tok, "w2", "")); err != nil {
			t.Fatalf("FenceOnAcquire(%q): %v", res, err)
		}
	}
}

// TestLegacyBindingOfBraceLedOperationIDs: an operation id starting with
// "}" that a single Redis bound under the key layout before the digest tag
// (<ns>:fence:opindex:{<op id>}) is still found by Applied and still
// refuses a write of it on another resource.
func TestLegacyBindingOfBraceLedOperationIDs(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	const op = "}x{"
	legacy := s.Namespace() + ":fence:opindex:{" + op + "}"
	if legacy == s.IndexKey(op) {
		t.Fatalf("index key %q did not change", legacy)
	}
	if err := c.Set(ctx, legacy, "acct:A", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.HSet(ctx, s.EffectKey("acct:A", op), "state", "applied", "resource", "acct:A", "operation_id", op,
		"token", "5", "owner", "w", "applied_us", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := s.Applied(ctx, op); err != nil || !ok || rec.Resource != "acct:A" || rec.Token != 5 {
		t.Fatalf("Applied = %+v %v %v, want the legacy record", rec, ok, err)
	}
	var ae *fence.AlreadyAppliedError
	if err := s.Apply(ctx, fz("acct:B", 9, "w", op)); !errors.As(err, &ae) || ae.Record.Resource != "acct:A" {
		t.Fatalf("a write on another resource: %v, want already applied on acct:A", err)
	}
	if n, err := c.Exists(ctx, s.IndexKey(op)).Result(); err != nil || n != 0 {
		t.Fatalf("the refused write bound the new key: %d %v", n, err)
	}
	// On its own resource the write proceeds to the effect record.
	if err := s.Apply(ctx, fz("acct:A", 9, "w", op)); !errors.As(err, &ae) || ae.Record.Token != 5 {
		t.Fatalf("a write on the bound resource: %v, want already applied with token 5", err)
	}
}
