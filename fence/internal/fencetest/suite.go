// Package fencetest is the contract test suite every fence store runs.
//
// A store's tests build a [Harness] around a fresh store and call [Run].
// The suite checks the rules of package fence through the real server:
// higher tokens are accepted, lower ones (and equal tokens of another
// owner) are rejected leaving data and high-water mark unchanged, an
// operation id applies once even when sent concurrently, invalid fences
// write nothing, accepted tokens never decrease under concurrency, fence on
// acquire cuts off older holders, and the effect log answers for applied
// operations. An operation id names one effect across the whole store:
// sent again on another resource (by a job of another queue, say), it is
// reported already applied, with the record of the write that applied it.
package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/lease"
)

// Harness adapts one store to the suite. Every function works on the
// store the harness was built around.
type Harness struct {
	// Apply performs one fenced write for f: add delta to f.Resource's
	// counter and append f.Token to f.Resource's acceptance log, both in
	// the same atomic step as the fence check.
	Apply func(ctx context.Context, f fence.Fence, delta int64) error
	// Value returns resource's counter (0 when never written).
	Value func(ctx context.Context, resource string) (int64, error)
	// Log returns the tokens resource accepted, in acceptance order.
	Log func(ctx context.Context, resource string) ([]lease.Token, error)
	// FenceOnAcquire, HighWater and Applied call the store's methods.
	FenceOnAcquire func(ctx context.Context, f fence.Fence) error
	HighWater      func(ctx context.Context, resource string) (lease.Token, string, error)
	Applied        func(ctx context.Context, operationID string) (fence.Effect, bool, error)
	// Count returns how many durable records (rows or keys) exist in the
	// store's tables or namespace, data included.
	Count func(ctx context.Context) (int64, error)
}

// Run runs the contract suite; newHarness must return a harness over a
// fresh, empty store for each subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"HigherTokenAccepted", testHigherAccepted},
		{"LowerTokenRejected", testLowerRejected},
		{"EqualTokenSameOwner", testEqualSameOwner},
		{"EqualTokenOtherOwner", testEqualOtherOwner},
		{"SameOperationTwice", testSameOpTwice},
		{"SameOperationOtherResource", testSameOpOtherResource},
		{"SameOperationOtherResourceStale", testSameOpOtherResourceStale},
		{"RejectedOperationIDIsFree", testRejectedOpFree},
		{"ConcurrentSameOperationAcrossResources", testConcurrentSameOpAcross},
		{"InvalidFenceWritesNothing", testInvalid},
		{"ConcurrentSameOperation", testConcurrentSameOp},
		{"InterleavedTokensNeverDecrease", testInterleaved},
		{"FenceOnAcquire", testFenceOnAcquire},
		{"AppliedReports", testApplied},
		{"FullUint64Tokens", testLargeTokens},
		{"MadeUpTokensRefused", testMadeUpTokens},
		{"RefusalsNameNoHolder", testRefusalsNameNoHolder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newHarness(t))
		})
	}
}

func fz(resource string, tok lease.Token, owner, op string) fence.Fence {
	return fence.Fence{Resource: resource, Token: tok, Owner: owner, OperationID: op}
}

type state struct {
	value int64
	log   []lease.Token
	hwTok lease.Token
	hwOwn string
}

func snapshot(t *testing.T, h Harness, resource string) state {
	t.Helper()
	ctx := t.Context()
	var s state
	var err error
	if s.value, err = h.Value(ctx, resource); err != nil {
		t.Fatalf("Value: %v", err)
	}
	if s.log, err = h.Log(ctx, resource); err != nil {
		t.Fatalf("Log: %v", err)
	}
	if s.hwTok, s.hwOwn, err = h.HighWater(ctx, resource); err != nil {
		t.Fatalf("HighWater: %v", err)
	}
	return s
}

func mustApply(t *testing.T, h Harness, f fence.Fence, delta int64) {
	t.Helper()
	if err := h.Apply(t.Context(), f, delta); err != nil {
		t.Fatalf("Apply(%+v): %v", f, err)
	}
}

func wantUnchanged(t *testing.T, h Harness, resource string, before state) {
	t.Helper()
	after := snapshot(t, h, resource)
	if after.value != before.value || !slices.Equal(after.log, before.log) ||
		after.hwTok != before.hwTok || after.hwOwn != before.hwOwn {
		t.Fatalf("state changed by a rejected write:\nbefore %+v\nafter  %+v", before, after)
	}
}

