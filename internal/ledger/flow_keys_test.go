package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// claimAll claims q's due jobs in batches of up to 500 until a claim takes
// none, and returns the claimed jobs.
func claimAll(t *testing.T, l *ledger.Ledger, q string) []ledger.Claimed {
	t.Helper()
	var out []ledger.Claimed
	for {
		r, err := l.Claim(context.Background(), q, "p", time.Minute, 500)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Jobs) == 0 {
			return out
		}
		out = append(out, r.Jobs...)
	}
}

// succeed completes jobs as succeeded, in one call.
func succeed(t *testing.T, l *ledger.Ledger, q string, jobs []ledger.Claimed) {
	t.Helper()
	cs := make([]ledger.Completion, len(jobs))
	for i, j := range jobs {
		cs[i] = ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}
	}
	out, err := l.Complete(context.Background(), q, cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range out {
		if !c.Applied {
			t.Fatalf("completion not applied: %+v", c)
		}
	}
}

// TestLimitsHashForgetsIdleKeys: a key enters the limits hash when a job
// parks on it and leaves it when the release of its last permit leaves it
// nothing held, promised or waiting, whether that release is a completion
// or a cancellation: 1,100 keys that each parked a job leave an empty hash.
// Entries an earlier version left (keys with no zsets) neither hide a key
// at its limit from Limits nor survive a Limits or Counts read.
func TestLimitsHashForgetsIdleKeys(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "fk"})
	const q, keys = "q", 1100
	limitsKey := "fk:{q}:limits"
	hlen := func() int64 {
		t.Helper()
		n, err := rdb.HLen(ctx, limitsKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var js []*ledger.NewJob
	for i := range keys {
		for j := range 2 { // the second is parked at its enqueue (max 1)
			js = append(js, &ledger.NewJob{ID: fmt.Sprintf("j%d-%d", i, j), Kind: "k", Queue: q, Payload: []byte(`{}`),
				MaxRetries: 1, Flow: &ledger.Flow{LimitKey: fmt.Sprintf("a:%05d", i), LimitMax: 1}})
		}
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	if n := hlen(); n != keys {
		t.Fatalf("limits hash: %d entries, want %d (a job parked on each key)", n, keys)
	}
	// The first of each key runs and ends: its parked job is woken (promised).
	first := claimAll(t, l, q)
	if len(first) != keys {
		t.Fatalf("claimed %d, want %d", len(first), keys)
	}
	succeed(t, l, q, first)
	// The woken jobs run and end, all but one together; the last one's
	// promise ends with its cancellation.
	second := claimAll(t, l, q)
	if len(second) != keys {
		t.Fatalf("claimed %d woken jobs, want %d", len(second), keys)
	}
	succeed(t, l, q, second[:keys-1])
	if n := hlen(); n != 1 {
		t.Fatalf("limits hash after the woken jobs ended: %d entries, want 1 (the key still held)", n)
	}
	// a woken job cancelled before its claim: its promise ends the key
	if _, err := l.Insert(ctx, []*ledger.NewJob{
		{ID: "c1", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "c", LimitMax: 1}},
		{ID: "c2", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "c", LimitMax: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	c := claimAll(t, l, q)
	if len(c) != 1 || c[0].ID != "c1" {
		t.Fatalf("claimed %+v, want c1 (c2 parked)", c)
	}
	succeed(t, l, q, append(c, second[keys-1])) // c2 woken, promised
	if n := hlen(); n != 1 {
		t.Fatalf("limits hash: %d entries, want 1 (c, promised to c2)", n)
	}
	if _, err := l.Cancel(ctx, q, "c2", "op", ""); err != nil {
		t.Fatal(err)
	}
	if n := hlen(); n != 0 {
		keys, _ := rdb.HKeys(ctx, limitsKey).Result()
		t.Fatalf("limits hash keeps %d idle keys (%.5q) after every job ended", n, keys)
	}

	// Entries left by an earlier version, sorted before a key at its limit.
	left := make([]any, 0, 2*keys)
	for i := range keys {
		left = append(left, fmt.Sprintf("a:%05d", i), "1")
	}
	if err := rdb.HSet(ctx, limitsKey, left...).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{
		{ID: "s1", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "z:stuck", LimitMax: 1}},
		{ID: "s2", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "z:stuck", LimitMax: 1}},
	}); err != nil {
		t.Fatal(err)
	}
	if s := claimAll(t, l, q); len(s) != 1 || s[0].ID != "s1" {
		t.Fatalf("claimed %+v, want s1 (s2 parked)", s)
	}
	lim, _, err := l.Limits(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(lim) != 1 || lim[0].Key != "z:stuck" || lim[0].Held != 1 || lim[0].Waiting != 1 || !lim[0].AtLimit ||
		len(lim[0].Holders) != 1 || lim[0].Holders[0] != "s1" {
		t.Fatalf("limits: %+v; want z:stuck, 1 of 1 held by s1, 1 waiting", lim)
	}
	if n := hlen(); n != 1 {
		t.Fatalf("limits hash after Limits: %d entries, want 1 (the idle ones pruned)", n)
	}
	// Counts prunes them too, and counts the parked job as pending.
	if err := rdb.HSet(ctx, limitsKey, left...).Err(); err != nil {
		t.Fatal(err)
	}
	counts, err := l.Counts(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if counts[ledger.Pending] != 1 {
		t.Fatalf("pending %d, want 1 (s2 parked)", counts[ledger.Pending])
	}
	if n := hlen(); n != 1 {
		t.Fatalf("limits hash after Counts: %d entries, want 1 (the idle ones pruned)", n)
	}
}

// TestLimitsListsKeysAtLimitFirst: with more keys with holders or waiting
// jobs than one Limits read returns, the keys at their limit are listed
// first, whatever their names.
func TestLimitsListsKeysAtLimitFirst(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "fk"})
	const q = "q"
	var js []*ledger.NewJob
	// 1,001 keys of max 2 with 3 jobs each (the third parked at its
	// enqueue), sorted before key z of max 1 with 2 jobs (the second parked)
	for i := range 1001 {
		for j := range 3 {
			js = append(js, &ledger.NewJob{ID: fmt.Sprintf("a%d-%d", i, j), Kind: "k", Queue: q, Payload: []byte(`{}`),
				MaxRetries: 1, Flow: &ledger.Flow{LimitKey: fmt.Sprintf("a:%05d", i), LimitMax: 2}})
		}
	}
	js = append(js,
		&ledger.NewJob{ID: "z1", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "z", LimitMax: 1}},
		&ledger.NewJob{ID: "z2", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "z", LimitMax: 1}})
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	running := claimAll(t, l, q) // 2 of each a: key, z1
	// both holders of each a: key end: its parked job is woken (promised
	// one of its 2 permits), below its limit with nothing parked
	var end []ledger.Claimed
	for _, j := range running {
		if j.ID[0] == 'a' {
			end = append(end, j)
		}
	}
	succeed(t, l, q, end)
	lim, _, err := l.Limits(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(lim) != 1 { // the a: keys hold nothing back: 1 of 2 promised, nothing parked
		t.Fatalf("Limits listed %d keys, want z alone", len(lim))
	}
	if lim[0].Key != "z" || !lim[0].AtLimit || lim[0].Waiting != 1 {
		t.Fatalf("first listed %+v; want z, at its limit, 1 waiting", lim[0])
	}
}

