package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/fence"
	"github.com/fencedq/fencedq/fence/internal/fencetest"
	"github.com/fencedq/fencedq/fence/redisfence"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/lease"
)

func newStore(t *testing.T, c redis.UniversalClient, cfg redisfence.Config) *redisfence.Store {
	t.Helper()
	if cfg.Namespace == "" {
		cfg.Namespace = redistest.Namespace(t)
	}
	s, err := redisfence.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func harness(c redis.UniversalClient) func(t *testing.T) fencetest.Harness {
	return func(t *testing.T) fencetest.Harness {
		s := newStore(t, c, redisfence.Config{})
		return fencetest.Harness{
			Apply: func(ctx context.Context, f fence.Fence, delta int64) error {
				return s.Apply(ctx, f,
					redisfence.IncrBy(s.DataKey(f.Resource, "n"), delta),
					redisfence.RPush(s.DataKey(f.Resource, "log"), f.Token.String()))
			},
			Value: func(ctx context.Context, resource string) (int64, error) {
				n, err := c.Get(ctx, s.DataKey(resource, "n")).Int64()
				if errors.Is(err, redis.Nil) {
					return 0, nil
				}
				return n, err
			},
			Log: func(ctx context.Context, resource string) ([]lease.Token, error) {
				vs, err := c.LRange(ctx, s.DataKey(resource, "log"), 0, -1).Result()
				toks := make([]lease.Token, 0, len(vs))
				for _, v := range vs {
					n, _ := strconv.ParseUint(v, 10, 64)
					toks = append(toks, lease.Token(n))
				}
				return toks, err
			},
			FenceOnAcquire: s.FenceOnAcquire,
			HighWater:      s.HighWater,
			Applied:        s.Applied,
			Count:          func(ctx context.Context) (int64, error) { return redistest.CountKeys(ctx, c) },
		}
	}
}

func TestContract(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	fencetest.Run(t, harness(c))
}

// TestCluster runs the contract and the slot checks on one three-master
// Redis Cluster.
func TestCluster(t *testing.T) {
	c := redistest.StartCluster(t).Client()
	t.Run("Contract", func(t *testing.T) { fencetest.Run(t, harness(c)) })
	t.Run("SlotMatchesServer", func(t *testing.T) { testSlotMatchesServer(t, c) })
	t.Run("SpreadsResources", func(t *testing.T) { testClusterSpreadsResources(t, c) })
	t.Run("GeneratedNames", func(t *testing.T) { testClusterGeneratedNames(t, c) })
}

func fz(resource string, tok lease.Token, owner, op string) fence.Fence {
	return fence.Fence{Resource: resource, Token: tok, Owner: owner, OperationID: op}
}

func testSlotMatchesServer(t *testing.T, c *redis.ClusterClient) {
	ctx := t.Context()
	for _, k := range []string{"", "foo", "123456789", "fq:fence:{acct:42}:hw", "{}x", "a{}b{c}", "{user1000}.following", "ünïcode", "x{y"} {
		want, err := c.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := redisfence.Slot(k); int64(got) != want {
			t.Errorf("Slot(%q) = %d, server says %d", k, got, want)
		}
	}
}

// Resources spread over all three masters, each applied atomically.
func testClusterSpreadsResources(t *testing.T, c *redis.ClusterClient) {
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	nodes := map[string]bool{}
	for i := range 30 {
		r := fmt.Sprintf("acct:%d", i)
		if err := s.Apply(ctx, fz(r, 5, "w", "op-"+r), redisfence.HSet(s.DataKey(r, "h"), map[string]string{"a": "1", "b": "2"})); err != nil {
			t.Fatal(err)
		}
		m, err := c.MasterForKey(ctx, s.HighWaterKey(r))
		if err != nil {
			t.Fatal(err)
		}
		nodes[m.Options().Addr] = true
		if rec, ok, err := s.Applied(ctx, "op-"+r); err != nil || !ok || rec.Resource != r {
			t.Fatalf("Applied(op-%s) = %+v, %v, %v", r, rec, ok, err)
		}
	}
	if len(nodes) != 3 {
		t.Fatalf("resources landed on %d masters, want 3", len(nodes))
	}
}

func TestMutations(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	r := "acct:1"
	k := func(name string) string { return s.DataKey(r, name) }
	_ = c.Set(ctx, k("gone"), "x", 0)
	err := s.Apply(ctx, fz(r, 1, "w", "op-1"),
		redisfence.Set(k("s"), "v"),
		redisfence.Del(k("gone")),
		redisfence.HSet(k("h"), map[string]string{"f": "1"}),
		redisfence.HIncrBy(k("hc"), "f", 3),
		redisfence.IncrBy(k("n"), -2),
		redisfence.RPush(k("l"), "a", "b"),
	)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Get(ctx, k("s")).Val(); v != "v" {
		t.Errorf("SET: %q", v)
	}
	if n := c.Exists(ctx, k("gone")).Val(); n != 0 {
		t.Errorf("DEL: key still exists")
	}
	if v := c.HGet(ctx, k("h"), "f").Val(); v != "1" {
		t.Errorf("HSET: %q", v)
	}
	if v := c.HGet(ctx, k("hc"), "f").Val(); v != "3" {
		t.Errorf("HINCRBY: %q", v)
	}
	if v := c.Get(ctx, k("n")).Val(); v != "-2" {
		t.Errorf("INCRBY: %q", v)
	}
	if v := c.LRange(ctx, k("l"), 0, -1).Val(); len(v) != 2 || v[1] != "b" {
		t.Errorf("RPUSH: %q", v)
	}
}

// A mutation that cannot apply is detected before the first write: the
// high-water mark, the effect log and the other keys stay as they were.
func TestMutationRejectedWritesNothing(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	r := "acct:1"
	_ = c.HSet(ctx, s.DataKey(r, "hash"), "f", "x")
	_ = c.Set(ctx, s.DataKey(r, "str"), "not-a-number", 0)
	if err := s.FenceOnAcquire(ctx, fz(r, 1, "w", "")); err != nil {
		t.Fatal(err)
	}
	for i, ops := range [][]redisfence.Op{
		{redisfence.Set(s.DataKey(r, "a"), "1"), redisfence.IncrBy(s.DataKey(r, "hash"), 1)},
		{redisfence.Set(s.DataKey(r, "a"), "1"), redisfence.IncrBy(s.DataKey(r, "str"), 1)},
		{redisfence.Set(s.DataKey(r, "a"), "1"), redisfence.HIncrBy(s.DataKey(r, "hash"), "f", 1)},
		{redisfence.Set(s.DataKey(r, "a"), "1"), redisfence.RPush(s.DataKey(r, "str"), "x")},
		{redisfence.Set(s.DataKey(r, "a"), "1"), redisfence.HSet(s.DataKey(r, "str"), map[string]string{"f": "v"})},
	} {
		op := fmt.Sprint("op-", i)
		err := s.Apply(ctx, fz(r, 2, "w2", op), ops...)
		if !errors.Is(err, redisfence.ErrMutation) {
			t.Fatalf("case %d: err = %v, want ErrMutation", i, err)
		}
		if tok, _, _ := s.HighWater(ctx, r); tok != 1 {
			t.Fatalf("case %d: high-water %d, want 1", i, tok)
		}
		if _, ok, _ := s.AppliedOn(ctx, r, op); ok {
			t.Fatalf("case %d: rejected op recorded", i)
		}
		if c.Exists(ctx, s.DataKey(r, "a")).Val() != 0 {
			t.Fatalf("case %d: earlier mutation applied", i)
		}
	}
}

func TestOpsValidated(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	n0, _ := redistest.CountKeys(ctx, c)
	for i, tc := range []struct {
		f   fence.Fence
		ops []redisfence.Op
	}{
		{fz("acct:1", 1, "w", "op"), []redisfence.Op{redisfence.Set("elsewhere", "x")}},
		{fz("acct:1", 1, "w", "op"), []redisfence.Op{{}}},
		{fz("acct:1", 1, "w", "op"), []redisfence.Op{redisfence.Set("", "x")}},
		{fz("acct:1", 1, "w", "op"), []redisfence.Op{redisfence.RPush(s.DataKey("acct:1", "l"))}},
		{fz("acct:1", 1, "w", "op"), []redisfence.Op{redisfence.Set(s.DataKey("acct:1", "k"), "1"), redisfence.Del(s.DataKey("acct:1", "k"))}},
		{fz("acct:{1}", 1, "w", "op"), nil},
		{fz(string(make([]byte, lease.MaxResourceLen+1)), 1, "w", "op"), nil},
	} {
		if err := s.Apply(ctx, tc.f, tc.ops...); !errors.Is(err, fence.ErrInvalid) {
			t.Errorf("case %d: err = %v, want ErrInvalid", i, err)
		}
	}
	// A resource no write can name has no mark to read: a brace would read
	// a key of another resource's slot.
	if _, _, err := s.HighWater(ctx, "acct:{1}"); !errors.Is(err, fence.ErrInvalid) {
		t.Errorf("HighWater of a resource with a brace: %v, want ErrInvalid", err)
	}
	// Any key tagged by the resource is fine, not only DataKey.
	if err := s.Apply(ctx, fz("acct:1", 1, "w", "op"), redisfence.Set("app:{acct:1}:balance", "5")); err != nil {
		t.Fatal(err)
	}
	if n1, _ := redistest.CountKeys(ctx, c); n1 != n0+5 { // hw, effect, index, claims, balance
		t.Fatalf("keys: %d before, %d after", n0, n1)
	}
}

func TestRetention(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	if err := s.Apply(ctx, fz("r", 1, "w", "op")); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, s.EffectKey("r", "op")).Val(); ttl < 7*24*time.Hour-time.Minute || ttl > 7*24*time.Hour {
		t.Errorf("effect TTL %v, want about 7 days", ttl)
	}
	if ttl := c.PTTL(ctx, s.IndexKey("op")).Val(); ttl <= 7*24*time.Hour {
		t.Errorf("index TTL %v, want longer than the effect's", ttl)
	}
	if ttl := c.PTTL(ctx, s.HighWaterKey("r")).Val(); ttl != -1 {
		t.Errorf("high-water TTL %v, want none", ttl)
	}

	forever := newStore(t, c, redisfence.Config{EffectTTL: -1})
	if err := forever.Apply(ctx, fz("r", 1, "w", "op")); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, forever.EffectKey("r", "op")).Val(); ttl != -1 {
		t.Errorf("EffectTTL<0: effect TTL %v, want none", ttl)
	}

	short := newStore(t, c, redisfence.Config{EffectTTL: 50 * time.Millisecond})
	if err := short.Apply(ctx, fz("r", 1, "w", "op")); err != nil {
		t.Fatal(err)
	}
	// A wait on the clock, not on another goroutine: a sleep never ends
	// early, and Redis never serves a key past its TTL (it expires it when
	// read), so the 50 ms record is gone when this returns.
	time.Sleep(120 * time.Millisecond)
	if _, ok, _ := short.AppliedOn(ctx, "r", "op"); ok {
		t.Fatal("effect record outlived its retention")
	}
	// After retention the same operation id applies again: that is the
	// documented cost of a short EffectTTL.
	if err := short.Apply(ctx, fz("r", 1, "w", "op")); err != nil {
		t.Fatalf("re-apply after retention: %v", err)
	}
	for _, bad := range []redisfence.Config{{Namespace: "a{b"}, {EffectTTL: time.Microsecond}, {PendingTTL: -1}} {
		if _, err := redisfence.New(c, bad); !errors.Is(err, redisfence.ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", bad, err)
		}
	}
}