func testHigherAccepted(t *testing.T, h Harness) {
	mustApply(t, h, fz("acct:1", 10, "a", "op-1"), 5)
	mustApply(t, h, fz("acct:1", 20, "b", "op-2"), 7)
	s := snapshot(t, h, "acct:1")
	if s.value != 12 || !slices.Equal(s.log, []lease.Token{10, 20}) || s.hwTok != 20 || s.hwOwn != "b" {
		t.Fatalf("after tokens 10 then 20: %+v", s)
	}
}

func testLowerRejected(t *testing.T, h Harness) {
	ctx := t.Context()
	mustApply(t, h, fz("acct:1", 20, "b", "op-1"), 1)
	before := snapshot(t, h, "acct:1")
	err := h.Apply(ctx, fz("acct:1", 19, "a", "op-2"), 100)
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("lower token: err = %v, want ErrStale", err)
	}
	var se *fence.StaleError
	if !errors.As(err, &se) || se.StoredToken != 20 || se.StoredOwner != "b" || se.Fence.Token != 19 {
		t.Fatalf("lower token: err = %#v, want *StaleError with stored (20, b)", err)
	}
	wantUnchanged(t, h, "acct:1", before)
	if _, ok, err := h.Applied(ctx, "op-2"); err != nil || ok {
		t.Fatalf("Applied(rejected op) = %v, %v; want not applied", ok, err)
	}
}

func testEqualSameOwner(t *testing.T, h Harness) {
	mustApply(t, h, fz("acct:1", 20, "b", "op-1"), 1)
	mustApply(t, h, fz("acct:1", 20, "b", "op-2"), 1)
	s := snapshot(t, h, "acct:1")
	if s.value != 2 || s.hwTok != 20 || s.hwOwn != "b" {
		t.Fatalf("equal token, same owner: %+v", s)
	}
}

func testEqualOtherOwner(t *testing.T, h Harness) {
	mustApply(t, h, fz("acct:1", 20, "b", "op-1"), 1)
	before := snapshot(t, h, "acct:1")
	err := h.Apply(t.Context(), fz("acct:1", 20, "impostor", "op-2"), 1)
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("equal token, other owner: err = %v, want ErrStale", err)
	}
	wantUnchanged(t, h, "acct:1", before)
}

func testSameOpTwice(t *testing.T, h Harness) {
	ctx := t.Context()
	f := fz("acct:1", 20, "b", "op-1")
	mustApply(t, h, f, 1)
	before := snapshot(t, h, "acct:1")
	for _, again := range []fence.Fence{f, fz("acct:1", 21, "c", "op-1")} {
		err := h.Apply(ctx, again, 1)
		if !errors.Is(err, fence.ErrAlreadyApplied) {
			t.Fatalf("same op id with %+v: err = %v, want ErrAlreadyApplied", again, err)
		}
		var ae *fence.AlreadyAppliedError
		if !errors.As(err, &ae) || ae.Record.Token != 20 || ae.Record.Owner != "b" ||
			ae.Record.OperationID != "op-1" || ae.Record.Resource != "acct:1" {
			t.Fatalf("same op id: err = %#v, want *AlreadyAppliedError for token 20 of b", err)
		}
		if ae.Fence != again {
			t.Fatalf("AlreadyAppliedError.Fence = %+v, want the refused write %+v", ae.Fence, again)
		}
		wantUnchanged(t, h, "acct:1", before)
	}
	if before.value != 1 {
		t.Fatalf("effect applied %d times, want once", before.value)
	}
}