// TestRateKeysNeverShareZsets: a rate key's deferrals are not the starts of
// the rate key named like them in the earlier layout (key + ":held"): rate
// "p" at 1 per 5s defers 9 jobs, then rate "p:held" at 5 per 5s starts 5 at
// once.
func TestRateKeysNeverShareZsets(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "fk"})
	const q = "q"
	rate := func(id, key string, max int) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: key, RateMax: max, RatePer: 5 * time.Second}}
	}
	var js []*ledger.NewJob
	for i := range 10 {
		js = append(js, rate(fmt.Sprintf("p%d", i), "p", 1))
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 1 || len(r.Dropped) != 9 {
		t.Fatalf("claimed %d, held back %d; want 1 and 9", len(r.Jobs), len(r.Dropped))
	}
	js = nil
	for i := range 5 {
		js = append(js, rate(fmt.Sprintf("h%d", i), "p:held", 5))
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err = l.Claim(ctx, q, "p", time.Minute, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 5 {
		t.Fatalf("rate p:held (5 per 5s, never used) started %d of 5 (held back %+v)", len(r.Jobs), r.Dropped)
	}
	_, rates, err := l.Limits(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]int{"p": {1, 9}, "p:held": {5, 0}}
	got := map[string][2]int{}
	for _, s := range rates {
		got[s.Key] = [2]int{s.Starts, s.Deferred}
	}
	for k, w := range want {
		// p:held deferred nothing, so it need not be listed
		if g, ok := got[k]; (ok || w[1] > 0) && g != w {
			t.Errorf("rate %s: %d starts, %d deferred; want %d, %d (rates %+v)", k, g[0], g[1], w[0], w[1], rates)
		}
	}
}

// TestRateCancelledDeferralFreesItsStart: a cancelled job deferred by its
// rate leaves the rate's deferrals (and the rates hash once none is left),
// so the next job is deferred to the rate's next start, not behind the
// cancelled ones' starts.
func TestRateCancelledDeferralFreesItsStart(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "fk"})
	const q, per = "q", time.Minute
	rate := func(id string) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "prov", RateMax: 1, RatePer: per}}
	}
	var js []*ledger.NewJob
	for i := range 20 {
		js = append(js, rate(fmt.Sprintf("r%d", i)))
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 1 || len(r.Dropped) != 19 {
		t.Fatalf("claimed %d, held back %d; want 1 and 19", len(r.Jobs), len(r.Dropped))
	}
	started := r.Jobs[0].ID
	for _, d := range r.Dropped {
		rec, err := l.Get(ctx, q, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.ID == "r1" {
			t.Logf("deferred: %q", rec.WaitingFor)
		}
		if _, err := l.Cancel(ctx, q, d.ID, "op", ""); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.Exists(ctx, "fk:{q}:rate-held:prov").Result(); err != nil || n != 0 {
		t.Fatalf("the rate's deferrals outlive their cancelled jobs (%d, %v)", n, err)
	}
	if ok, err := rdb.HExists(ctx, "fk:{q}:rates", "prov").Result(); err != nil || ok {
		t.Fatalf("the rates hash keeps prov with no deferral left (%v, %v)", ok, err)
	}
	if _, err := l.Insert(ctx, []*ledger.NewJob{rate("next")}); err != nil {
		t.Fatal(err)
	}
	r, err = l.Claim(ctx, q, "p", time.Minute, 20)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 0 || len(r.Dropped) != 1 {
		t.Fatalf("claimed %+v, held back %+v; want next deferred (1 start per %v)", r.Jobs, r.Dropped, per)
	}
	w, err := rdb.ZRangeWithScores(ctx, "fk:{q}:rate:prov", 0, -1).Result()
	if err != nil || len(w) != 1 || !strings.HasPrefix(w[0].Member.(string), started+":") {
		t.Fatalf("rate window %+v (%v); want %s's start alone", w, err, started)
	}
	at, err := rdb.HGet(ctx, "fk:{q}:job:next", "wait_at").Result()
	if err != nil {
		t.Fatal(err)
	}
	atMS, _ := strconv.ParseInt(at, 10, 64)
	if want := int64(w[0].Score) + per.Milliseconds(); atMS != want {
		t.Fatalf("next deferred to %d, want %d (the start after the window's one start, %v later)",
			atMS, want, time.Duration(atMS-want)*time.Millisecond)
	}
	_, rates, err := l.Limits(ctx, q)
	if err != nil || len(rates) != 1 || rates[0].Deferred != 1 || rates[0].Starts != 1 {
		t.Fatalf("rates %+v (%v); want prov with 1 start and 1 deferred", rates, err)
	}
}

// TestGroupedLimitedJobBehindItsGroupHoldsNoPermit: a job under a limit
// that enters its group's own index (behind the group's other jobs) is not
// promised a permit at its enqueue, so a job of the same key in another
// group is claimed at once; a promise an earlier version gave such a job
// is dropped by the next enqueue that finds nothing holding the key.
func TestGroupedLimitedJobBehindItsGroupHoldsNoPermit(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "fk"})
	job := func(id, group, key string) *ledger.NewJob {
		j := &ledger.NewJob{ID: id, Kind: "k", Payload: []byte(`{}`), MaxRetries: 1, Group: group}
		if key != "" {
			j.Flow = &ledger.Flow{LimitKey: key, LimitMax: 1}
		}
		return j
	}
	for _, legacy := range []bool{false, true} {
		q := "q"
		if legacy {
			q = "legacy"
		}
		holders := "fk:{" + q + "}:limit:exp:holders"
		var js []*ledger.NewJob
		for i := range 300 {
			js = append(js, job(fmt.Sprintf("a%d", i), "A", ""))
		}
		js = append(js, job("x", "A", "exp"))
		for _, j := range js {
			j.Queue = q
		}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		if n, err := rdb.Exists(ctx, holders).Result(); err != nil || n != 0 {
			t.Fatalf("%s: x, behind its group's 300 jobs, holds a promise (%d, %v)", q, n, err)
		}
		if legacy { // the earlier version's promise
			if err := rdb.ZAdd(ctx, holders, redis.Z{Score: 0, Member: "x"}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		y := job("y", "B", "exp")
		y.Queue = q
		if _, err := l.Insert(ctx, []*ledger.NewJob{y}); err != nil {
			t.Fatal(err)
		}
		if w, err := rdb.HGet(ctx, "fk:{"+q+"}:job:y", "wait").Result(); err != redis.Nil {
			t.Fatalf("%s: y of group B parked at its enqueue: wait %q (%v)", q, w, err)
		}
		if m, err := rdb.ZRange(ctx, holders, 0, -1).Result(); err != nil || len(m) != 1 || m[0] != "y" {
			t.Fatalf("%s: exp's holders %v (%v), want y's promise alone", q, m, err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 2)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, j := range r.Jobs {
			ids[j.ID] = true
		}
		if !ids["y"] || !ids["a0"] {
			t.Fatalf("%s: claimed %+v (held back %+v), want a0 and y: the groups' heads", q, r.Jobs, r.Dropped)
		}
		// A's jobs run; x, once it leads, is parked behind y's permit, then
		// runs when y ends.
		var xs []ledger.Claimed
		for range 400 {
			r, err := l.Claim(ctx, q, "p", time.Minute, 50)
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range r.Jobs {
				if j.ID == "x" {
					t.Fatalf("%s: x claimed while y holds exp's one permit", q)
				}
			}
			if len(r.Jobs) == 0 {
				break
			}
			xs = append(xs, r.Jobs...)
		}
		if rec, err := l.Get(ctx, q, "x"); err != nil || rec.WaitingFor != "limit exp, 1 of 1 held" {
			t.Fatalf("%s: x: %+v, %v; want parked on exp", q, rec, err)
		}
		for _, j := range r.Jobs {
			if j.ID == "y" {
				succeed(t, l, q, []ledger.Claimed{j})
			}
		}
		last := claimAll(t, l, q)
		if len(last) != 1 || last[0].ID != "x" {
			t.Fatalf("%s: after y ended claimed %+v, want x", q, last)
		}
		succeed(t, l, q, append(last, xs...))
	}
}

// A job held back by flow control and run inline (ClaimJob, fencedqtest)
// leaves what it waited in: its rate deferral and its place among a
// limit's parked jobs, and its wait fields.
func TestInlineClaimLeavesFlowWaits(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "fi"})
	const q = "q"
	job := func(id string, f *ledger.Flow) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: f}
	}
	rate := &ledger.Flow{RateKey: "prov", RateMax: 1, RatePer: time.Minute}
	limit := &ledger.Flow{LimitKey: "exp", LimitMax: 1}
	if _, err := l.Insert(ctx, []*ledger.NewJob{job("r1", rate), job("r2", rate), job("l1", limit), job("l2", limit)}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 2 || len(r.Dropped) != 1 {
		t.Fatalf("claimed %+v, held back %+v; want r1 and l1 running, r2 deferred (l2 parked at enqueue)", r.Jobs, r.Dropped)
	}
	for _, id := range []string{"r2", "l2"} {
		if _, err := l.ClaimJob(ctx, q, id, "inline", time.Minute); err != nil {
			t.Fatalf("inline claim of %s: %v", id, err)
		}
		if w, err := rdb.HMGet(ctx, "fi:{q}:job:"+id, "wait", "wait_at").Result(); err != nil || w[0] != nil || w[1] != nil {
			t.Fatalf("%s still says it waits: %v (%v)", id, w, err)
		}
	}
	for _, k := range []string{"fi:{q}:rate-held:prov", "fi:{q}:limit:exp:wait"} {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Fatalf("%s outlives its inline-run job (%d, %v)", k, n, err)
		}
	}
	if ok, err := rdb.HExists(ctx, "fi:{q}:rates", "prov").Result(); err != nil || ok {
		t.Fatalf("the rates hash keeps prov with no deferral left (%v, %v)", ok, err)
	}
}

