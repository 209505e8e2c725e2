package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/lease"
)

// suite runs every lease behaviour against one Redis deployment.
func suite(t *testing.T, client redis.UniversalClient) {
	t.Run("AcquireRenewRelease", func(t *testing.T) { testAcquireRenewRelease(t, client) })
	t.Run("ExpiryThenTakeover", func(t *testing.T) { testExpiryTakeover(t, client) })
	t.Run("StaleRenewAndRelease", func(t *testing.T) { testStale(t, client) })
	t.Run("KeepAliveCancelsOnLoss", func(t *testing.T) { testKeepAliveLoss(t, client) })
	t.Run("KeepAliveHoldsPastTTL", func(t *testing.T) { testKeepAliveHolds(t, client) })
	t.Run("AcquireWait", func(t *testing.T) { testAcquireWait(t, client) })
	t.Run("BadInputWritesNothing", func(t *testing.T) { testBadInput(t, client) })
	t.Run("Contention", func(t *testing.T) { testContention(t, client) })
}

func TestSingleRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	suite(t, srv.Client())
}

func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster suite skipped in -short mode")
	}
	c := redistest.StartCluster(t)
	suite(t, c.Client())
}

func newManager(t *testing.T, c redis.UniversalClient) *lease.Manager {
	return lease.NewManager(c, lease.Config{Namespace: redistest.Namespace(t)})
}

func testAcquireRenewRelease(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	m := newManager(t, c)
	l, err := m.Acquire(ctx, "account:1", "w1", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token == 0 || l.Owner != "w1" || l.Resource != "account:1" {
		t.Fatalf("bad lease %+v", l)
	}
	_, err = m.Acquire(ctx, "account:1", "w2", time.Second)
	var held *lease.HeldError
	if !errors.Is(err, lease.ErrHeld) || !errors.As(err, &held) || held.Owner != "w1" || held.Token != l.Token {
		t.Fatalf("second acquire: want HeldError naming w1, got %v", err)
	}
	before := l.Deadline
	// Renewed for 2s, a moment after it was taken for 1s: the deadline
	// moves later by the Redis clock, however little time passed.
	if err := m.Renew(ctx, l, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if !l.Deadline.After(before) {
		t.Fatalf("renew did not extend deadline: %v -> %v", before, l.Deadline)
	}
	h, err := m.Holder(ctx, "account:1")
	if err != nil || h == nil || h.Token != l.Token {
		t.Fatalf("holder = %+v, %v", h, err)
	}
	if err := m.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if h, _ := m.Holder(ctx, "account:1"); h != nil {
		t.Fatalf("holder after release: %+v", h)
	}
	l2, err := m.Acquire(ctx, "account:1", "w2", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token <= l.Token {
		t.Fatalf("token did not increase: %d then %d", l.Token, l2.Token)
	}
	// A live lease's key has no expiry.
	if ttl := c.PTTL(ctx, m.Key("account:1")).Val(); ttl != -1 {
		t.Fatalf("token counter has a TTL: %v", ttl)
	}
}

func testExpiryTakeover(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	m := newManager(t, c)
	old, err := m.Acquire(ctx, "r", "old", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// A wait on the clock, not on another goroutine: a sleep never ends
	// early, so the 50 ms lease has lapsed by Redis's clock (the same
	// machine's) when it returns.
	time.Sleep(80 * time.Millisecond)
	nl, err := m.Acquire(ctx, "r", "new", time.Second)
	if err != nil {
		t.Fatalf("takeover after expiry: %v", err)
	}
	if nl.Token <= old.Token {
		t.Fatalf("takeover token %d not above %d", nl.Token, old.Token)
	}
	if err := m.Renew(ctx, old, time.Second); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew of expired+taken lease: want ErrLost, got %v", err)
	}
}

func testStale(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	m := newManager(t, c)
	old, _ := m.Acquire(ctx, "r", "a", 30*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // on the clock: the 30 ms lease lapses
	// Expired and nobody took it: renew still fails, the lease is gone.
	if err := m.Renew(ctx, old, time.Second); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("renew after expiry: want ErrLost, got %v", err)
	}
	cur, err := m.Acquire(ctx, "r", "a", time.Second) // same owner, new token
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, old); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("stale release: want ErrNotHeld, got %v", err)
	}
	if h, _ := m.Holder(ctx, "r"); h == nil || h.Token != cur.Token {
		t.Fatalf("stale release changed the holder: %+v", h)
	}
	if err := m.Renew(ctx, old, time.Second); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("stale renew: want ErrLost, got %v", err)
	}
	if h, _ := m.Holder(ctx, "r"); h == nil || !h.Deadline.Equal(cur.Deadline) {
		t.Fatalf("stale renew changed the holder: %+v vs %+v", h, cur)
	}
}