func testInvalid(t *testing.T, h Harness) {
	ctx := t.Context()
	mustApply(t, h, fz("acct:1", 20, "b", "op-1"), 1)
	n0, err := h.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []fence.Fence{
		{},
		fz("", 30, "b", "op-2"),
		fz("acct:1", 0, "b", "op-2"),
		fz("acct:1", 30, "", "op-2"),
		fz("acct:1", 30, "b", ""),
		fz("acct:new", 0, "b", "op-3"),
		// Names no lease can have: an owner or a resource over the lease
		// package's bounds, refused before anything is written.
		fz("acct:1", 30, longOwner, "op-4"),
		fz("acct:new", 30, longOwner, "op-4"),
		fz(longResource, 30, "b", "op-4"),
		// An owner with a line break, which a lease refuses.
		fz("acct:1", 30, "b\nc", "op-4"),
		fz("acct:new", 30, "b\r", "op-4"),
	} {
		if err := h.Apply(ctx, f, 1); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("Apply(%s): err = %v, want ErrInvalid", clip(f), err)
		}
	}
	for _, f := range []fence.Fence{
		fz("acct:new", 0, "b", ""),
		fz("acct:1", 30, longOwner, ""),
		fz("acct:new", 30, longOwner, ""),
		fz(longResource, 30, "b", ""),
		fz("acct:new", 30, "b\nc", ""),
	} {
		if err := h.FenceOnAcquire(ctx, f); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("FenceOnAcquire(%s): err = %v, want ErrInvalid", clip(f), err)
		}
	}
	// A read of no resource is refused as Applied refuses no operation id,
	// not answered with a mark nothing can hold; so is one of a resource no
	// write can name.
	for _, r := range []string{"", longResource} {
		if _, _, err := h.HighWater(ctx, r); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("HighWater(%.60q): err = %v, want ErrInvalid", r, err)
		}
	}
	n1, err := h.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n1 != n0 {
		t.Fatalf("invalid fences left a trace: %d records before, %d after", n0, n1)
	}
	s := snapshot(t, h, "acct:1")
	if s.value != 1 || s.hwTok != 20 {
		t.Fatalf("state after invalid fences: %+v", s)
	}
	// Names at the bounds are a lease's, and apply.
	mustApply(t, h, fz("acct:1", 30, longOwner[1:], "op-5"), 1)
	if tok, owner, err := h.HighWater(ctx, "acct:1"); err != nil || tok != 30 || owner != longOwner[1:] {
		t.Fatalf("HighWater after an owner of %d bytes = %d, %.20q, %v", lease.MaxOwnerLen, tok, owner, err)
	}
}

// clip describes f with its names cut short.
func clip(f fence.Fence) string {
	c := func(s string) string {
		if len(s) > 20 {
			return fmt.Sprintf("%.20q... (%d bytes)", s, len(s))
		}
		return strconv.Quote(s)
	}
	return fmt.Sprintf("resource %s, token %d, owner %s, operation %s", c(f.Resource), f.Token, c(f.Owner), c(f.OperationID))
}

// longOwner and longResource are one byte over the lease package's bounds.
var (
	longOwner    = strings.Repeat("o", lease.MaxOwnerLen+1)
	longResource = strings.Repeat("r", lease.MaxResourceLen+1)
)

func testConcurrentSameOp(t *testing.T, h Harness) {
	ctx := t.Context()
	f := fz("acct:1", 20, "b", "op-same")
	const n = 50
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = h.Apply(ctx, f, 1)
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for _, err := range errs {
		switch {
		case err == nil:
			applied++
		case errors.Is(err, fence.ErrAlreadyApplied):
		default:
			t.Errorf("concurrent apply: unexpected error %v", err)
		}
	}
	if applied != 1 {
		t.Fatalf("%d of %d concurrent applies succeeded, want exactly 1", applied, n)
	}
	if s := snapshot(t, h, "acct:1"); s.value != 1 || len(s.log) != 1 {
		t.Fatalf("effect applied %d times (log %v), want once", s.value, s.log)
	}
}

func testInterleaved(t *testing.T, h Harness) {
	ctx := t.Context()
	const workers, each = 16, 12
	type result struct {
		tok lease.Token
		err error
	}
	results := make([][]result, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range each {
				// Tokens rise over the rounds but overlap between workers.
				tok := lease.Token(1 + 3*i + r.IntN(8))
				// One owner per token: tokens are never handed to two owners.
				f := fz("acct:hot", tok, fmt.Sprintf("owner-%d", tok), fmt.Sprintf("op-%d-%d", w, i))
				results[w] = append(results[w], result{tok, h.Apply(ctx, f, 1)})
			}
		})
	}
	wg.Wait()
	var accepted []lease.Token
	for _, rs := range results {
		for _, r := range rs {
			switch {
			case r.err == nil:
				accepted = append(accepted, r.tok)
			case errors.Is(r.err, fence.ErrStale):
			default:
				t.Fatalf("interleaved apply: unexpected error %v", r.err)
			}
		}
	}
	s := snapshot(t, h, "acct:hot")
	for i := 1; i < len(s.log); i++ {
		if s.log[i] < s.log[i-1] {
			t.Fatalf("accepted tokens decreased at %d: %v", i, s.log)
		}
	}
	slices.Sort(accepted)
	if !slices.Equal(accepted, s.log) {
		t.Fatalf("acceptance log %v differs from the writes that succeeded %v", s.log, accepted)
	}
	if s.value != int64(len(accepted)) || len(accepted) == 0 || s.hwTok != accepted[len(accepted)-1] {
		t.Fatalf("value %d, high-water %d; accepted %v", s.value, s.hwTok, accepted)
	}
	t.Logf("%d of %d writes accepted; high-water %d", len(accepted), workers*each, s.hwTok)
}

