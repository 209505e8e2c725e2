package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

// acquireAfterFailover acquires through a failover client right after a
// promotion. Its pooled connections may still point at the killed primary:
// go-redis redials through the Sentinel after such an error, so a few
// attempts settle it. The resource must be free: a holder would mean work
// is stopped.
func acquireAfterFailover(t *testing.T, m *lease.Manager, resource, owner string) *lease.Lease {
	t.Helper()
	var err error
	for range 5 {
		var l *lease.Lease
		if l, err = m.Acquire(context.Background(), resource, owner, time.Minute); err == nil {
			return l
		}
		if errors.Is(err, lease.ErrHeld) {
			t.Fatalf("after the failover the resource is held: %v", err)
		}
	}
	t.Fatalf("no acquire after the failover: %v", err)
	return nil
}

// newStore is protected storage outside the failing deployment: a Redis of
// its own, fenced by redisfence.
func newStore(t *testing.T, ns string) *redisfence.Store {
	s, err := redisfence.New(redistest.Start(t, redistest.Options{}).Client(), redisfence.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// write applies one fenced write of l to storage.
func write(ctx context.Context, s *redisfence.Store, l *lease.Lease, op string) error {
	f := fence.Fence{Resource: l.Resource, Token: l.Token, Owner: l.Owner, OperationID: op}
	return s.Apply(ctx, f, redisfence.RPush(s.DataKey(l.Resource, "log"), op))
}

// failoverCase is one run of the failover scenario: which clock is off by
// how much, and whether the Manager knows the Sentinels.
type failoverCase struct {
	name                        string
	primaryClock, promotedClock time.Duration
	sentinel                    bool
}

// A lease acquired on the primary after replication was cut is lost with
// it (the zombie). After the Sentinel promotes the lagging replica, whose
// clock is 10 minutes off, a new acquire succeeds at once with a token
// above the zombie's, so storage takes the live holder's writes and
// refuses the zombie's, in either order.
func TestFailoverTokensOutrankTheZombie(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	for _, tc := range []failoverCase{
		{name: "promoted-behind-sentinel", promotedClock: -10 * time.Minute, sentinel: true},
		{name: "promoted-behind-counted", promotedClock: -10 * time.Minute},
		{name: "old-primary-ahead-sentinel", primaryClock: 10 * time.Minute, sentinel: true},
		{name: "old-primary-ahead-counted", primaryClock: 10 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) { testFailover(t, tc) })
	}
}

func testFailover(t *testing.T, tc failoverCase) {
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{ClockShim: true})
	f.Primary.SetClockOffset(tc.primaryClock)
	f.Replica.SetClockOffset(tc.promotedClock)
	c := f.Client()
	ns := redistest.Namespace(t)
	cfg := lease.Config{Namespace: ns}
	if tc.sentinel {
		cfg.Sentinel = f.ClientOptions()
	}
	m := lease.NewManager(c, cfg)
	store := newStore(t, ns)
	const res = "account:1"

	l1, err := m.Acquire(ctx, res, "first", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(ctx, store, l1, "op1"); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, l1); err != nil {
		t.Fatal(err)
	}
	f.Sync() // t1 and its release are on the replica
	f.CutReplication()
	zombie, err := m.Acquire(ctx, res, "zombie", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if zombie.Token <= l1.Token {
		t.Fatalf("t2 %d not above t1 %d", zombie.Token, l1.Token)
	}
	f.KillPrimary() // t2 is lost: the promoted replica saw t1 released, nothing after

	live := acquireAfterFailover(t, m, res, "live")
	if live.Token <= zombie.Token {
		t.Fatalf("fencing inverted: the live holder's token %d is not above the zombie's %d", live.Token, zombie.Token)
	}
	// The scenario must be one the clock alone gets wrong: the promoted
	// node's time in µs (the clock-only token) is below the zombie's token.
	now, err := c.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(now.UnixMicro()) >= uint64(zombie.Token) {
		t.Fatalf("the promoted clock (%d µs) already passed the zombie's token %d: the test shows nothing", now.UnixMicro(), zombie.Token)
	}

	// The zombie writes first (storage cannot know it is one), then the
	// live holder: accepted. The zombie again: refused.
	if err := write(ctx, store, zombie, "op2"); err != nil {
		t.Fatalf("zombie's first write: %v", err)
	}
	if err := write(ctx, store, live, "op3"); err != nil {
		t.Fatalf("live holder refused after the failover: %v", err)
	}
	if err := write(ctx, store, zombie, "op4"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("zombie after the live holder: want fence.ErrStale, got %v", err)
	}
	// Work goes on: release and acquire again at once, tokens rising.
	if err := m.Release(ctx, live); err != nil {
		t.Fatal(err)
	}
	next, err := m.Acquire(ctx, res, "next", time.Minute)
	if err != nil || next.Token <= live.Token {
		t.Fatalf("acquire after the live holder: %+v, %v", next, err)
	}
}

// A clock far ahead and then set back does no harm: tokens keep rising and
// nothing waits for the clock.
func TestClockAheadThenBack(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	m := newManager(t, srv.Client())
	var last lease.Token
	for i, off := range []time.Duration{10 * time.Minute, 0, -10 * time.Minute, 0} {
		srv.SetClockOffset(off)
		for j := range 3 {
			l, err := m.Acquire(ctx, "r", fmt.Sprintf("o%d-%d", i, j), time.Minute)
			if err != nil {
				t.Fatalf("clock %v: %v", off, err)
			}
			if l.Token <= last {
				t.Fatalf("clock %v: token %d not above %d", off, l.Token, last)
			}
			last = l.Token
			if err := m.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Storage feedback: storage holds a mark the lease counter does not know
// (a token lost with a primary whose epoch could not be told apart). The
// live holder is refused once; Raise with the refusal's mark ends that
// lease, and the next acquire mints above the mark at once.
func TestRaiseAboveStorageMark(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	m := newManager(t, c)
	ns := redistest.Namespace(t)
	store := newStore(t, ns)
	l, err := m.Acquire(ctx, "r", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lost := &lease.Lease{Resource: "r", Owner: "lost", Token: l.Token + 1_000_000_000}
	if err := write(ctx, store, lost, "lost-op"); err != nil {
		t.Fatal(err)
	}
	err = write(ctx, store, l, "op")
	var stale *fence.StaleError
	if !errors.As(err, &stale) || stale.StoredToken != lost.Token {
		t.Fatalf("want a StaleError carrying mark %d, got %v", lost.Token, err)
	}
	if err := m.Raise(ctx, "r", stale.StoredToken); err != nil {
		t.Fatal(err)
	}
	if err := m.Renew(ctx, l, time.Minute); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew of the lease below the mark: want ErrLost, got %v", err)
	}
	l2, err := m.Acquire(ctx, "r", "a", time.Minute)
	if err != nil {
		t.Fatalf("acquire after Raise: %v", err)
	}
	if l2.Token != stale.StoredToken+1 {
		t.Fatalf("token after Raise %d, want the mark + 1 = %d", l2.Token, stale.StoredToken+1)
	}
	if err := write(ctx, store, l2, "op"); err != nil {
		t.Fatalf("write after Raise: %v", err)
	}

	// A mark the counter already passed changes nothing: the live lease stays.
	if err := m.Raise(ctx, "r", l.Token); err != nil {
		t.Fatal(err)
	}
	if err := m.Renew(ctx, l2, time.Minute); err != nil {
		t.Fatalf("Raise below the counter ended the live lease: %v", err)
	}
	// A resource never leased gets the mark as its last token.
	if err := m.Raise(ctx, "fresh", 1<<60); err != nil {
		t.Fatal(err)
	}
	if l3, err := m.Acquire(ctx, "fresh", "a", time.Minute); err != nil || l3.Token != 1<<60+1 {
		t.Fatalf("acquire on a raised new resource: %+v, %v", l3, err)
	}
	if err := m.Raise(ctx, "r", math.MaxUint64); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Raise to 2^64-1: want ErrInvalid, got %v", err)
	}
	if err := m.Raise(ctx, "", 5); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Raise without resource: want ErrInvalid, got %v", err)
	}
}

// Tokens stay exact above 2^53 (the epochs' range), where Lua's doubles
// are not: consecutive acquisitions differ by exactly one.
func TestTokensExactAboveFloatRange(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	m := newManager(t, c)
	base := lease.Token(1<<62 + 12345)
	if err := m.Raise(ctx, "r", base); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		l, err := m.Acquire(ctx, "r", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if want := base + lease.Token(i) + 1; l.Token != want {
			t.Fatalf("acquisition %d: token %d, want %d", i, l.Token, want)
		}
		if err := m.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}

// A flush (or a restart without persistence) loses the lease's last token
// and the epoch record with it, on the same primary: the next acquire by a
// manager that minted before moves to the next epoch, so its token is above
// the zombie's whatever the clock says after the flush.
func TestFlushKeepsTokensAboveTheZombie(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	m := newManager(t, srv.Client())
	zombie, err := m.Acquire(ctx, "r", "zombie", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.SetClockOffset(-10 * time.Minute)
	l, err := m.Acquire(ctx, "r", "live", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= zombie.Token {
		t.Fatalf("token after the flush %d, not above the zombie's %d", l.Token, zombie.Token)
	}
}