func TestAppliedOnAndIndex(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	if err := s.Apply(ctx, fz("acct:9", 9, "w", "job-9")); err != nil {
		t.Fatal(err)
	}
	rec, ok, err := s.AppliedOn(ctx, "acct:9", "job-9")
	if err != nil || !ok || rec.Token != 9 || rec.Resource != "acct:9" || rec.Owner != "w" {
		t.Fatalf("AppliedOn = %+v, %v, %v", rec, ok, err)
	}
	if _, ok, _ := s.AppliedOn(ctx, "acct:8", "job-9"); ok {
		t.Fatal("AppliedOn on another resource reported applied")
	}
	// A rejected write gives its binding up and is not applied.
	if err := s.Apply(ctx, fz("acct:9", 1, "w", "job-stale")); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("stale write: %v", err)
	}
	if _, ok, err := s.Applied(ctx, "job-stale"); ok || err != nil {
		t.Fatalf("Applied(stale op) = %v, %v", ok, err)
	}
	if n := c.Exists(ctx, s.IndexKey("job-stale"), s.ClaimsKey("job-stale")).Val(); n != 0 {
		t.Fatalf("a rejected write left %d binding keys", n)
	}
	if _, _, err := s.Applied(ctx, ""); !errors.Is(err, fence.ErrInvalid) {
		t.Fatalf("Applied(\"\") = %v", err)
	}
}