func testFenceOnAcquire(t *testing.T, h Harness) {
	ctx := t.Context()
	mustApply(t, h, fz("acct:1", 10, "old", "op-1"), 1)
	if err := h.FenceOnAcquire(ctx, fz("acct:1", 20, "new", "")); err != nil {
		t.Fatalf("FenceOnAcquire(20): %v", err)
	}
	if tok, owner, _ := h.HighWater(ctx, "acct:1"); tok != 20 || owner != "new" {
		t.Fatalf("high-water after fence on acquire = (%d, %q), want (20, new)", tok, owner)
	}
	before := snapshot(t, h, "acct:1")
	if err := h.Apply(ctx, fz("acct:1", 10, "old", "op-2"), 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("old holder after fence on acquire: err = %v, want ErrStale", err)
	}
	wantUnchanged(t, h, "acct:1", before)
	if err := h.FenceOnAcquire(ctx, fz("acct:1", 15, "older", "")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("FenceOnAcquire(15) after 20: err = %v, want ErrStale", err)
	}
	if err := h.FenceOnAcquire(ctx, fz("acct:1", 20, "new", "")); err != nil {
		t.Fatalf("FenceOnAcquire repeated by the same holder: %v", err)
	}
	wantUnchanged(t, h, "acct:1", before)
	mustApply(t, h, fz("acct:1", 20, "new", "op-3"), 1)
	if _, ok, _ := h.Applied(ctx, "op-2"); ok {
		t.Fatal("rejected op-2 reported applied")
	}
	// A resource fenced before its first write.
	if err := h.FenceOnAcquire(ctx, fz("acct:2", 5, "x", "")); err != nil {
		t.Fatal(err)
	}
	if err := h.Apply(ctx, fz("acct:2", 4, "y", "op-4"), 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("lower token on a resource fenced on acquire: err = %v, want ErrStale", err)
	}
}

func testApplied(t *testing.T, h Harness) {
	ctx := t.Context()
	mustApply(t, h, fz("acct:7", 77, "w-7", "job-7/step-1"), 1)
	rec, ok, err := h.Applied(ctx, "job-7/step-1")
	want := fence.Effect{OperationID: "job-7/step-1", Resource: "acct:7", Token: 77, Owner: "w-7"}
	if err != nil || !ok || rec != want {
		t.Fatalf("Applied = %+v, %v, %v; want %+v", rec, ok, err, want)
	}
	if rec, ok, err := h.Applied(ctx, "never-sent"); err != nil || ok {
		t.Fatalf("Applied(unknown) = %+v, %v, %v; want not applied", rec, ok, err)
	}
}

// testLargeTokens: tokens of the high epochs, the top bit set, compare as
// 64-bit integers (never as floats or signed).
func testLargeTokens(t *testing.T, h Harness) {
	ctx := t.Context()
	now := time.Now().UnixMicro()
	big := lease.Token(epoch.Floor(1<<(63-epoch.Shift), now) + 5)
	top := lease.Token(epoch.Floor(epoch.Max, now))
	mustApply(t, h, fz("acct:1", big, "a", "op-1"), 1)
	if tok, _, err := h.HighWater(ctx, "acct:1"); err != nil || tok != big {
		t.Fatalf("HighWater = %d, %v; want %d", tok, err, big)
	}
	before := snapshot(t, h, "acct:1")
	if err := h.Apply(ctx, fz("acct:1", big-1, "a", "op-2"), 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("token just below a 64-bit token: err = %v, want ErrStale", err)
	}
	if err := h.Apply(ctx, fz("acct:1", 1<<62, "a", "op-3"), 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("shorter token below a 64-bit token: err = %v, want ErrStale", err)
	}
	wantUnchanged(t, h, "acct:1", before)
	mustApply(t, h, fz("acct:1", top, "a", "op-4"), 1)
	if rec, ok, err := h.Applied(ctx, "op-4"); err != nil || !ok || rec.Token != top {
		t.Fatalf("Applied(op-4) = %+v, %v, %v", rec, ok, err)
	}
	if s := snapshot(t, h, "acct:1"); s.hwTok != top || !slices.Equal(s.log, []lease.Token{big, top}) {
		t.Fatalf("after the last epoch's token: %+v", s)
	}
}