// TestRunNowLeavesHeldBackJobs: an operator's run-now cannot start a job
// its limit parked or its rate deferred sooner; it fails with
// ErrWrongState and leaves the job where it waits: the rate's first
// deferral keeps its start, ahead of the later ones, instead of being
// deferred again behind them by the claim it was made due for.
func TestRunNowLeavesHeldBackJobs(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rn"})
	const q = "q"
	job := func(id string, f *ledger.Flow) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: f}
	}
	rate := &ledger.Flow{RateKey: "prov", RateMax: 1, RatePer: time.Minute}
	limit := &ledger.Flow{LimitKey: "exp", LimitMax: 1}
	js := []*ledger.NewJob{job("l1", limit), job("l2", limit)}
	for i := range 4 {
		js = append(js, job(fmt.Sprintf("r%d", i), rate))
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 2 || len(r.Dropped) != 3 {
		t.Fatalf("claimed %+v, held back %+v (%v); want l1 and r0 running, r1-r3 deferred (l2 parked at enqueue)", r.Jobs, r.Dropped, err)
	}
	waitAt := func(id string) string {
		t.Helper()
		at, err := rdb.HGet(ctx, "rn:{q}:job:"+id, "wait_at").Result()
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	before := waitAt("r1")
	for _, id := range []string{"l2", "r1"} {
		if err := l.RunNow(ctx, q, id, "op", ""); !errors.Is(err, ledger.ErrWrongState) || !strings.Contains(err.Error(), "held back") {
			t.Fatalf("run-now of %s: %v; want ErrWrongState, held back", id, err)
		}
	}
	r, err = l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs)+len(r.Dropped) != 0 {
		t.Fatalf("a claim after the run-nows took %+v, held back %+v (%v); want nothing due", r.Jobs, r.Dropped, err)
	}
	if after := waitAt("r1"); after != before {
		t.Fatalf("r1 deferred to %s after the run-now, was %s", after, before)
	}
	if g, err := l.Get(ctx, q, "l2"); err != nil || !strings.HasPrefix(g.WaitingFor, "limit exp") {
		t.Fatalf("l2: %+v, %v; want still parked on exp", g, err)
	}
}

