package epoch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/alicebob/miniredis/v2"
	"log/slog"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/epoch"
	"github.com/fencedq/fencedq/internal/redistest"
)

// arith exposes the library's arithmetic to Go.
var arith = redis.NewScript(epoch.Lua + `
if ARGV[1] == 'add' then return u64_add(u64_norm(ARGV[2]), u64_norm(ARGV[3])) end
if ARGV[1] == 'cmp' then return u64_cmp(u64_norm(ARGV[2]), u64_norm(ARGV[3])) end
if ARGV[1] == 'norm' then return u64_norm(ARGV[2]) end
if ARGV[1] == 'mint' then return token_mint(ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])) end
`)

// mintScript is the smallest minting script: one counter per key, the
// protocol a lease or a ledger claim follows.
var mintScript = redis.NewScript(epoch.Lua + `
local ep, stale = epoch_check(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
if not ep then return {-1, stale[1], stale[2]} end
local t = redis.call('TIME')
local tok = token_mint(redis.call('GET', KEYS[1]), ep, tonumber(t[1]) * 1000000 + tonumber(t[2]))
redis.call('SET', KEYS[1], tok)
return {1, tok}
`)

// mint mints one token on key through tr, as a minting component does.
func mint(t *testing.T, c redis.UniversalClient, tr *epoch.Tracker, key string) uint64 {
	t.Helper()
	tok, err := tryMint(c, tr, key)
	if err != nil {
		t.Fatalf("mint on %s: %v", key, err)
	}
	return tok
}

// tryMint is mint returning its error.
func tryMint(c redis.UniversalClient, tr *epoch.Tracker, key string) (uint64, error) {
	var tok uint64
	err := tr.Mint(context.Background(), func(st epoch.State) (bool, error) {
		keys := []string{key}
		if tr.Enabled() {
			keys = append(keys, tr.Key())
		}
		if tr.Cluster() {
			keys = append(keys, key+":clock") // the record in the key's slot
		}
		r, err := mintScript.Run(context.Background(), c, keys, st.ReplID, st.Epoch, st.Born).Slice()
		if err != nil {
			return false, err
		}
		if r[0].(int64) == -1 {
			return true, nil
		}
		tok, err = strconv.ParseUint(r[1].(string), 10, 64)
		return false, err
	})
	return tok, err
}

func TestDecimalArithmetic(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	run := func(args ...any) string {
		t.Helper()
		v, err := arith.Run(ctx, c, nil, args...).Result()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return fmt.Sprint(v)
	}
	for in, want := range map[string]string{"007": "7", "0": "0", "000": "0", "": "0", "12a": "0", "-1": "0", "18446744073709551615": "18446744073709551615"} {
		if got := run("norm", in); got != want {
			t.Errorf("norm(%q) = %q, want %q", in, got, want)
		}
	}
	edges := []uint64{0, 1, 9, 9999999, 10000000, 10000001, 1<<52 - 1, 1 << 52, 1<<53 - 1, 1 << 53, 1<<53 + 1,
		1 << 63, math.MaxUint64 / 2, math.MaxUint64 - 1}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		edges = append(edges, r.Uint64()>>r.IntN(64))
	}
	for i, a := range edges {
		b := edges[(i*7+3)%len(edges)]
		sum := new(big.Int).Add(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b))
		if got := run("add", strconv.FormatUint(a, 10), strconv.FormatUint(b, 10)); got != sum.String() {
			t.Fatalf("%d + %d = %s, want %s", a, b, got, sum)
		}
		want := "0"
		if a < b {
			want = "-1"
		} else if a > b {
			want = "1"
		}
		if got := run("cmp", strconv.FormatUint(a, 10), strconv.FormatUint(b, 10)); got != want {
			t.Fatalf("cmp(%d, %d) = %s, want %s", a, b, got, want)
		}
	}
	now := time.Now().UnixMicro()
	for _, tc := range []struct {
		last string
		ep   uint64
		want uint64
	}{
		{"", 0, uint64(now)}, // epoch 0: today's tokens
		{strconv.FormatInt(now+1000, 10), 0, uint64(now) + 1001}, // stored above the clock
		{"", 1, epoch.Floor(1, now)},
		{"", 2, epoch.Floor(2, now)}, // above 2^53: exact all the same
		{strconv.FormatUint(epoch.Floor(2, now), 10), 2, epoch.Floor(2, now) + 1},
		{strconv.FormatUint(epoch.Floor(7, now), 10), 3, epoch.Floor(7, now) + 1}, // a later epoch's token stays above
		{"", epoch.Max, epoch.Floor(epoch.Max, now)},
		{"18446744073709551614", 0, math.MaxUint64},
		// around 2^53, where minting leaves numbers for decimal strings
		{"9007199254740989", 0, 1<<53 - 2},
		{"9007199254740990", 0, 1<<53 - 1},
		{"9007199254740991", 0, 1 << 53},
		{"9999999999999998", 0, 9999999999999999},
		{strconv.FormatUint(epoch.Floor(1, now)+5, 10), 1, epoch.Floor(1, now) + 6},
		{"0000000000000000000000123", 0, uint64(now)},
		{"0007", 0, uint64(now)},
		{"12a", 0, uint64(now)}, // garbage reads as none
	} {
		got := run("mint", tc.last, tc.ep, now)
		if got != strconv.FormatUint(tc.want, 10) {
			t.Errorf("mint(%q, %d, %d) = %s, want %d", tc.last, tc.ep, now, got, tc.want)
		}
	}
	if err := arith.Run(ctx, c, nil, "mint", "18446744073709551615", 0, now).Err(); err == nil ||
		!strings.Contains(err.Error(), "token space exhausted") {
		t.Fatalf("mint past 2^64-1: %v", err)
	}
}