// testMadeUpTokens: a token no lease mints, its time part more than a
// year past the clock in any epoch (2^64-1, say), would become the
// resource's mark for good, every later holder refused as stale; Apply
// and FenceOnAcquire refuse it with fence.ErrInvalid, as httpfence does,
// writing nothing. A later epoch's token with a current time part is one
// a lease mints after failovers, and is accepted.
func testMadeUpTokens(t *testing.T, h Harness) {
	ctx := t.Context()
	mustApply(t, h, fz("acct:1", 10, "a", "op-1"), 1)
	before := snapshot(t, h, "acct:1")
	count, err := h.Count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ahead := uint64(time.Now().Add(2 * 366 * 24 * time.Hour).UnixMicro())
	for i, tok := range []lease.Token{math.MaxUint64, lease.Token(7<<epoch.Shift | ahead), lease.Token(ahead), 1<<epoch.Shift - 1} {
		f := fz("acct:1", tok, "a", fmt.Sprintf("made-up-%d", i))
		if err := h.Apply(ctx, f, 1); !errors.Is(err, fence.ErrInvalid) {
			t.Fatalf("Apply with token %d: %v, want ErrInvalid", tok, err)
		}
		if err := h.FenceOnAcquire(ctx, f); !errors.Is(err, fence.ErrInvalid) {
			t.Fatalf("FenceOnAcquire with token %d: %v, want ErrInvalid", tok, err)
		}
	}
	wantUnchanged(t, h, "acct:1", before)
	if n, err := h.Count(ctx); err != nil || n != count {
		t.Fatalf("%d records after the refusals, want %d (%v)", n, count, err)
	}
	later := lease.Token(epoch.Floor(100, time.Now().UnixMicro()))
	mustApply(t, h, fz("acct:1", later, "a", "op-later"), 1)
	mustApply(t, h, fz("acct:1", later+1, "b", "op-next"), 1)
}

// testSameOpOtherResource: an operation id applied on one resource is
// reported applied when another write (a job of another queue reusing the
// id, say) carries it on another resource. That write changes nothing, and
// the error names the fence that applied the operation.
func testSameOpOtherResource(t *testing.T, h Harness) {
	ctx := t.Context()
	first := fz("acct:1", 10, "w/job-1", "op-shared")
	mustApply(t, h, first, 1)
	before := snapshot(t, h, "acct:2")
	second := fz("acct:2", 5, "w/job-2", "op-shared")
	err := h.Apply(ctx, second, 1)
	if !errors.Is(err, fence.ErrAlreadyApplied) {
		t.Fatalf("same op id on another resource: err = %v, want ErrAlreadyApplied", err)
	}
	var ae *fence.AlreadyAppliedError
	want := fence.Effect{OperationID: "op-shared", Resource: "acct:1", Token: 10, Owner: "w/job-1"}
	if !errors.As(err, &ae) || ae.Record != want || ae.Fence != second {
		t.Fatalf("same op id on another resource: err = %#v, want record %+v and fence %+v", err, want, second)
	}
	wantUnchanged(t, h, "acct:2", before)
	if rec, ok, err := h.Applied(ctx, "op-shared"); err != nil || !ok || rec != want {
		t.Fatalf("Applied(op-shared) = %+v, %v, %v; want %+v", rec, ok, err, want)
	}
	if s := snapshot(t, h, "acct:1"); s.value != 1 {
		t.Fatalf("first resource's value %d, want 1", s.value)
	}
}

// testSameOpOtherResourceStale: the fence is checked before the effect log,
// whichever resource the operation was applied on.
func testSameOpOtherResourceStale(t *testing.T, h Harness) {
	ctx := t.Context()
	mustApply(t, h, fz("acct:1", 10, "a", "op-shared"), 1)
	if err := h.FenceOnAcquire(ctx, fz("acct:2", 50, "newer", "")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, h, "acct:2")
	err := h.Apply(ctx, fz("acct:2", 40, "older", "op-shared"), 1)
	var se *fence.StaleError
	if !errors.As(err, &se) || se.StoredToken != 50 || se.StoredOwner != "newer" {
		t.Fatalf("stale write of an applied op id: err = %v, want *StaleError against (50, newer)", err)
	}
	wantUnchanged(t, h, "acct:2", before)
}