func testKeepAliveLoss(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	m := newManager(t, c)
	l, err := m.Acquire(ctx, "r", "a", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.KeepAlive(ctx, l, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	// Steal: drop the holder key (as an expiry would) and let another owner in.
	if err := c.Del(ctx, m.Key("r")).Err(); err != nil {
		t.Fatal(err)
	}
	thief, err := m.Acquire(ctx, "r", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Context().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("keep-alive context not cancelled after the lease was stolen")
	}
	if !errors.Is(s.Err(), lease.ErrLost) || !s.Lost() {
		t.Fatalf("cause: want ErrLost, got %v", s.Err())
	}
	if h, _ := m.Holder(ctx, "r"); h.Token != thief.Token {
		t.Fatalf("holder changed by the lost session: %+v", h)
	}
}

func testKeepAliveHolds(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	m := newManager(t, c)
	// Renewals every ttl/3 = 1 s, each with 2.7 s to come back before the
	// session gives up: room for a busy machine.
	ttl := 3 * time.Second
	l, err := m.Acquire(ctx, "r", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.KeepAlive(ctx, l, ttl)
	if err != nil {
		t.Fatal(err)
	}
	// Wait (woken by the lease key's keyspace notifications) until a
	// renewal moved the deadline past the first TTL: the lease outlived it.
	redistest.Await(t, c, m.Key("r"), "a renewal past the first TTL", func() bool {
		h, err := m.Holder(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if h == nil || h.Token != l.Token {
			t.Fatalf("lease lost under keep-alive: holder %+v, session %v", h, s.Err())
		}
		return h.Deadline.After(l.Deadline.Add(ttl / 3))
	})
	if s.Err() != nil {
		t.Fatalf("session ended while renewing: %v", s.Err())
	}
	if _, err := m.Acquire(ctx, "r", "b", ttl); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("lease not held under keep-alive: %v", err)
	}
	if err := s.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if s.Lost() {
		t.Fatal("stopped session reported as lost")
	}
	if _, err := m.Acquire(ctx, "r", "b", ttl); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
}

func testAcquireWait(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	m := newManager(t, c)
	first, _ := m.Acquire(ctx, "r", "a", 100*time.Millisecond)
	got, err := m.AcquireWait(ctx, "r", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "b" || got.Token <= first.Token {
		t.Fatalf("wait acquire: %+v after %+v", got, first)
	}
	// b holds the lease for a minute; a budget of 5 s ends while it is
	// held, and leaves room for the first Acquire on a loaded machine.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := m.AcquireWait(short, "r", "c", time.Second); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("wait on held lease: want deadline exceeded and ErrHeld, got %v", err)
	}
}

func testBadInput(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
	m := newManager(t, c)
	before, err := redistest.CountKeys(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", lease.MaxResourceLen+1)
	errOf := func(_ *lease.Lease, err error) error { return err }
	_, tokErr := lease.ParseToken("abc")
	_, kaErr := m.KeepAlive(ctx, nil, time.Second)
	cases := []struct {
		name string
		err  error
	}{
		{"empty resource", errOf(m.Acquire(ctx, "", "o", time.Second))},
		{"zero ttl", errOf(m.Acquire(ctx, "r", "o", 0))},
		{"negative ttl", errOf(m.Acquire(ctx, "r", "o", -time.Second))},
		{"long resource", errOf(m.Acquire(ctx, long, "o", time.Second))},
		{"empty owner", errOf(m.Acquire(ctx, "r", "", time.Second))},
		{"nil renew", m.Renew(ctx, nil, time.Second)},
		{"nil release", m.Release(ctx, nil)},
		{"nil keepalive", kaErr},
		{"bad token", tokErr},
	}
	for _, tc := range cases {
		if !errors.Is(tc.err, lease.ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", tc.name, tc.err)
		}
	}
	after, _ := redistest.CountKeys(ctx, c)
	if after != before {
		t.Fatalf("bad input wrote keys: %d -> %d", before, after)
	}
}

type interval struct {
	owner      string
	token      lease.Token
	start, end time.Time
}

// testContention records every holding interval of many goroutines on a few
// resources and checks mutual exclusion and token order.
func testContention(t *testing.T, c redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	m := newManager(t, c)
	const workers, resources = 16, 4
	var mu sync.Mutex
	held := map[string][]interval{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for i := 0; ctx.Err() == nil; i++ {
				res := fmt.Sprintf("res-%d", (w+i)%resources)
				l, err := m.Acquire(ctx, res, owner, time.Second)
				if err != nil {
					continue
				}
				start := time.Now()
				time.Sleep(time.Millisecond) // the work done under the lease
				end := time.Now()
				if err := m.Release(context.WithoutCancel(ctx), l); err != nil {
					t.Errorf("release by holder failed: %v", err)
				}
				mu.Lock()
				held[res] = append(held[res], interval{owner, l.Token, start, end})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for res, ivs := range held {
		total += len(ivs)
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
		for i := 1; i < len(ivs); i++ {
			if ivs[i].start.Before(ivs[i-1].end) {
				t.Errorf("%s: overlapping holders %+v and %+v", res, ivs[i-1], ivs[i])
			}
			if ivs[i].token <= ivs[i-1].token {
				t.Errorf("%s: token did not increase in acquisition order: %d then %d", res, ivs[i-1].token, ivs[i].token)
			}
		}
	}
	if total < resources*5 {
		t.Fatalf("contention produced only %d holdings", total)
	}
	t.Logf("%d holdings over %d resources checked", total, resources)
}

// TestKeepAliveEndsAtTheLocalDeadline: with Redis paused no renew is
// confirmed and none says the lease is lost, yet the session's context is
// cancelled, with a cause matching ErrLost, at the local deadline (last
// confirmation + TTL - Config.SafetyMargin).
func TestKeepAliveEndsAtTheLocalDeadline(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	m := lease.NewManager(srv.Client(), lease.Config{Namespace: redistest.Namespace(t), SafetyMargin: 100 * time.Millisecond})
	ttl := 300 * time.Millisecond
	l, err := m.Acquire(ctx, "r", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.KeepAlive(ctx, l, ttl)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	srv.Pause()
	defer srv.Resume() // before the session stops: its renew waits for Redis
	select {
	case <-s.Context().Done():
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the session outlived its lease while Redis was unreachable")
	}
	if !s.Lost() || !strings.Contains(s.Err().Error(), "local deadline") {
		t.Fatalf("session ended with %v, want the local deadline's ErrLost", s.Err())
	}
}

func TestTokensRiseAcrossRestartWithoutPersistence(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	m := newManager(t, c)
	var maxBefore lease.Token
	for i := range 50 {
		l, err := m.Acquire(ctx, "r", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		maxBefore = max(maxBefore, l.Token)
		if i%2 == 0 {
			_ = m.Release(ctx, l)
		} else {
			_ = c.Del(ctx, m.Key("r")).Err()
		}
	}
	srv.Restart()
	if n := c.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("restart without persistence kept %d keys", n)
	}
	l, err := m.Acquire(ctx, "r", "b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= maxBefore {
		t.Fatalf("token after restart %d not above %d issued before", l.Token, maxBefore)
	}
}

func TestWaitForReplicas(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t, redistest.Options{})
	c := primary.Client()
	cfg := lease.Config{Namespace: redistest.Namespace(t), Durability: lease.Durability{Replicas: 1, Timeout: 50 * time.Millisecond}}
	m := lease.NewManager(c, cfg)
	if _, err := m.Acquire(ctx, "r", "a", time.Minute); !errors.Is(err, lease.ErrReplicas) {
		t.Fatalf("no replica: want ErrReplicas, got %v", err)
	}
	if h, _ := m.Holder(ctx, "r"); h != nil {
		t.Fatalf("failed durable acquire left a holder: %+v", h)
	}
	replica := redistest.Start(t, redistest.Options{})
	rc := replica.Client()
	if err := rc.ReplicaOf(ctx, "127.0.0.1", primary.Addr[len("127.0.0.1:"):]).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT blocks until a replica that is online (synced) acknowledged
	// every write so far.
	if n, err := c.Wait(ctx, 1, testsignal.Timeout()).Result(); err != nil || n < 1 {
		t.Fatalf("replica did not come online within %v: %d acknowledged (%v)", testsignal.Timeout(), n, err)
	}
	m = lease.NewManager(c, lease.Config{Namespace: cfg.Namespace, Durability: lease.Durability{Replicas: 1, Timeout: 2 * time.Second}})
	l, err := m.Acquire(ctx, "r", "a", time.Minute)
	if err != nil {
		t.Fatalf("durable acquire with a replica: %v", err)
	}
	if got := rc.Get(ctx, m.Key("r")).Val(); !strings.HasPrefix(got, l.Token.String()+" ") {
		t.Fatalf("replica token %q, want %d", got, l.Token)
	}
}

// A durable acquire that finds the resource held acquired nothing: it
// reports the holder (ErrHeld, so AcquireWait waits), whether or not the
// replicas acknowledged in time.
func TestDurableAcquireOfAHeldResourceReportsTheHolder(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client() // no replica
	ns := redistest.Namespace(t)
	holder, err := lease.NewManager(c, lease.Config{Namespace: ns}).Acquire(ctx, "r", "holder", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := lease.NewManager(c, lease.Config{Namespace: ns, Durability: lease.Durability{Replicas: 1, Timeout: 20 * time.Millisecond}})
	_, err = m.Acquire(ctx, "r", "other", time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) || held.Owner != "holder" || held.Token != holder.Token {
		t.Fatalf("durable acquire of a held resource: %v; want the holder's HeldError", err)
	}
	if errors.Is(err, lease.ErrReplicas) {
		t.Fatalf("nothing was acquired, yet the error says the acquisition was undone: %v", err)
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	srv := redistest.Start(b, redistest.Options{})
	m := lease.NewManager(srv.Client(), lease.Config{Namespace: "bench"})
	ctx := context.Background()
	var n int64
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		n++
		id := n
		mu.Unlock()
		i := 0
		for pb.Next() {
			res := fmt.Sprintf("r-%d-%d", id, i%64)
			i++
			l, err := m.Acquire(ctx, res, "bench", time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Release(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A durability the client's read timeout cannot hold (the wait's reply is
// read under it) fails every call with ErrInvalid and writes nothing,
// instead of acquiring without the wait.
func TestDurabilityBeyondTheReadTimeoutRefused(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	for _, d := range []lease.Durability{{Replicas: 1, Timeout: 5 * time.Second}, {Replicas: 1, Timeout: -time.Second}} {
		m := lease.NewManager(c, lease.Config{Namespace: ns, Durability: d})
		if _, err := m.Acquire(ctx, "r", "a", time.Minute); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "durability: timeout") {
			t.Fatalf("%+v: acquire %v, want ErrInvalid naming the durability timeout", d, err)
		}
	}
	if keys, err := c.Keys(ctx, "*"+ns+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys %v, %v after refused acquisitions, want none", keys, err)
	}
}

// TestKeepAliveRefusesAMarginAboveHalfTheTTL: KeepAlive refuses a
// Config.SafetyMargin above half its TTL with ErrInvalid (it was capped,
// silently) and starts no session; half the TTL is accepted.
func TestKeepAliveRefusesAMarginAboveHalfTheTTL(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	m := lease.NewManager(srv.Client(), lease.Config{Namespace: redistest.Namespace(t), SafetyMargin: time.Second})
	l, err := m.Acquire(ctx, "r", "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := m.KeepAlive(ctx, l, time.Second); s != nil || !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "safety margin") {
		t.Fatalf("KeepAlive: %v, %v; want an error matching ErrInvalid naming the safety margin", s, err)
	}
	s, err := m.KeepAlive(ctx, l, 2*time.Second)
	if err != nil {
		t.Fatalf("half the TTL: %v", err)
	}
	s.Stop()
}

// TestKeepAliveLongerThanTheAcquiredTTL: a session kept alive with a TTL
// longer than the one the lease was acquired with holds the lease from
// the start: no other owner takes it while the session's context is live,
// though the first renewal of the session's TTL comes after the acquired
// TTL ended.
func TestKeepAliveLongerThanTheAcquiredTTL(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	ctx := context.Background()
	m := newManager(t, srv.Client())
	l, err := m.Acquire(ctx, "r", "a", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.KeepAlive(ctx, l, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	time.Sleep(500 * time.Millisecond) // past the acquired TTL, before the session's first renewal
	other, err := m.Acquire(ctx, "r", "b", time.Second)
	if err == nil && s.Context().Err() == nil {
		t.Fatalf("owner b acquired token %d while the session of token %d is live", other.Token, l.Token)
	}
	if !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("acquire by another owner: %v, want ErrHeld", err)
	}
}

// TestIncompleteSentinelOptionsRefused: Sentinel options that name no
// master or no Sentinel could never give an epoch: every acquisition would
// fail as if the Sentinels were down. They are refused with ErrInvalid,
// writing nothing.
func TestIncompleteSentinelOptionsRefused(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	for name, fo := range map[string]*redis.FailoverOptions{
		"no address":    {MasterName: "fq"},
		"no name":       {SentinelAddrs: []string{"127.0.0.1:26379"}},
		"empty address": {MasterName: "fq", SentinelAddrs: []string{" "}},
	} {
		cfg := lease.Config{Namespace: ns, Sentinel: fo}
		if err := cfg.Validate(); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "sentinel options") {
			t.Errorf("%s: Validate: %v, want ErrInvalid naming the Sentinel options", name, err)
		}
		m := lease.NewManager(c, cfg)
		if _, err := m.Acquire(ctx, "r", "a", time.Minute); !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), "sentinel options") {
			t.Errorf("%s: acquire: %v, want ErrInvalid naming the Sentinel options", name, err)
		}
	}
	if keys, err := c.Keys(ctx, "*"+ns+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("keys %v, %v after refused acquisitions, want none", keys, err)
	}
}

// TestAcquireWithAMasterNameTheSentinelsDoNotMonitor: the error says it is
// a configuration error (ErrUnknownMaster), not an outage, and nothing is
// written.
func TestAcquireWithAMasterNameTheSentinelsDoNotMonitor(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	wrong := f.ClientOptions()
	wrong.MasterName = "no-such-master"
	ns := redistest.Namespace(t)
	m := lease.NewManager(f.Client(), lease.Config{Namespace: ns, Sentinel: wrong})
	if _, err := m.Acquire(ctx, "r", "a", time.Minute); !errors.Is(err, lease.ErrUnknownMaster) {
		t.Fatalf("acquire: %v, want ErrUnknownMaster", err)
	}
	if keys, err := f.Client().Keys(ctx, "*"+ns+"*:lease:*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("lease keys %v, %v after a refused acquisition, want none", keys, err)
	}
}

// TestAcquireWithARedisServerGivenAsTheSentinel: an address of
// Config.Sentinel that a plain Redis server answers is a configuration
// error (ErrNotSentinel, naming it), not an outage, and nothing is
// written.
func TestAcquireWithARedisServerGivenAsTheSentinel(t *testing.T) {
	if testing.Short() {
		t.Skip("failover tests skipped in -short mode")
	}
	ctx := context.Background()
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	wrong := &redis.FailoverOptions{MasterName: redistest.MasterName, SentinelAddrs: []string{f.Primary.Addr}}
	ns := redistest.Namespace(t)
	m := lease.NewManager(f.Client(), lease.Config{Namespace: ns, Sentinel: wrong})
	if _, err := m.Acquire(ctx, "r", "a", time.Minute); !errors.Is(err, lease.ErrNotSentinel) || !strings.Contains(err.Error(), f.Primary.Addr) {
		t.Fatalf("acquire: %v, want ErrNotSentinel naming %s", err, f.Primary.Addr)
	}
	if keys, err := f.Client().Keys(ctx, "*"+ns+"*:lease:*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("lease keys %v, %v after a refused acquisition, want none", keys, err)
	}
}