// TestParkedJobSaysPermitsPromised: a job parked at its enqueue because the
// key's only permit is promised to an earlier job not yet claimed says so,
// and Limits counts the promise, rather than "0 of 1 held" alone.
func TestParkedJobSaysPermitsPromised(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "pp"})
	const q = "q"
	lim := &ledger.Flow{LimitKey: "exp:a", LimitMax: 1}
	if _, err := l.Insert(ctx, []*ledger.NewJob{
		{ID: "a", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: lim},
		{ID: "b", Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: lim},
	}); err != nil {
		t.Fatal(err)
	}
	g, err := l.Get(ctx, q, "b")
	if err != nil || g.WaitingFor != "limit exp:a, 0 of 1 held, 1 promised to due jobs" {
		t.Fatalf("b waits for %q (%v); want the promise said", g.WaitingFor, err)
	}
	ls, _, err := l.Limits(ctx, q)
	if err != nil || len(ls) != 1 || ls[0].Held != 0 || ls[0].Promised != 1 || ls[0].Waiting != 1 {
		t.Fatalf("limits %+v (%v); want exp:a with 1 promised, 1 waiting", ls, err)
	}
	succeed(t, l, q, claimAll(t, l, q)) // a runs and ends: b is woken, promised
	if g, err := l.Get(ctx, q, "b"); err != nil || g.WaitingFor != "" {
		t.Fatalf("woken b waits for %q (%v); want nothing", g.WaitingFor, err)
	}
}