// TestOperationBoundToOneResource: while a write of an operation id is in
// flight on one resource (bound, not yet recorded), a write of the same id
// on another resource gets fence.ErrInProgress and changes nothing; once the
// first is refused, the id is free; once one applied, others are told so.
func TestOperationBoundToOneResource(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	started, finish := make(chan struct{}), make(chan struct{})
	guardErr := make(chan error, 1)
	go func() {
		guardErr <- s.Guard(ctx, fz("acct:1", 10, "w/job-1", "op-b"), func(context.Context) error {
			close(started)
			<-finish
			return errors.New("handler failed")
		})
	}()
	<-started
	err := s.Apply(ctx, fz("acct:2", 10, "w/job-2", "op-b"), redisfence.IncrBy(s.DataKey("acct:2", "n"), 1))
	if !errors.Is(err, fence.ErrInProgress) {
		t.Fatalf("same op id on another resource while the first runs: %v, want ErrInProgress", err)
	}
	if tok, _, _ := s.HighWater(ctx, "acct:2"); tok != 0 {
		t.Fatalf("refused write raised the mark of acct:2 to %d", tok)
	}
	close(finish)
	if err := <-guardErr; err == nil {
		t.Fatal("Guard with a failing handler returned nil")
	}
	// The failed Guard gave the id up: it applies on acct:2 now.
	if err := s.Apply(ctx, fz("acct:2", 10, "w/job-2", "op-b"), redisfence.IncrBy(s.DataKey("acct:2", "n"), 1)); err != nil {
		t.Fatalf("after the first write failed: %v", err)
	}
	// And is refused on acct:1, by Apply and by Guard, naming acct:2's record.
	want := fence.Effect{OperationID: "op-b", Resource: "acct:2", Token: 10, Owner: "w/job-2"}
	for name, err := range map[string]error{
		"Apply": s.Apply(ctx, fz("acct:1", 11, "w/job-1", "op-b")),
		"Guard": s.Guard(ctx, fz("acct:1", 11, "w/job-1", "op-b"), func(context.Context) error {
			t.Error("Guard ran an operation applied elsewhere")
			return nil
		}),
	} {
		var ae *fence.AlreadyAppliedError
		if !errors.As(err, &ae) || ae.Record != want || !ae.Elsewhere() {
			t.Fatalf("%s on acct:1 after it applied on acct:2: %v, want already applied as %+v", name, err, want)
		}
	}
	// A mutation that cannot apply gives the binding up too.
	if err := c.Set(ctx, s.DataKey("acct:3", "h"), "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	err = s.Apply(ctx, fz("acct:3", 1, "w", "op-m"), redisfence.HIncrBy(s.DataKey("acct:3", "h"), "f", 1))
	if !errors.Is(err, redisfence.ErrMutation) {
		t.Fatalf("mutation on a string key: %v", err)
	}
	if err := s.Apply(ctx, fz("acct:4", 1, "w", "op-m")); err != nil {
		t.Fatalf("op id of a rejected mutation on another resource: %v", err)
	}
}

func TestGuard(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	f := fz("acct:1", 10, "w", "op-1")

	boom := errors.New("boom")
	if err := s.Guard(ctx, f, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing callback: %v", err)
	}
	if _, ok, _ := s.Applied(ctx, "op-1"); ok {
		t.Fatal("failed callback recorded as applied")
	}
	if tok, _, _ := s.HighWater(ctx, "acct:1"); tok != 10 {
		t.Fatalf("Guard did not raise the high-water mark before running: %d", tok)
	}
	// Panics abort too.
	func() {
		defer func() { _ = recover() }()
		_ = s.Guard(ctx, f, func(context.Context) error { panic("x") })
	}()
	ran := 0
	if err := s.Guard(ctx, f, func(ctx context.Context) error {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("callback context has no deadline")
		}
		ran++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Guard(ctx, f, func(context.Context) error { ran++; return nil }); !errors.Is(err, fence.ErrAlreadyApplied) {
		t.Fatalf("second Guard: %v", err)
	}
	if rec, ok, _ := s.Applied(ctx, "op-1"); !ok || rec.Token != 10 || ran != 1 {
		t.Fatalf("Applied = %+v, %v; ran %d times", rec, ok, ran)
	}
	if err := s.Guard(ctx, fz("acct:1", 9, "old", "op-2"), func(context.Context) error { ran++; return nil }); !errors.Is(err, fence.ErrStale) || ran != 1 {
		t.Fatalf("stale Guard: %v, ran %d", err, ran)
	}
}

func TestGuardConcurrent(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ctx := t.Context()
	s := newStore(t, c, redisfence.Config{})
	f := fz("acct:1", 10, "w", "op-c")
	var runs atomic.Int32
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for range 50 {
		wg.Go(func() {
			err := s.Guard(ctx, f, func(context.Context) error {
				runs.Add(1)
				time.Sleep(20 * time.Millisecond) // the guarded work: the others meet it in progress
				return nil
			})
			k := "ok"
			switch {
			case err == nil:
			case errors.Is(err, fence.ErrInProgress):
				k = "in-progress"
			case errors.Is(err, fence.ErrAlreadyApplied):
				k = "already"
			default:
				k = err.Error()
			}
			mu.Lock()
			outcomes[k]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if runs.Load() != 1 || outcomes["ok"] != 1 || outcomes["ok"]+outcomes["in-progress"]+outcomes["already"] != 50 {
		t.Fatalf("runs %d, outcomes %v", runs.Load(), outcomes)
	}
	// Apply during a pending Guard reports in progress.
	started, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = s.Guard(ctx, fz("acct:1", 10, "w", "op-d"), func(context.Context) error {
			close(started)
			<-release
			return nil
		})
	}()
	<-started
	err := s.Apply(ctx, fz("acct:1", 10, "w", "op-d"))
	close(release)
	if !errors.Is(err, fence.ErrInProgress) {
		t.Fatalf("Apply during Guard: %v", err)
	}
}
