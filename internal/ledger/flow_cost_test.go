package ledger_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// serverCommands is the number of commands redis-server has run (INFO
// commandstats, every redis.call in a script included), INFO and CONFIG
// left out.
func serverCommands(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	s, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") || k == "cmdstat_info" || strings.HasPrefix(k, "cmdstat_config") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
		c, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			t.Fatalf("commandstats %q: %v", line, err)
		}
		n += c
	}
	return n
}

// TestLimitCostPerJob: a job under a concurrency limit that binds nothing
// costs the claim and the completion at most 4 Redis commands more than a
// plain job (the optional fields' read, the holders' count, the permit taken,
// the permit ended; the look for waiting jobs, and the one at the limits
// hash for keys to drop from it, are one each per completion call,
// whatever the number of keys), so a key's limit does not
// slow the jobs of other keys; a hot key's backlog sits parked (benchmark
// "hot key"). Jobs sharing one limit key cost at most 1.5 more (the flow
// field's read; the count of permits held and the permits taken are read
// and written once per claim, the look for waiting jobs and the permits'
// ends once per completion). A job under a rate limit that binds nothing
// costs at most 2
// more (the flow field's read; the window's trim, count, write and expiry
// are one each per claim and key, whatever the number of jobs). A job written by the earlier layout (flow
// field '1') is still admitted under its limit.
func TestLimitCostPerJob(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "cost"})
	const n = 20
	drain := func(q string, flow func(i int) *ledger.Flow) int64 {
		t.Helper()
		js := make([]*ledger.NewJob, n)
		for i := range js {
			js[i] = &ledger.NewJob{ID: fmt.Sprintf("%s-%d", q, i), Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1}
			if flow != nil {
				js[i].Flow = flow(i)
			}
		}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Claim(ctx, q, "p", time.Minute, 0); err != nil { // the script loaded
			t.Fatal(err)
		}
		before := serverCommands(t, rdb)
		r, err := l.Claim(ctx, q, "p", time.Minute, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Jobs) != n {
			t.Fatalf("claimed %d of %d (dropped %v)", len(r.Jobs), n, r.Dropped)
		}
		cs := make([]ledger.Completion, n)
		for i, j := range r.Jobs {
			cs[i] = ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}
		}
		out, err := l.Complete(ctx, q, cs)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range out {
			if !c.Applied {
				t.Fatalf("completion not applied: %+v", c)
			}
		}
		return serverCommands(t, rdb) - before
	}
	plain := drain("plain", nil)
	limited := drain("limited", func(i int) *ledger.Flow { return &ledger.Flow{LimitKey: fmt.Sprintf("acct:%d", i), LimitMax: 1} })
	shared := drain("shared", func(int) *ledger.Flow { return &ledger.Flow{LimitKey: "export", LimitMax: 1000} })
	rated := drain("rated", func(int) *ledger.Flow { return &ledger.Flow{RateKey: "api", RateMax: 1000, RatePer: time.Second} })
	t.Logf("Redis commands per job, claim and completion: plain %.2f, limited %.2f, one shared limit %.2f, rate-limited %.2f",
		float64(plain)/n, float64(limited)/n, float64(shared)/n, float64(rated)/n)
	for _, c := range []struct {
		what string
		cmds int64
		most float64
	}{{"limited", limited, 4}, {"shared-limit", shared, 1.5}, {"rate-limited", rated, 2}} {
		if extra := float64(c.cmds-plain) / n; extra > c.most {
			t.Errorf("a %s job costs %.2f Redis commands more than a plain one (plain %d, %s %d for %d jobs), want ≤ %v",
				c.what, extra, plain, c.what, c.cmds, n, c.most)
		}
	}
	for _, q := range []string{"limited", "shared"} {
		lim, _, err := l.Limits(ctx, q)
		if err != nil || len(lim) != 0 {
			t.Fatalf("limits of %s after the drain: %+v, %v; want none", q, lim, err)
		}
	}
	// Every permit ended with its completion (one ZREM per key and call):
	// no holders are left.
	holders := []string{"cost:{shared}:limit:export:holders"}
	for i := range n {
		holders = append(holders, fmt.Sprintf("cost:{limited}:limit:acct:%d:holders", i))
	}
	if left, err := rdb.Exists(ctx, holders...).Result(); err != nil || left != 0 {
		t.Fatalf("%d holders zsets left after the drain (%v); want none", left, err)
	}
	_, rates, err := l.Limits(ctx, "rated")
	if err != nil || len(rates) != 0 {
		t.Fatalf("rates after a drain that deferred nothing: %+v, %v; want none", rates, err)
	}

	// The earlier layout: flow '1', the limit read from lkey and lmax.
	const q = "legacy"
	var ids []string
	for i := range 2 {
		ins, err := l.Insert(ctx, []*ledger.NewJob{{ID: fmt.Sprintf("old-%d", i), Kind: "k", Queue: q, Payload: []byte(`{}`),
			MaxRetries: 1, Flow: &ledger.Flow{LimitKey: "acct:old", LimitMax: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ins[0].JobID)
	}
	if err := rdb.HSet(ctx, "cost:{"+q+"}:job:"+ids[0], "flow", "1").Err(); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 1 || r.Jobs[0].ID != ids[0] {
		t.Fatalf("claimed %+v, want %s only (the other parked at its enqueue)", r.Jobs, ids[0])
	}
	lim, _, err := l.Limits(ctx, q)
	if err != nil || len(lim) != 1 || lim[0].Held != 1 || lim[0].Waiting != 1 || !lim[0].AtLimit ||
		len(lim[0].Holders) != 1 || lim[0].Holders[0] != ids[0] {
		t.Fatalf("limits: %+v, %v; want acct:old 1 of 1 held by %s, 1 waiting", lim, err, ids[0])
	}
	out, err := l.Complete(ctx, q, []ledger.Completion{{ID: ids[0], Token: r.Jobs[0].Token, Outcome: ledger.Outcome{To: ledger.Succeeded}}})
	if err != nil || !out[0].Applied {
		t.Fatalf("complete: %+v, %v", out, err)
	}
	r, err = l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != ids[1] {
		t.Fatalf("after the release claimed %+v (%v), want %s", r, err, ids[1])
	}
}

// TestRateBindsWithinOneClaim: one claim of 10 due jobs under a rate of 3
// per minute starts 3 and defers the other 7 to the minute after the
// first start, 3 per minute (the starts it admitted are counted before
// they are written, and written before a deferral reads them); a second
// claim starts nothing.
func TestRateBindsWithinOneClaim(t *testing.T) {
	rdb := redistest.Start(t, redistest.Options{}).Client()
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: "rate1"})
	const q = "q"
	js := make([]*ledger.NewJob, 10)
	for i := range js {
		js[i] = &ledger.NewJob{ID: fmt.Sprintf("r-%d", i), Kind: "k", Queue: q, Payload: []byte(`{}`), MaxRetries: 1,
			Flow: &ledger.Flow{RateKey: "api", RateMax: 3, RatePer: time.Minute}}
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Jobs) != 3 || len(r.Dropped) != 7 {
		t.Fatalf("claimed %d, held back %d (%+v); want 3 and 7", len(r.Jobs), len(r.Dropped), r.Dropped)
	}
	starts, err := rdb.ZRangeWithScores(ctx, "rate1:{q}:rate:api", 0, -1).Result()
	if err != nil || len(starts) != 3 {
		t.Fatalf("the window holds %d starts (%v), want 3", len(starts), err)
	}
	first := int64(starts[0].Score)
	perMinute := map[int64]int{}
	for _, d := range r.Dropped {
		if d.State != "rate:" { // "api" has no name: no ':' in it
			t.Fatalf("job %s held back for %q, want rate: (unnamed)", d.ID, d.State)
		}
		at, err := rdb.HGet(ctx, "rate1:{q}:job:"+d.ID, "wait_at").Int64()
		if err != nil {
			t.Fatal(err)
		}
		if at < first+time.Minute.Milliseconds() {
			t.Fatalf("job %s deferred to %d, before the first start %d plus the period", d.ID, at, first)
		}
		perMinute[(at-first)/time.Minute.Milliseconds()]++
	}
	for m, n := range perMinute {
		if n > 3 {
			t.Fatalf("%d jobs deferred into minute %d after the first start, rate 3 per minute (%v)", n, m, perMinute)
		}
	}
	again, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(again.Jobs) != 0 {
		t.Fatalf("a second claim started %d jobs (%v), want none before the deferred times", len(again.Jobs), err)
	}
}