// TestRateKeepsTheLongestPeriodsStarts: jobs of one rate key with different
// periods (two kinds, or jobs enqueued before the rate was changed) each
// count the starts of their own period: a start under a 50ms period does
// not drop the starts a job of 2 per hour counts, so the hour's third job
// is deferred, not started.
func TestRateKeepsTheLongestPeriodsStarts(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rp"})
	const q, starts = "q", "rp:{q}:rate:prov"
	job := func(id string, f *ledger.Flow) *ledger.NewJob {
		return &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: f}
	}
	hour := &ledger.Flow{RateKey: "prov", RateMax: 2, RatePer: time.Hour}
	fast := &ledger.Flow{RateKey: "prov", RateMax: 100, RatePer: 50 * time.Millisecond}
	claim := func(js ...*ledger.NewJob) *ledger.ClaimResult {
		t.Helper()
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := claim(job("h1", hour), job("h2", hour)); len(r.Jobs) != 2 {
		t.Fatalf("claimed %+v, want h1 and h2", r.Jobs)
	}
	// ten minutes pass: the hour's starts are in its window, not the fast one's
	ss, err := rdb.ZRangeWithScores(ctx, starts, 0, -1).Result()
	if err != nil || len(ss) != 2 {
		t.Fatalf("starts %v (%v), want 2", ss, err)
	}
	for i := range ss {
		ss[i].Score -= float64((10 * time.Minute).Milliseconds())
	}
	if err := rdb.ZAddXX(ctx, starts, ss...).Err(); err != nil {
		t.Fatal(err)
	}
	if r := claim(job("f1", fast)); len(r.Jobs) != 1 {
		t.Fatalf("claimed %+v, held back %+v; want f1", r.Jobs, r.Dropped)
	}
	if r := claim(job("h3", hour)); len(r.Jobs) != 0 || len(r.Dropped) != 1 {
		t.Fatalf("claimed %+v, held back %+v; want h3 deferred (2 per hour started)", r.Jobs, r.Dropped)
	}
	if r := claim(job("f2", fast)); len(r.Jobs) != 1 {
		t.Fatalf("claimed %+v, held back %+v; want f2 started (1 of 100 in its window)", r.Jobs, r.Dropped)
	}
	if n, err := rdb.ZCard(ctx, starts).Result(); err != nil || n != 4 {
		t.Fatalf("the starts zset holds %d (%v), want the hour's 4", n, err)
	}
	if ttl, err := rdb.PTTL(ctx, starts).Result(); err != nil || ttl < 50*time.Minute {
		t.Fatalf("the starts zset expires in %v (%v), want the hour's last start's period", ttl, err)
	}
}