func TestTokenLayout(t *testing.T) {
	now := time.Now().UnixMicro()
	if epoch.Floor(0, now) != uint64(now) {
		t.Fatal("epoch 0 is not Redis time")
	}
	if epoch.Of(epoch.Floor(5, now)) != 5 || epoch.Of(uint64(now)) != 0 {
		t.Fatal("Of does not invert Floor")
	}
	// The year 2112 in µs is still below one epoch: no clock, however far
	// ahead, lifts a token of epoch e to epoch e+1.
	if y2112 := time.Date(2112, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(); uint64(y2112) >= 1<<epoch.Shift {
		t.Fatalf("µs of 2112 = %d reach the epoch bits", y2112)
	}
	if epoch.Floor(epoch.Max, 1<<epoch.Shift-1) != math.MaxUint64 {
		t.Fatal("the last epoch does not end at 2^64-1")
	}
}

// Without Sentinel on one server: epoch 0 at first; a restart without
// persistence (a new replication id, every key gone) moves a client that
// minted before to epoch 1, so its tokens stay above the lost ones even
// with the restarted server's clock ten minutes behind.
func TestRestartCountsAnEpoch(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	c := srv.Client()
	ns := redistest.Namespace(t)
	tr := epoch.New(c, ns, epoch.Options{})
	key := ns + ":counter"
	t1 := mint(t, c, tr, key)
	t2 := mint(t, c, tr, key)
	if epoch.Of(t1) != 0 || t2 <= t1 {
		t.Fatalf("before the restart: %d then %d", t1, t2)
	}
	srv.Restart()
	srv.SetClockOffset(-10 * time.Minute)
	t3 := mint(t, c, tr, key)
	if epoch.Of(t3) != 1 || t3 <= t2 {
		t.Fatalf("after a restart with the clock 10 min behind: %d (epoch %d) after %d", t3, epoch.Of(t3), t2)
	}
	// A client that never minted before now joins epoch 1 from the record.
	fresh := epoch.New(c, ns, epoch.Options{})
	if t4 := mint(t, c, fresh, key); epoch.Of(t4) != 1 || t4 <= t3 {
		t.Fatalf("a new client: %d (epoch %d) after %d", t4, epoch.Of(t4), t3)
	}
}

// A client that reached a restarted primary first, knowing nothing, gives it
// epoch 0 again; a client that minted before the restart then moves it
// above, and the first client is refused until it refreshes.
func TestClientMemoryRaisesACollidingEpoch(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	ns := redistest.Namespace(t)
	old := epoch.New(c, ns, epoch.Options{})
	key := ns + ":counter"
	before := mint(t, c, old, key)
	srv.Restart()
	fresh := epoch.New(c, ns, epoch.Options{})
	if tok := mint(t, c, fresh, key); epoch.Of(tok) != 0 {
		t.Fatalf("first client after a restart that lost the record: epoch %d, want 0", epoch.Of(tok))
	}
	if tok := mint(t, c, old, key); epoch.Of(tok) != 1 || tok <= before {
		t.Fatalf("the client that minted before the restart: %d (epoch %d), want epoch 1 above %d", tok, epoch.Of(tok), before)
	}
	if tok := mint(t, c, fresh, key); epoch.Of(tok) != 1 {
		t.Fatalf("the first client after the raise: epoch %d, want 1", epoch.Of(tok))
	}
}

// fixedSource is a Source a test sets.
type fixedSource struct{ e atomic.Uint64 }

func (f *fixedSource) Epoch(context.Context) (uint64, error) { return f.e.Load(), nil }

// A caller whose epoch is below the one recorded for the primary is
// refused and refreshes; one above raises the record for everyone.
func TestScriptsKeepTheHighestEpoch(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	tr := epoch.New(c, ns, epoch.Options{})
	st, err := tr.Current(ctx)
	if err != nil || st.Epoch != 0 {
		t.Fatalf("first client: %+v, %v", st, err)
	}
	// Another client raised this primary's epoch to 3: refused once, then 3.
	c.HSet(ctx, epoch.Key(ns), "r:"+st.ReplID, 3)
	refused := 0
	err = tr.Mint(ctx, func(st epoch.State) (bool, error) {
		r, err := mintScript.Run(ctx, c, []string{ns + ":a", tr.Key()}, st.ReplID, st.Epoch, st.Born).Slice()
		if err != nil {
			return false, err
		}
		if r[0].(int64) == -1 {
			refused++
			if r[2] != "3" {
				t.Errorf("refusal names recorded epoch %v, want 3", r[2])
			}
			return true, nil
		}
		if tok, _ := strconv.ParseUint(r[1].(string), 10, 64); epoch.Of(tok) != 3 {
			t.Errorf("minted in epoch %d after the refresh, want 3", epoch.Of(tok))
		}
		return false, nil
	})
	if err != nil || refused != 1 {
		t.Fatalf("stale client: refused %d times, err %v", refused, err)
	}
	// The record fell below what the client holds (it lost epoch 3): its
	// next mint refreshes to one above every epoch it knows.
	c.HSet(ctx, epoch.Key(ns), "r:"+st.ReplID, 1, "max", 1)
	if tok := mint(t, c, tr, ns+":a"); epoch.Of(tok) != 4 {
		t.Fatalf("minted in epoch %d, want 4", epoch.Of(tok))
	}
	if f := c.HGetAll(ctx, epoch.Key(ns)).Val(); f["r:"+st.ReplID] != "4" || f["max"] != "4" {
		t.Fatalf("record not moved above 3: %v", f)
	}
}

// A flush loses the epoch record (and the namespace's time with it) on the
// same primary, so the replication id alone cannot tell: a client that
// minted before moves above every epoch it knew, logged at error level,
// even when another client recreated the record first with that very
// epoch (the record's birth differs). The zombie's token, from before the
// flush, stays below every token minted after it, whatever the clock says.
func TestLostRecordMovesAbove(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	c := srv.Client()
	ns := redistest.Namespace(t)
	src := &fixedSource{}
	src.e.Store(2)
	var logs syncBuffer
	tr := epoch.New(c, ns, epoch.Options{Source: src, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	key := ns + ":counter"
	zombie := mint(t, c, tr, key)
	if epoch.Of(zombie) != 2 {
		t.Fatalf("before the flush: epoch %d, want the Sentinels' 2", epoch.Of(zombie))
	}
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	srv.SetClockOffset(-10 * time.Minute)
	// A client that never minted recreates the record with the Sentinels'
	// epoch, the zombie's: it cannot tell a flushed namespace from a new one.
	fresh := epoch.New(c, ns, epoch.Options{Source: src})
	if tok := mint(t, c, fresh, ns+":other"); epoch.Of(tok) != 2 {
		t.Fatalf("a new client after the flush: epoch %d, want 2", epoch.Of(tok))
	}
	after := mint(t, c, tr, key)
	if after <= zombie || epoch.Of(after) != 3 {
		t.Fatalf("after the flush: %d (epoch %d), want epoch 3 above the zombie's %d", after, epoch.Of(after), zombie)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "record lost") {
		t.Fatalf("no error logged for a lost record: %s", logs.String())
	}
	// The new client is refused its old epoch and joins the new one.
	if tok := mint(t, c, fresh, ns+":other"); epoch.Of(tok) != 3 {
		t.Fatalf("the new client after the move: epoch %d, want 3", epoch.Of(tok))
	}
	// A flush with no one recreating the record: the same.
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if tok := mint(t, c, tr, key); epoch.Of(tok) != 4 {
		t.Fatalf("after a second flush: epoch %d, want 4", epoch.Of(tok))
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// seqSource answers from a list, repeating the last answer.
type seqSource struct {
	mu  sync.Mutex
	seq []uint64
	n   int
}

func (s *seqSource) Epoch(context.Context) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.seq[min(s.n, len(s.seq)-1)]
	s.n++
	return e, nil
}

// The Sentinel's epoch gives a primary its first epoch, and is raised to
// when the Sentinels moved on while it was being assigned, but never raises
// a primary's recorded epoch otherwise: an old primary cut off from the
// Sentinels must keep minting below the new one.
func TestSentinelEpochRules(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()

	ns := redistest.Namespace(t)
	st, err := epoch.New(c, ns, epoch.Options{Source: &seqSource{seq: []uint64{3}}}).Current(ctx)
	if err != nil || st.Epoch != 3 {
		t.Fatalf("first sight with Sentinel epoch 3: %+v, %v", st, err)
	}
	// Another primary recorded at 1 (its record of epoch 1): Sentinel says 5.
	old := epoch.New(c, ns, epoch.Options{Source: &seqSource{seq: []uint64{5}}})
	c.HSet(ctx, epoch.Key(ns), "r:"+st.ReplID, 1)
	if got, err := old.Current(ctx); err != nil || got.Epoch != 1 {
		t.Fatalf("a recorded primary with a higher Sentinel epoch: %+v, %v (want its recorded 1)", got, err)
	}

	// The Sentinels move from 2 to 4 while the first epoch is assigned.
	ns2 := redistest.Namespace(t)
	src := &seqSource{seq: []uint64{2, 4}}
	if got, err := epoch.New(c, ns2, epoch.Options{Source: src}).Current(ctx); err != nil || got.Epoch != 4 {
		t.Fatalf("Sentinel epoch rising during the assignment: %+v, %v (want 4)", got, err)
	}
	// Sentinels reset (epoch 0) below an epoch in use: counted on from it.
	c.HDel(ctx, epoch.Key(ns2), "r:"+st.ReplID)
	if got, err := epoch.New(c, ns2, epoch.Options{Source: &seqSource{seq: []uint64{0}}}).Current(ctx); err != nil || got.Epoch != 5 {
		t.Fatalf("Sentinels behind the record: %+v, %v (want 4 + 1)", got, err)
	}
}

// An epoch source above Max is capped, loudly.
func TestEpochCapped(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	src := &fixedSource{}
	src.e.Store(epoch.Max + 10)
	var logs bytes.Buffer
	tr := epoch.New(c, ns, epoch.Options{Source: src, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if tok := mint(t, c, tr, ns+":a"); epoch.Of(tok) != epoch.Max {
		t.Fatalf("epoch %d, want the cap %d", epoch.Of(tok), epoch.Max)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "capped") {
		t.Fatalf("no error logged for a capped epoch: %s", logs.String())
	}
}

// The record keeps the newest primaries only.
func TestRecordPruned(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	for i := range 100 {
		c.HSet(ctx, epoch.Key(ns), fmt.Sprintf("r:old%03d", i), i)
	}
	c.HSet(ctx, epoch.Key(ns), "max", 99, "clk", 1, "crid", "old", "coff", 0)
	tr := epoch.New(c, ns, epoch.Options{})
	st, err := tr.Current(ctx)
	if err != nil || st.Epoch != 100 {
		t.Fatalf("new primary after 100 recorded: %+v, %v", st, err)
	}
	f, err := c.HGetAll(ctx, epoch.Key(ns)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 37 || f["born"] == "" || f["max"] != "100" || f["r:"+st.ReplID] != "100" || f["r:old099"] != "99" || f["r:old068"] != "" ||
		f["clk"] != "1" || f["crid"] != "old" || f["coff"] != "0" {
		t.Fatalf("record after pruning has %d fields: %v", len(f), f)
	}
}

// nowScript exposes lib.lua's epoch_now: the namespace's time in µs, with
// the clock record KEYS[1].
var nowScript = redis.NewScript(epoch.Lua + `return epoch_now(KEYS[1])`)

// The namespace's time continues from the record's high-water mark on a
// primary whose clock is behind (a new tenure: another replication id),
// returns to the node's own clock on a tenure whose clock is true (no jump
// forward), absorbs a clock stepped back on the same primary, and never
// goes back.
func TestNamespaceTime(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t, redistest.Options{}).Client()
	ns := redistest.Namespace(t)
	key := epoch.Key(ns)
	now := func() int64 {
		t.Helper()
		v, err := nowScript.Run(ctx, c, []string{key}).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tm := func() int64 {
		t.Helper()
		v, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v.UnixMicro()
	}
	rec := func() map[string]string {
		t.Helper()
		f, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	const skew = int64(120 * time.Second / time.Microsecond)
	const slack = int64(5 * time.Second / time.Microsecond) // this machine's pace between calls

	// A first call records the node's time.
	if n, r := now(), tm(); n > r || r-n > slack {
		t.Fatalf("first call: %d, TIME %d", n, r)
	}
	// This node is a new tenure whose clock is 2 minutes behind the old
	// primary's, whose last time the record holds.
	mark := tm() + skew
	c.HSet(ctx, key, "clk", mark, "crid", "old-primary", "coff", 0)
	first := now()
	if first < mark || first-mark > slack {
		t.Fatalf("after a failover to a node 2 min behind: %d, want from the mark %d on", first, mark)
	}
	f := rec()
	off, _ := strconv.ParseInt(f["coff"], 10, 64)
	if f["crid"] == "old-primary" || off < skew-slack || off > skew+slack {
		t.Fatalf("tenure offset: %v, want about %d µs for this node", f, skew)
	}
	if second := now(); second < first {
		t.Fatalf("time went back: %d after %d", second, first)
	}
	// Failing back to a node with a true clock (the offset was computed
	// for another tenure): its own clock, not 2 minutes ahead of it.
	c.HSet(ctx, key, "crid", "slow-primary", "coff", skew, "clk", tm())
	if n, r := now(), tm(); n-r > slack {
		t.Fatalf("after failing back to a true clock: %d, TIME %d: jumped by %v", n, r, time.Duration(n-r)*time.Microsecond)
	}
	if f := rec(); f["crid"] == "slow-primary" {
		t.Fatalf("offset after failing back: %v, want one for this node", f)
	}
	// Failing back to a true clock after a tenure that started behind it
	// by the failover's time (here 5 s): the time goes on from the mark, not
	// 5 s ahead of it, so leases and delays set meanwhile do not end early.
	lag := int64(5 * time.Second / time.Microsecond)
	mark = tm() - lag
	c.HSet(ctx, key, "crid", "slow-primary", "coff", skew, "clk", mark)
	if n := now(); n < mark || n-mark > slack {
		t.Fatalf("after failing back behind the clock by 5 s: %d, want from the mark %d on (TIME %d)", n, mark, tm())
	}
	f = rec()
	if off, _ := strconv.ParseInt(f["coff"], 10, 64); off > -lag+slack || off < -lag-slack || f["cat"] == "" {
		t.Fatalf("offset after failing back behind the clock: %v, want about %d µs and its start", f, -lag)
	}
	// It catches up at 1 %: 200 s after the offset was set, 2 s of it are
	// gone; 1 000 s after, all of it (and the record says 0 again).
	at := tm() - 200*1000000
	c.HSet(ctx, key, "cat", at, "coff", -lag)
	if n, r := now(), tm(); r-n > lag-2000000+slack || r-n < lag-2000000-slack {
		t.Fatalf("200 s into the catch-up: %v behind TIME, want about 3 s", time.Duration(r-n)*time.Microsecond)
	}
	c.HSet(ctx, key, "cat", tm()-1000*1000000)
	if n, r := now(), tm(); r-n > slack {
		t.Fatalf("after the catch-up: %v behind TIME", time.Duration(r-n)*time.Microsecond)
	}
	if f := rec(); f["coff"] != "0" {
		t.Fatalf("offset after the catch-up: %v, want 0", f)
	}
	// A new tenure more than a minute past the mark (a long outage after
	// a tenure behind its clock): a minute behind its clock at most, the
	// rest jumped.
	c.HSet(ctx, key, "crid", "gone-primary", "coff", skew, "clk", tm()-int64(10*time.Minute/time.Microsecond))
	if n, r := now(), tm(); r-n > int64(epoch.CatchUpMax/time.Microsecond)+slack || r-n < int64(epoch.CatchUpMax/time.Microsecond)-slack {
		t.Fatalf("after a 10-minute gap: %v behind TIME, want about %v", time.Duration(r-n)*time.Microsecond, epoch.CatchUpMax)
	}
	c.HSet(ctx, key, "crid", "x", "coff", 0, "clk", tm()) // back to the node's own clock
	now()
	// The clock steps back by 30 s on the same primary: the offset absorbs it.
	step := int64(30 * time.Second / time.Microsecond)
	mark = tm() + step
	c.HSet(ctx, key, "clk", mark)
	if n := now(); n < mark || n-mark > slack {
		t.Fatalf("after a step back: %d, want from the mark %d on", n, mark)
	}
	if off, _ := strconv.ParseInt(rec()["coff"], 10, 64); off < step-slack || off > step+slack {
		t.Fatalf("offset after a step back: %d, want about %d", off, step)
	}
	// Less than a second behind the mark: the time holds at the mark and
	// the offset stays.
	c.HSet(ctx, key, "clk", tm()+step+500000)
	before := rec()
	if n := now(); n < tm()+step {
		t.Fatalf("time went below the mark: %d", n)
	}
	if after := rec(); after["coff"] != before["coff"] || after["crid"] != before["crid"] {
		t.Fatalf("offset changed for a mark less than a second ahead: %v -> %v", before, after)
	}
}

// A Redis user that may not run INFO cannot tell primaries apart: epochs
// are off (tokens as before epochs), said at error level, and minting works.
func TestInfoDeniedTurnsEpochsOff(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	if err := srv.Client().Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "noinfo", Password: "pw"})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Info(ctx, "replication").Err(); err == nil {
		t.Fatal("the restricted user may run INFO")
	}
	var logs bytes.Buffer
	ns := redistest.Namespace(t)
	tr := epoch.New(c, ns, epoch.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := mint(t, c, tr, ns+":a")
	b := mint(t, c, tr, ns+":a")
	if epoch.Of(a) != 0 || b <= a {
		t.Fatalf("tokens without INFO: %d then %d", a, b)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "+info") {
		t.Fatalf("epochs off without a loud log: %s", logs.String())
	}
}

// A server without a replication section (the demo's in-process Redis)
// has no failover: epochs are off with a warning, not an error that asks
// an operator to grant INFO, and minting works.
func TestNoReplicationSectionTurnsEpochsOffQuietly(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	var logs bytes.Buffer
	ns := "noreplication"
	tr := epoch.New(c, ns, epoch.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := mint(t, c, tr, ns+":a")
	b := mint(t, c, tr, ns+":a")
	if epoch.Of(a) != 0 || b <= a {
		t.Fatalf("tokens without a replication id: %d then %d", a, b)
	}
	if strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "level=WARN") ||
		!strings.Contains(logs.String(), "no replication id") {
		t.Fatalf("want one warning that the server gives no replication id: %s", logs.String())
	}
}

// On Redis Cluster the slot's master decides the epoch in the script: a
// tenure's first mint records the master's config epoch when it is above
// every epoch recorded in the slot's record, else one more than the
// highest; later mints of the tenure keep the recorded epoch.
func TestClusterNodeEpochs(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	ctx := context.Background()
	cc := redistest.StartCluster(t).Client()
	ns := redistest.Namespace(t)
	tr := epoch.New(cc, ns, epoch.Options{})
	if tr.Enabled() || !tr.Cluster() {
		t.Fatal("a cluster client is not tracked per node")
	}
	if st, err := tr.Current(ctx); err != nil || st != epoch.Node {
		t.Fatalf("cluster state %+v, %v", st, err)
	}
	key := "{x}" + ns
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := node.ClusterInfo(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var myEpoch uint64
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_my_epoch:"); ok {
			myEpoch, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	a := mint(t, cc, tr, key)
	if epoch.Of(a) != myEpoch {
		t.Fatalf("first mint in epoch %d, want the master's config epoch %d", epoch.Of(a), myEpoch)
	}
	rec := cc.HGetAll(ctx, key+":clock").Val()
	if rec["max"] != strconv.FormatUint(myEpoch, 10) || len(rec) < 2 {
		t.Fatalf("record after the first mint: %v", rec)
	}
	// A record that went above the config epoch (a slot moved here from a
	// master with a higher one) is continued: one more than the highest.
	key2 := "{y}" + ns
	if err := cc.HSet(ctx, key2+":clock", "max", myEpoch+100, "r:gone", myEpoch+100).Err(); err != nil {
		t.Fatal(err)
	}
	b := mint(t, cc, tr, key2)
	if epoch.Of(b) != myEpoch+101 {
		t.Fatalf("mint over a higher record in epoch %d, want %d", epoch.Of(b), myEpoch+101)
	}
	if c := mint(t, cc, tr, key2); epoch.Of(c) != myEpoch+101 || c <= b {
		t.Fatalf("second mint of the tenure: %d (epoch %d) after %d", c, epoch.Of(c), b)
	}
}

// A primary that changes on every attempt ends a mint with ErrUnsettled.
func TestMintUnsettled(t *testing.T) {
	c := redistest.Start(t, redistest.Options{}).Client()
	tr := epoch.New(c, redistest.Namespace(t), epoch.Options{})
	runs := 0
	err := tr.Mint(context.Background(), func(epoch.State) (bool, error) { runs++; return true, nil })
	if !errors.Is(err, epoch.ErrUnsettled) || runs != epoch.MaxAttempts {
		t.Fatalf("after %d runs: %v", runs, err)
	}
}

// On a real Sentinel failover: the Sentinel's config epoch moves tokens to
// epoch 1 for a client told of the Sentinel, and the record does the same
// for one that is not.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover skipped in -short mode")
	}
	f := redistest.StartFailover(t, redistest.FailoverOptions{})
	c := f.Client()
	ns := redistest.Namespace(t)
	withSentinel := epoch.New(c, ns, epoch.Options{Sentinel: f.ClientOptions()})
	counting := epoch.New(c, ns, epoch.Options{})
	a := mint(t, c, withSentinel, ns+":a")
	b := mint(t, c, counting, ns+":b")
	if epoch.Of(a) != 0 || epoch.Of(b) != 0 {
		t.Fatalf("before any failover: epochs %d and %d", epoch.Of(a), epoch.Of(b))
	}
	f.Sync()
	f.CutReplication()
	a2 := mint(t, c, withSentinel, ns+":a") // lost with the primary
	f.KillPrimary()
	a3 := mintRetrying(t, c, withSentinel, ns+":a")
	b3 := mintRetrying(t, c, counting, ns+":b")
	if epoch.Of(a3) != 1 || a3 <= a2 {
		t.Fatalf("with Sentinel after the failover: %d (epoch %d) after the lost %d", a3, epoch.Of(a3), a2)
	}
	if epoch.Of(b3) != 1 || b3 <= b {
		t.Fatalf("counting after the failover: %d (epoch %d) after %d", b3, epoch.Of(b3), b)
	}
}

// mintRetrying mints through a failover client whose pooled connections
// may still point at the killed primary: go-redis redials through the
// Sentinel after such an error, so a few attempts settle it.
func mintRetrying(t *testing.T, c *redis.Client, tr *epoch.Tracker, key string) uint64 {
	t.Helper()
	var err error
	for range 5 {
		var tok uint64
		if tok, err = tryMint(c, tr, key); err == nil {
			return tok
		}
	}
	t.Fatalf("no mint after the failover: %v", err)
	return 0
}

// The catch-up constants the Go side reads the clock record with are
// lib.lua's.
func TestCatchUpConstantsMatchLua(t *testing.T) {
	for _, want := range []string{
		fmt.Sprintf("local CATCH_UP_DIV = %d\n", epoch.CatchUpDiv),
		fmt.Sprintf("local CATCH_UP_MAX_US = %d\n", epoch.CatchUpMax.Microseconds()),
	} {
		if !strings.Contains(epoch.Lua, want) {
			t.Errorf("lib.lua lacks %q", want)
		}
	}
}

// A replica that accepts writes (replica-read-only no) is refused by every
// script that looks for the primary's replication id, with an error that
// says so: its writes would go at its next sync.
func TestWritableReplicaRefused(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t, redistest.Options{})
	replica := redistest.Start(t, redistest.Options{})
	rc := replica.Client()
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := rc.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "replica-read-only", "no").Err(); err != nil {
		t.Fatal(err)
	}
	rid := redis.NewScript(epoch.Lua + `return epoch_replid()`)
	err := rid.Run(ctx, rc, nil).Err()
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("epoch_replid on a writable replica: %v, want an error naming the replica", err)
	}
	if got, err := rid.Run(ctx, primary.Client(), nil).Text(); err != nil || got == "" {
		t.Fatalf("epoch_replid on the primary: %q, %v", got, err)
	}
}

// A primary's clock steps back, then is set right (its NTP fixed): the
// offset that absorbed the step is dropped once the node's own clock has
// reached the namespace's time, so the time goes on from where it was
// instead of jumping ahead of the clock by the step (every lease ending
// early, delayed jobs firing early).
func TestClockSetRightAfterAStepBackDoesNotJumpAhead(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	c := srv.Client()
	key := epoch.Key(redistest.Namespace(t))
	now := func() time.Time {
		t.Helper()
		v, err := nowScript.Run(ctx, c, []string{key}).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return time.UnixMicro(v)
	}
	const step = 10 * time.Minute
	const slack = 5 * time.Second // this machine's pace between calls
	if d := time.Until(now()).Abs(); d > slack {
		t.Fatalf("first call %v off the local clock", d)
	}
	srv.SetClockOffset(-step)
	if d := time.Until(now()).Abs(); d > slack {
		t.Fatalf("after the clock stepped back by %v: the time is %v off the local clock, want it held", step, d)
	}
	srv.SetClockOffset(0)
	before := now()
	if d := time.Until(before); d.Abs() > slack {
		t.Fatalf("after the clock was set right: the time is %v ahead of the local clock (want about 0, not the step %v)", d, step)
	}
	if after := now(); after.Before(before) {
		t.Fatalf("time went back: %v after %v", after, before)
	}
}

// One lost record moves the epoch once: a process's trackers (a pool's
// ledger, its lease manager, its leader's client) that all minted before a
// restart without persistence each find the loss, and the first moves the
// primary above every epoch they minted in; the others keep that epoch,
// which is above theirs too, and log the loss at debug level only.
// Moving again would give the same order while spending an epoch, logging
// the loss once per tracker, and refusing every mint made with the first.
func TestLostRecordMovesOnce(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	ns := redistest.Namespace(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	trs := []*epoch.Tracker{
		epoch.New(c, ns, epoch.Options{Logger: log}),
		epoch.New(c, ns, epoch.Options{Logger: log}),
		epoch.New(c, ns, epoch.Options{Logger: log}),
	}
	before := make([]uint64, len(trs))
	for i, tr := range trs {
		before[i] = mint(t, c, tr, fmt.Sprintf("%s:counter:%d", ns, i))
	}
	srv.Restart()
	for i, tr := range trs {
		if tok := mint(t, c, tr, fmt.Sprintf("%s:counter:%d", ns, i)); epoch.Of(tok) != 1 || tok <= before[i] {
			t.Fatalf("tracker %d after the restart: %d (epoch %d), want epoch 1 above %d", i, tok, epoch.Of(tok), before[i])
		}
	}
	if got := strings.Count(logs.String(), "level=ERROR msg=\"fencing epoch record lost"); got != 1 {
		t.Fatalf("%d error lines for one lost record, want 1:\n%s", got, logs.String())
	}
	// Each tracker found the loss: the first moved the epoch, the others kept it.
	if got := strings.Count(logs.String(), "level=DEBUG msg=\"fencing epoch record lost"); got != len(trs)-1 {
		t.Fatalf("%d debug lines for the trackers that kept the moved epoch, want %d:\n%s", got, len(trs)-1, logs.String())
	}
	if f := c.HGetAll(context.Background(), epoch.Key(ns)).Val(); f["max"] != "1" {
		t.Fatalf("record after one loss: %v, want max 1", f)
	}
}

// TestNewPrimaryLoggedOncePerProcess: the trackers of one process (a
// pool's ledger, its lease manager, a client) each learn a new primary,
// but the process logs it at info level once; the others log it at debug
// level, so one failover is one line in the process's log.
func TestNewPrimaryLoggedOncePerProcess(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := srv.Client()
	ns := redistest.Namespace(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	trs := []*epoch.Tracker{
		epoch.New(c, ns, epoch.Options{Logger: log}),
		epoch.New(c, ns, epoch.Options{Logger: log}),
		epoch.New(c, ns, epoch.Options{Logger: log}),
	}
	for i, tr := range trs {
		mint(t, c, tr, fmt.Sprintf("%s:counter:%d", ns, i))
	}
	srv.Restart()
	for i, tr := range trs {
		mint(t, c, tr, fmt.Sprintf("%s:counter:%d", ns, i))
	}
	if got := strings.Count(logs.String(), "level=INFO msg=\"fencing epoch: new primary\""); got != 1 {
		t.Fatalf("%d info lines for one new primary, want 1:\n%s", got, logs.String())
	}
	if got := strings.Count(logs.String(), "level=DEBUG msg=\"fencing epoch: new primary\""); got != len(trs)-1 {
		t.Fatalf("%d debug lines for the process's other trackers, want %d:\n%s", got, len(trs)-1, logs.String())
	}
	// A second new primary is logged again, once.
	srv.Restart()
	for i, tr := range trs {
		mint(t, c, tr, fmt.Sprintf("%s:counter:%d", ns, i))
	}
	if got := strings.Count(logs.String(), "level=INFO msg=\"fencing epoch: new primary\""); got != 2 {
		t.Fatalf("%d info lines for two new primaries, want 2:\n%s", got, logs.String())
	}
}

// peekScript is nowScript as a read (holder.lua, Ledger.ReadTime): the
// mark is not moved.
var peekScript = redis.NewScript(epoch.Lua + `return epoch_now(KEYS[1], nil, true)`)

// A node carrying a positive offset (a tenure behind the time it took
// over: here 3 hours behind a namespace's time 3 hours ahead of real time)
// has its clock set right, stepped forward by 3 hours while still below
// the mark: the step is absorbed into the offset, so the time goes on from
// where it was instead of jumping ahead by the step (leases ending early,
// delays firing early by it). A read between the step and the next write
// reads the time that write then sets. A gap between calls shorter than
// CatchUpMax is real time and keeps the offset.
func TestClockSetRightWhileBehindTheMarkDoesNotJumpAhead(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{ClockShim: true})
	c := srv.Client()
	key := epoch.Key(redistest.Namespace(t))
	run := func(s *redis.Script) time.Time {
		t.Helper()
		v, err := s.Run(ctx, c, []string{key}).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return time.UnixMicro(v)
	}
	now := func() time.Time { t.Helper(); return run(nowScript) }
	offset := func() time.Duration {
		t.Helper()
		v, err := c.HGet(ctx, key, "coff").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return time.Duration(v) * time.Microsecond
	}
	const lead = 3 * time.Hour
	const slack = 5 * time.Second // this machine's pace between calls
	srv.SetClockOffset(-lead)
	// A new tenure on this node, 3 hours behind, takes over a namespace
	// whose time is 3 hours ahead: an offset of 6 hours.
	now()
	c.HSet(ctx, key, "clk", time.Now().Add(lead).UnixMicro(), "crid", "old-primary", "coff", 0)
	before := now()
	if d := time.Until(before) - lead; d.Abs() > slack {
		t.Fatalf("after the failover: %v ahead of real time, want about %v", time.Until(before), lead)
	}
	if off := offset(); (off - 2*lead).Abs() > slack {
		t.Fatalf("tenure offset %v, want about %v", off, 2*lead)
	}
	// The node's clock is set right.
	srv.SetClockOffset(0)
	read := run(peekScript)
	if d := read.Sub(before); d < 0 || d > slack {
		t.Fatalf("a read after the clock was set right: %v past the last time (want about 0, not the step %v)", d, lead)
	}
	after := now()
	if after.Before(read) {
		t.Fatalf("time went back: %v after %v", after, read)
	}
	if d := after.Sub(before); d > slack {
		t.Fatalf("after the clock was set right: the time jumped ahead by %v (want about 0, not the step %v)", d, lead)
	}
	if off := offset(); (off - lead).Abs() > slack {
		t.Fatalf("offset after the clock was set right: %v, want about %v (the step absorbed)", off, lead)
	}
	if later := now(); later.Before(after) {
		t.Fatalf("time went back: %v after %v", later, after)
	}
	// The last call was 30 s ago by this node's clock (a gap a live
	// pool does not leave, but below CatchUpMax): real time, kept.
	gap := 30 * time.Second
	c.HSet(ctx, key, "clk", time.Now().Add(lead-gap).UnixMicro())
	if ahead := time.Until(now()); (ahead - lead).Abs() > slack {
		t.Fatalf("after a %v gap: %v ahead of real time, want about %v", gap, ahead, lead)
	}
}

// On Redis Cluster a queue's or a resource's own clock record is raised
// only by calls on it, so a quiet one goes more than CatchUpMax without a
// call while pools are live: that gap is real time, and a positive offset
// is kept (its due times are not delayed by the quiet spell).
func TestClusterQuietRecordKeepsItsOffset(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster skipped in -short mode")
	}
	ctx := context.Background()
	cc := redistest.StartCluster(t).Client()
	key := "{x}" + redistest.Namespace(t) + ":clock"
	rid, err := redis.NewScript(epoch.Lua+`return epoch_replid()`).Run(ctx, cc, []string{key}).Text()
	if err != nil {
		t.Fatal(err)
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	const off, gap, slack = 2 * time.Minute, 90 * time.Second, 5 * time.Second
	tm := node.Time(ctx).Val()
	cc.HSet(ctx, key, "crid", rid, "coff", off.Microseconds(), "clk", tm.Add(off-gap).UnixMicro())
	v, err := nowScript.Run(ctx, cc, []string{key}).Int64()
	if err != nil {
		t.Fatal(err)
	}
	if d := time.UnixMicro(v).Sub(node.Time(ctx).Val()) - off; d.Abs() > slack {
		t.Fatalf("after a quiet spell of %v: the time is %v off TIME + the offset %v, want it kept", gap, d, off)
	}
}