// testRejectedOpFree: a write refused as stale does not claim its
// operation id; the id can then apply, on any resource.
func testRejectedOpFree(t *testing.T, h Harness) {
	ctx := t.Context()
	mustApply(t, h, fz("acct:1", 20, "b", "op-1"), 1)
	if err := h.Apply(ctx, fz("acct:1", 10, "a", "op-x"), 1); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("lower token: err = %v, want ErrStale", err)
	}
	if _, ok, err := h.Applied(ctx, "op-x"); err != nil || ok {
		t.Fatalf("Applied(rejected op-x) = %v, %v; want not applied", ok, err)
	}
	mustApply(t, h, fz("acct:2", 10, "a", "op-x"), 1)
	want := fence.Effect{OperationID: "op-x", Resource: "acct:2", Token: 10, Owner: "a"}
	if rec, ok, err := h.Applied(ctx, "op-x"); err != nil || !ok || rec != want {
		t.Fatalf("Applied(op-x) = %+v, %v, %v; want %+v", rec, ok, err, want)
	}
}

// testConcurrentSameOpAcross sends one operation id on many resources at
// once: exactly one applies. A write that meets it still in flight may get
// fence.ErrInProgress; once everything settled, every other write is
// reported already applied, with the record of the one that applied.
func testConcurrentSameOpAcross(t *testing.T, h Harness) {
	ctx := t.Context()
	const n = 24
	fences := make([]fence.Fence, n)
	for i := range fences {
		fences[i] = fz(fmt.Sprintf("acct:%d", i), lease.Token(100+i), fmt.Sprintf("w/job-%d", i), "op-race")
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = h.Apply(ctx, fences[i], 1)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("operation applied on %s and on %s", fences[winner].Resource, fences[i].Resource)
			}
			winner = i
		case errors.Is(err, fence.ErrAlreadyApplied), errors.Is(err, fence.ErrInProgress):
		default:
			t.Errorf("concurrent apply on %s: unexpected error %v", fences[i].Resource, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no write applied: %v", errs)
	}
	w := fences[winner]
	want := fence.Effect{OperationID: "op-race", Resource: w.Resource, Token: w.Token, Owner: w.Owner}
	total := int64(0)
	for i, f := range fences {
		v, err := h.Value(ctx, f.Resource)
		if err != nil {
			t.Fatal(err)
		}
		total += v
		if i == winner {
			continue
		}
		err = h.Apply(ctx, f, 1)
		var ae *fence.AlreadyAppliedError
		if !errors.As(err, &ae) || ae.Record != want {
			t.Fatalf("retry on %s after the race: err = %v, want already applied as %+v", f.Resource, err, want)
		}
	}
	if total != 1 {
		t.Fatalf("effect applied %d times across resources, want once", total)
	}
	if rec, ok, err := h.Applied(ctx, "op-race"); err != nil || !ok || rec != want {
		t.Fatalf("Applied(op-race) = %+v, %v, %v; want %+v", rec, ok, err, want)
	}
}

// testRefusalsNameNoHolder: a refusal's text travels (logs, job records,
// the dashboard, HTTP answers), so it never names a fence's token and
// owner together, which authorise writes as that holder: neither the
// stored ones nor those of the refused write. The error values still
// carry them.
func testRefusalsNameNoHolder(t *testing.T, h Harness) {
	ctx := t.Context()
	holder := fz("acct:1", 8231234567, "holder-owner", "op-1")
	mustApply(t, h, holder, 1)
	writers := []fence.Fence{
		holder,
		fz("acct:1", 8231234560, "zombie-owner", "op-2"),   // stale
		fz("acct:1", 8231234567, "impostor-owner", "op-3"), // same token, another owner
		fz("acct:1", 9231234567, "next-owner", "op-1"),     // applied by another holder
		fz("acct:2", 7231234567, "other-owner", "op-1"),    // applied on another resource
	}
	for _, w := range writers[1:] {
		err := h.Apply(ctx, w, 1)
		if !errors.Is(err, fence.ErrStale) && !errors.Is(err, fence.ErrAlreadyApplied) {
			t.Fatalf("Apply(%+v) = %v, want a refusal", w, err)
		}
		for _, f := range writers {
			if text := err.Error(); strings.Contains(text, f.Token.String()) && strings.Contains(text, f.Owner) {
				t.Errorf("refusal of %s names token %s and owner %s together: %s", w.OperationID, f.Token, f.Owner, text)
			}
		}
	}
}