// TestRateCountsTheClaimsStartsInEveryPeriod: one claim of jobs of one rate
// key with two periods (3 per hour, then three of 3 per minute) counts the
// starts it admitted before it first looks at a period's window: the third
// job of the minute finds 3 starts in its minute (the hour's job's among
// them) and is deferred, not started as a fourth.
func TestRateCountsTheClaimsStartsInEveryPeriod(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rc"})
	const q = "q"
	hour := &ledger.Flow{RateKey: "prov", RateMax: 3, RatePer: time.Hour}
	minute := &ledger.Flow{RateKey: "prov", RateMax: 3, RatePer: time.Minute}
	// one insert: the same due time, so the claim takes them in id order
	var js []*ledger.NewJob
	for i, f := range []*ledger.Flow{hour, minute, minute, minute} {
		js = append(js, &ledger.NewJob{ID: fmt.Sprintf("j%d", i+1), Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1, Flow: f})
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	var started []string
	for _, j := range r.Jobs {
		started = append(started, j.ID)
	}
	if strings.Join(started, ",") != "j1,j2,j3" || len(r.Dropped) != 1 || r.Dropped[0].ID != "j4" || r.Dropped[0].State != "rate:" {
		t.Fatalf("started %v, held back %+v; want j1-j3 started and j4 deferred (3 per minute)", started, r.Dropped)
	}
	if n, err := rdb.ZCard(ctx, "rc:{q}:rate:prov").Result(); err != nil || n != 3 {
		t.Fatalf("the starts zset holds %d (%v), want 3", n, err)
	}
}
