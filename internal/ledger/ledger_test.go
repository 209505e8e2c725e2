package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

type noteArgs struct {
	Text string `json:"text"`
}

func (noteArgs) Kind() string { return "note" }

func (a noteArgs) Validate() error {
	if a.Text == "" {
		return errors.New("text is required")
	}
	return nil
}

// fixture is one state-table row's client and ledger in a fresh namespace.
type fixture struct {
	t   *testing.T
	ctx context.Context
	rdb redis.UniversalClient
	c   *jobs.Client
	l   *ledger.Ledger
	q   string
}

func newFixture(t *testing.T, rdb redis.UniversalClient) *fixture {
	ns := redistest.Namespace(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns, Retention: time.Hour})
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	return &fixture{t: t, ctx: context.Background(), rdb: rdb, c: c, l: l, q: jobs.DefaultQueue}
}

func (f *fixture) enqueue(opts ...jobs.Option) string {
	f.t.Helper()
	res, err := f.c.Enqueue(f.ctx, noteArgs{Text: "x"}, opts...)
	if err != nil {
		f.t.Fatal(err)
	}
	return res.JobID
}

// claimOne claims and expects exactly job id.
func (f *fixture) claimOne(id string) ledger.Claimed {
	f.t.Helper()
	res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].ID != id {
		f.t.Fatalf("claimed %+v, want only %s", res.Jobs, id)
	}
	return res.Jobs[0]
}

func (f *fixture) complete(c ledger.Claimed, o ledger.Outcome) ledger.Committed {
	f.t.Helper()
	out, err := f.l.Complete(f.ctx, f.q, []ledger.Completion{{ID: c.ID, Token: c.Token, Outcome: o}})
	if err != nil {
		f.t.Fatal(err)
	}
	return out[0]
}

func (f *fixture) want(id string, s jobs.State) *jobs.Record {
	f.t.Helper()
	rec, err := f.l.Get(f.ctx, f.q, id)
	if err != nil {
		f.t.Fatal(err)
	}
	if rec.State != s {
		f.t.Fatalf("job %s is %s (reason %q), want %s", id, rec.State, rec.Reason, s)
	}
	counts, _ := f.l.Counts(f.ctx, f.q)
	if counts[s] != 1 {
		f.t.Fatalf("counts %v: want the job in exactly the %s index", counts, s)
	}
	total := int64(0)
	for _, n := range counts {
		total += n
	}
	if total != 1 {
		f.t.Fatalf("counts %v: the job is in more than one index", counts)
	}
	return rec
}

func (f *fixture) stat(name string) int64 {
	st, _ := f.l.Stats(f.ctx, f.q)
	return st[name]
}

func (f *fixture) events(id string) []string {
	h, err := f.l.History(f.ctx, f.q, id)
	if err != nil {
		f.t.Fatal(err)
	}
	out := make([]string, len(h))
	for i, e := range h {
		out[i] = e.Event + ":" + e.Outcome + e.Decision + e.Stage
	}
	return out
}

// stateTable runs one subtest per row of the ledger's state table
// (ARCHITECTURE.md), so a failure names its row.
func stateTable(t *testing.T, rdb redis.UniversalClient) {
	t.Run("enqueue/valid->pending", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		rec := f.want(id, jobs.Pending)
		if rec.OperationID != id || rec.Kind != "note" || string(rec.Args) != `{"text":"x"}` {
			t.Fatalf("record %+v", rec)
		}
		if qs, _ := f.l.Queues(f.ctx); len(qs) != 1 || qs[0] != f.q {
			t.Fatalf("queue registry %v", qs)
		}
	})
	t.Run("enqueue/invalid->nothing", func(t *testing.T) {
		f := newFixture(t, rdb)
		before, _ := redistest.CountKeys(f.ctx, rdb)
		for name, err := range map[string]error{
			"validate": func() error { _, err := f.c.Enqueue(f.ctx, noteArgs{}); return err }(),
			"null":     func() error { _, err := f.c.EnqueueRaw(f.ctx, "note", []byte("null")); return err }(),
			"array":    func() error { _, err := f.c.EnqueueRaw(f.ctx, "note", []byte("[1]")); return err }(),
			"queue":    func() error { _, err := f.c.Enqueue(f.ctx, noteArgs{Text: "x"}, jobs.Queue("no spaces")); return err }(),
			"many: null": func() error {
				_, err := f.c.EnqueueMany(f.ctx, []jobs.Params{{Args: noteArgs{Text: "x"}}, {Args: noteArgs{}}})
				return err
			}(),
		} {
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		if after, _ := redistest.CountKeys(f.ctx, rdb); after != before {
			t.Fatalf("invalid enqueues wrote %d keys", after-before)
		}
	})
	t.Run("enqueue/unique-key-held->unchanged", func(t *testing.T) {
		f := newFixture(t, rdb)
		u := jobs.Unique(jobs.UniqueOpts{ByArgs: true})
		id := f.enqueue(u)
		// In a batch with another queue's job (another slot on a Cluster),
		// and a second copy of itself: both copies find the holder.
		res, err := f.c.EnqueueMany(f.ctx, []jobs.Params{
			{Args: noteArgs{Text: "x"}, Options: []jobs.Option{u}},
			{Args: noteArgs{Text: "x"}, Options: []jobs.Option{u, jobs.Queue(f.q + "-other")}},
			{Args: noteArgs{Text: "x"}, Options: []jobs.Option{u}},
		})
		if err != nil || !res[0].Deduplicated || res[0].JobID != id || res[1].Deduplicated || !res[2].Deduplicated || res[2].JobID != id {
			t.Fatalf("unique dedup: %+v %+v %+v %v", res[0], res[1], res[2], err)
		}
		f.want(id, jobs.Pending)
		if n := rdb.ZCard(f.ctx, f.l.StateKey(f.q, jobs.Pending)).Val(); n != 1 {
			t.Fatalf("%d pending jobs on the queue, want 1", n)
		}
	})
	t.Run("enqueue/known-operation->unchanged", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.OperationID("op"))
		dup, err := f.c.Enqueue(f.ctx, noteArgs{Text: "other"}, jobs.OperationID("op"))
		if err != nil || !dup.Deduplicated || dup.JobID != id {
			t.Fatalf("dedup: %+v %v", dup, err)
		}
		f.want(id, jobs.Pending)
		if f.stat("deduplicated_enqueue") != 1 {
			t.Fatal("deduplication not counted")
		}
		if rec, _ := f.l.FindByOperation(f.ctx, "op"); rec == nil || rec.ID != id {
			t.Fatalf("find by operation: %+v", rec)
		}
	})
	t.Run("enqueue-many", func(t *testing.T) {
		f := newFixture(t, rdb)
		first := f.enqueue(jobs.OperationID("m1"))
		res, err := f.c.EnqueueMany(f.ctx, []jobs.Params{
			{Args: noteArgs{Text: "a"}, Options: []jobs.Option{jobs.OperationID("m1")}},
			{Args: noteArgs{Text: "b"}, Options: []jobs.Option{jobs.OperationID("m2")}},
			{Args: noteArgs{Text: "c"}, Options: []jobs.Option{jobs.Queue("other")}},
		})
		if err != nil || len(res) != 3 {
			t.Fatal(res, err)
		}
		if !res[0].Deduplicated || res[0].JobID != first || res[1].Deduplicated || res[2].Queue != "other" {
			t.Fatalf("results %+v %+v %+v", res[0], res[1], res[2])
		}
		if qs, _ := f.l.Queues(f.ctx); len(qs) != 2 {
			t.Fatalf("queues %v", qs)
		}
	})
	t.Run("pending-due->running", func(t *testing.T) {
		f := newFixture(t, rdb)
		later := f.enqueue(jobs.Delay(time.Hour))
		id := f.enqueue()
		c := f.claimOne(id)
		if c.Token == 0 || c.Attempt != 1 || c.Kind != "note" || string(c.Payload) != `{"text":"x"}` || c.OperationID != id {
			t.Fatalf("claim %+v", c)
		}
		rec, _ := f.l.Get(f.ctx, f.q, id)
		if rec.State != jobs.Running || rec.Owner != "w1" || rec.Token != c.Token || !rec.Deadline.After(time.Now()) {
			t.Fatalf("record %+v", rec)
		}
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 0 || res.DueIn < 59*time.Minute {
			t.Fatalf("scheduled job %s: claim %+v %v", later, res, err)
		}
	})
	t.Run("pending/paused-queue->unclaimed", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		if changed, err := f.c.Pause(f.ctx, f.q, "ada", "maintenance"); !changed || err != nil {
			t.Fatal(changed, err)
		}
		if p, _ := f.l.Paused(f.ctx, f.q); p == nil || p.Actor != "operator:ada" || p.Note != "maintenance" {
			t.Fatalf("paused %+v", p)
		}
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || !res.Paused || len(res.Jobs) != 0 {
			t.Fatalf("claim on paused queue: %+v %v", res, err)
		}
		if changed, _ := f.c.Resume(f.ctx, f.q, "ada", ""); !changed {
			t.Fatal("resume changed nothing")
		}
		f.claimOne(id)
	})
	t.Run("running/renew-by-owner->extended", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		out, err := f.l.Renew(f.ctx, f.q, 2*time.Minute, []ledger.Attempt{{ID: id, Token: c.Token}, {ID: id, Token: c.Token - 1}, {ID: "nope", Token: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if out[0].Status != ledger.Renewed || !out[0].Deadline.After(c.Deadline) {
			t.Fatalf("renew by owner: %+v", out[0])
		}
		if out[1].Status != ledger.Lost || out[1].State != "running" || out[2].Status != ledger.Lost || out[2].State != "missing" {
			t.Fatalf("stale renewals: %+v %+v", out[1], out[2])
		}
		if f.stat("fenced_renew") != 2 {
			t.Fatal("stale renewals not counted")
		}
	})
	t.Run("running/stale-commit->unchanged", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		stale := c
		stale.Token--
		if got := f.complete(stale, ledger.Outcome{To: jobs.Succeeded}); got.Applied || got.State != jobs.Running || got.Current != c.Token {
			t.Fatalf("stale commit: %+v", got)
		}
		f.want(id, jobs.Running)
		if f.stat("fenced_commit") != 1 {
			t.Fatal("fenced commit not counted")
		}
		if ev := f.events(id); ev[len(ev)-1] != "fenced:succeededcommit" {
			t.Fatalf("history %v", ev)
		}
	})
	t.Run("running/success->succeeded", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		if got := f.complete(c, ledger.Outcome{To: jobs.Succeeded}); !got.Applied || got.State != jobs.Succeeded {
			t.Fatalf("commit: %+v", got)
		}
		rec := f.want(id, jobs.Succeeded)
		if rec.Finished.IsZero() || rec.Error != "" {
			t.Fatalf("record %+v", rec)
		}
		// The common path leaves no history list, yet shows the whole timeline.
		if n, _ := rdb.Exists(f.ctx, f.l.JobKey(f.q, id)+":history").Result(); n != 0 {
			t.Fatal("history list written for the common path")
		}
		if ev := f.events(id); len(ev) != 3 || ev[0] != "enqueued:" || ev[1] != "attempt:" || ev[2] != "end:succeeded" {
			t.Fatalf("timeline %v", ev)
		}
		if ttl, _ := rdb.PTTL(f.ctx, f.l.JobKey(f.q, id)).Result(); ttl <= 0 || ttl > time.Hour {
			t.Fatalf("retention ttl %v", ttl)
		}
	})
	t.Run("running/retryable->pending-then-dead", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.MaxRetries(1))
		c := f.claimOne(id)
		f.complete(c, ledger.Outcome{To: jobs.Pending, Error: "boom", RetryIn: 0})
		rec := f.want(id, jobs.Pending)
		if rec.Error != "boom" {
			t.Fatalf("record %+v", rec)
		}
		c2 := f.claimOne(id)
		if c2.Attempt != 2 || c2.Token <= c.Token {
			t.Fatalf("second attempt %+v after token %d", c2, c.Token)
		}
		f.complete(c2, ledger.Outcome{To: jobs.Pending, Error: "boom again", RetryIn: 0})
		if rec := f.want(id, jobs.Dead); rec.Reason != "retries exhausted" {
			t.Fatalf("reason %q", rec.Reason)
		}
		want := []string{"enqueued:", "attempt:", "end:pending", "attempt:", "end:dead"}
		if ev := f.events(id); len(ev) != len(want) || ev[2] != want[2] || ev[4] != want[4] {
			t.Fatalf("timeline %v, want %v", ev, want)
		}
	})
	t.Run("running/permanent->dead", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		f.complete(f.claimOne(id), ledger.Outcome{To: jobs.Dead, Error: "bad", Reason: "permanent error"})
		if rec := f.want(id, jobs.Dead); rec.Reason != "permanent error" {
			t.Fatalf("record %+v", rec)
		}
	})
	t.Run("running/resource-busy->pending-attempt-not-consumed", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		f.complete(c, ledger.Outcome{Defer: true, RetryIn: 0, Reason: "resource busy"})
		if rec := f.want(id, jobs.Pending); rec.Attempts != 0 {
			t.Fatalf("attempts %d after a deferral", rec.Attempts)
		}
		if c2 := f.claimOne(id); c2.Attempt != 1 || c2.Token <= c.Token {
			t.Fatalf("claim after deferral %+v", c2)
		}
	})
	t.Run("running/unknown->uncertain->reconciled", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		f.complete(c, ledger.Outcome{To: jobs.Uncertain, Error: "timeout", Reason: "deadline passed mid-call"})
		f.want(id, jobs.Uncertain)
		if _, err := f.l.Decide(f.ctx, f.q, id, ledger.Resolution{Decision: jobs.DecideLater, Actor: "reconciler:x", NextIn: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if rec := f.want(id, jobs.Uncertain); rec.ReconcileTries != 1 {
			t.Fatalf("tries %d", rec.ReconcileTries)
		}
		if _, err := f.l.Decide(f.ctx, f.q, id, ledger.Resolution{Decision: jobs.DecideRerun, Actor: "reconciler:x", Note: "not applied"}); err != nil {
			t.Fatal(err)
		}
		if rec := f.want(id, jobs.Pending); rec.Runs != 1 {
			t.Fatalf("runs %d", rec.Runs)
		}
		c2 := f.claimOne(id)
		if c2.Token <= c.Token {
			t.Fatalf("re-run token %d not above %d", c2.Token, c.Token)
		}
		// The old attempt stays fenced out.
		if got := f.complete(c, ledger.Outcome{To: jobs.Succeeded}); got.Applied {
			t.Fatal("old attempt's commit applied after a re-run")
		}
		f.complete(c2, ledger.Outcome{To: jobs.Succeeded})
		f.want(id, jobs.Succeeded)
	})
	// The reconciler's verdict "not applied" (RetryIn set) is a failed
	// attempt: a retry on the same run, due after its delay, while the
	// job has attempts left; dead once they are spent.
	t.Run("uncertain/not-applied->retry->dead", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.MaxRetries(1))
		f.complete(f.claimOne(id), ledger.Outcome{To: jobs.Uncertain, Error: "timeout", Reason: "deadline passed mid-call"})
		now := time.Duration(0)
		verdict := ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Decision: jobs.DecideRerun, Actor: "reconciler:x",
			Note: "Reconcile answered not_applied", RetryIn: &now}
		if st, err := f.l.Decide(f.ctx, f.q, id, verdict); err != nil || st != jobs.Pending {
			t.Fatalf("not applied with a retry left: %s, %v; want pending", st, err)
		}
		if rec := f.want(id, jobs.Pending); rec.Runs != 0 || rec.Error != "timeout" {
			t.Fatalf("retry on run %d, error %q; want the same run, the attempt's error kept", rec.Runs, rec.Error)
		}
		f.complete(f.claimOne(id), ledger.Outcome{To: jobs.Uncertain, Error: "timeout"})
		if st, err := f.l.Decide(f.ctx, f.q, id, verdict); err != nil || st != jobs.Dead {
			t.Fatalf("not applied with its attempts spent: %s, %v; want dead", st, err)
		}
		if rec := f.want(id, jobs.Dead); rec.Attempts != 2 || !strings.Contains(rec.Reason, "retries exhausted: its last attempt (2) was found not applied") {
			t.Fatalf("dead after %d attempts, reason %q", rec.Attempts, rec.Reason)
		}
		// The retry is due after its delay, by Redis's clock.
		id2 := f.enqueue()
		f.complete(f.claimOne(id2), ledger.Outcome{To: jobs.Uncertain})
		before, err := f.l.ServerTime(f.ctx)
		if err != nil {
			t.Fatal(err)
		}
		hour := time.Hour
		verdict.RetryIn = &hour
		if st, err := f.l.Decide(f.ctx, f.q, id2, verdict); err != nil || st != jobs.Pending {
			t.Fatalf("not applied: %s, %v; want pending", st, err)
		}
		due, err := rdb.ZScore(f.ctx, f.l.StateKey(f.q, jobs.Pending), id2).Result()
		if err != nil || int64(due) < before.Add(time.Hour).UnixMilli() {
			t.Fatalf("retry due at %v (%v), want an hour after %v", due, err, before)
		}
	})
	t.Run("uncertain/applied->succeeded", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		f.complete(f.claimOne(id), ledger.Outcome{To: jobs.Uncertain})
		if st, err := f.l.Decide(f.ctx, f.q, id, ledger.Resolution{Decision: jobs.DecideSucceeded, Actor: "reconciler:x", Note: "effect log"}); err != nil || st != jobs.Succeeded {
			t.Fatal(st, err)
		}
		f.want(id, jobs.Succeeded)
		// The history written by the resolution expires with the job.
		if ttl, _ := rdb.PTTL(f.ctx, f.l.JobKey(f.q, id)+":history").Result(); ttl <= 0 {
			t.Fatalf("history ttl %v after a final resolution", ttl)
		}
	})
	t.Run("uncertain/decision-about-an-earlier-attempt->unchanged", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		t1 := f.claimOne(id)
		f.complete(t1, ledger.Outcome{To: jobs.Uncertain})
		if _, err := f.c.Resolve(f.ctx, f.q, id, jobs.DecideRerun, "ada", ""); err != nil {
			t.Fatal(err)
		}
		t2 := f.claimOne(id)
		f.complete(t2, ledger.Outcome{To: jobs.Uncertain})
		res := ledger.Resolution{From: []jobs.State{jobs.Uncertain}, Decision: jobs.DecideRerun, Actor: "reconciler:x",
			Note: "not applied", Seen: &t1.Token}
		if st, err := f.l.Decide(f.ctx, f.q, id, res); !errors.Is(err, jobs.ErrWrongState) || st != jobs.Uncertain {
			t.Fatalf("a decision about attempt %d on attempt %d: %s, %v; want ErrWrongState", t1.Token, t2.Token, st, err)
		}
		f.want(id, jobs.Uncertain)
		res.Seen = &t2.Token
		if st, err := f.l.Decide(f.ctx, f.q, id, res); err != nil || st != jobs.Pending {
			t.Fatalf("a decision about the current attempt: %s, %v", st, err)
		}
	})
	t.Run("uncertain/cannot-tell->review->operator", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		f.complete(f.claimOne(id), ledger.Outcome{To: jobs.Uncertain})
		if _, err := f.l.Decide(f.ctx, f.q, id, ledger.Resolution{Decision: jobs.DecideReview, Actor: "reconciler:x", Note: "cannot tell"}); err != nil {
			t.Fatal(err)
		}
		f.want(id, jobs.Review)
		if _, err := f.c.Resolve(f.ctx, f.q, id, jobs.DecideDead, " ", ""); !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("nameless operator: %v", err)
		}
		rec, err := f.c.Resolve(f.ctx, f.q, id, jobs.DecideDead, "ada", "refunded by hand")
		if err != nil || rec.State != jobs.Dead {
			t.Fatal(rec, err)
		}
		h, _ := f.l.History(f.ctx, f.q, id)
		if last := h[len(h)-1]; last.Actor != "operator:ada" || last.Note != "refunded by hand" {
			t.Fatalf("last entry %+v", last)
		}
		// dead -> re-run by an operator
		if rec, err := f.c.Resolve(f.ctx, f.q, id, jobs.DecideRerun, "ada", ""); err != nil || rec.State != jobs.Pending {
			t.Fatal(rec, err)
		}
		if ttl, _ := rdb.PTTL(f.ctx, f.l.JobKey(f.q, id)).Result(); ttl != -1 {
			t.Fatalf("re-run job keeps a retention ttl %v", ttl)
		}
	})
	t.Run("running/lease-passed->uncertain", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		res, _ := f.l.Claim(f.ctx, f.q, "w1", time.Millisecond, 1)
		time.Sleep(5 * time.Millisecond) // past a 1 ms lease by the Redis clock
		exp, err := f.l.Expire(f.ctx, f.q, 7, 100)
		if err != nil || len(exp.Moved) != 1 || exp.Moved[0] != id {
			t.Fatalf("expire: %+v %v", exp, err)
		}
		if rec := f.want(id, jobs.Uncertain); rec.Reason != "lease expired without commit" {
			t.Fatalf("record %+v", rec)
		}
		if _, err := f.l.Expire(f.ctx, f.q, 6, 100); !errors.Is(err, jobs.ErrStale) {
			t.Fatalf("older reconciler: %v", err)
		}
		if got := f.complete(res.Jobs[0], ledger.Outcome{To: jobs.Succeeded}); got.Applied {
			t.Fatal("commit applied after the lease expired")
		}
	})
	t.Run("pending-scheduled/run-now->due", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.Delay(time.Hour))
		if res, _ := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10); len(res.Jobs) != 0 {
			t.Fatal("a scheduled job was claimed before it was due")
		}
		rec, err := f.c.RunNow(f.ctx, f.q, id, "ada", "customer waiting")
		if err != nil || rec.State != jobs.Pending || rec.RunAt.After(time.Now().Add(time.Minute)) {
			t.Fatal(rec, err)
		}
		f.claimOne(id)
		if _, err := f.c.RunNow(f.ctx, f.q, id, "ada", ""); !errors.Is(err, jobs.ErrWrongState) {
			t.Fatalf("run-now of a running job: %v", err)
		}
		h, _ := f.l.History(f.ctx, f.q, id)
		found := false
		for _, e := range h {
			found = found || e.Event == "run_now" && e.Actor == "operator:ada" && e.Note == "customer waiting"
		}
		if !found {
			t.Fatalf("history %+v", h)
		}
	})
	t.Run("pending/cancel->cancelled", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.Delay(time.Hour))
		rec, err := f.c.Cancel(f.ctx, f.q, id, "ada", "customer withdrew")
		if err != nil || rec.State != jobs.Cancelled {
			t.Fatal(rec, err)
		}
		f.want(id, jobs.Cancelled)
		if _, err := f.c.Cancel(f.ctx, f.q, id, "ada", ""); !errors.Is(err, jobs.ErrWrongState) {
			t.Fatalf("second cancel: %v", err)
		}
	})
	t.Run("running/cancel->context-then-fenced-outcome", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		if rec, err := f.c.Cancel(f.ctx, f.q, id, "ada", ""); err != nil || rec.State != jobs.Running || rec.CancelledBy != "operator:ada" {
			t.Fatal(rec, err)
		}
		out, _ := f.l.Renew(f.ctx, f.q, time.Minute, []ledger.Attempt{{ID: id, Token: c.Token}})
		if out[0].Status != ledger.CancelRequested {
			t.Fatalf("renewal %+v", out[0])
		}
		f.complete(c, ledger.Outcome{To: jobs.Pending, Error: "context canceled", RetryIn: 0})
		f.want(id, jobs.Cancelled)
	})
	t.Run("running/cancel-then-unknown->uncertain->not-applied->cancelled", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		if _, err := f.c.Cancel(f.ctx, f.q, id, "ada", "wrong account"); err != nil {
			t.Fatal(err)
		}
		f.complete(c, ledger.Outcome{To: jobs.Uncertain, Error: "timeout", Reason: "deadline passed mid-call"})
		f.want(id, jobs.Uncertain)
		// The reconciler finds the effect not applied: the operator's cancel
		// stands, the job is not run again.
		st, err := f.l.Decide(f.ctx, f.q, id, ledger.Resolution{Decision: jobs.DecideRerun, Actor: "reconciler:x", Note: "effect log: not applied", Leader: 7})
		if err != nil || st != jobs.Cancelled {
			t.Fatalf("decide: %s, %v", st, err)
		}
		rec := f.want(id, jobs.Cancelled)
		if !strings.Contains(rec.Reason, "operator:ada") || rec.Runs != 0 {
			t.Fatalf("reason %q runs %d", rec.Reason, rec.Runs)
		}
		if res, err := f.l.Claim(f.ctx, f.q, "w2", time.Minute, 10); err != nil || len(res.Jobs) != 0 {
			t.Fatalf("claimed %+v, %v after a cancel", res, err)
		}
		// An operator's explicit re-run is a new intent: it runs again.
		if _, err := f.c.Resolve(f.ctx, f.q, id, jobs.DecideRerun, "bob", "run it after all"); err != nil {
			t.Fatal(err)
		}
		f.want(id, jobs.Pending)
	})
	t.Run("review-with-cancel/operator-rerun->pending", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		c := f.claimOne(id)
		if _, err := f.c.Cancel(f.ctx, f.q, id, "ada", ""); err != nil {
			t.Fatal(err)
		}
		f.complete(c, ledger.Outcome{To: jobs.Uncertain, Error: "timeout"})
		if _, err := f.l.Decide(f.ctx, f.q, id, ledger.Resolution{Decision: jobs.DecideReview, Actor: "reconciler:x", Note: "cannot tell", Leader: 7}); err != nil {
			t.Fatal(err)
		}
		if rec := f.want(id, jobs.Review); rec.CancelledBy != "operator:ada" {
			t.Fatalf("the cancel request is not shown in review: %+v", rec)
		}
		if _, err := f.c.Resolve(f.ctx, f.q, id, jobs.DecideRerun, "bob", "checked: not applied, run it"); err != nil {
			t.Fatal(err)
		}
		f.want(id, jobs.Pending)
	})
	t.Run("final/redelivery->deduplicated", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue()
		f.complete(f.claimOne(id), ledger.Outcome{To: jobs.Succeeded})
		rdb.ZAdd(f.ctx, f.l.StateKey(f.q, jobs.Pending), redis.Z{Score: 1, Member: id}) // a stray delivery
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 0 || len(res.Dropped) != 1 || res.Dropped[0].State != "succeeded" {
			t.Fatalf("claim %+v %v", res, err)
		}
		f.want(id, jobs.Succeeded)
		if f.stat("deduplicated_execute") != 1 {
			t.Fatal("deduplication not counted")
		}
	})
	t.Run("index-without-record->dropped", func(t *testing.T) {
		f := newFixture(t, rdb)
		rdb.ZAdd(f.ctx, f.l.StateKey(f.q, jobs.Pending), redis.Z{Score: 1, Member: "ghost"})
		rdb.ZAdd(f.ctx, f.l.StateKey(f.q, jobs.Running), redis.Z{Score: 1, Member: "ghost"})
		id := f.enqueue()
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 1 || res.Jobs[0].ID != id || len(res.Dropped) != 1 || res.Dropped[0].State != "missing" {
			t.Fatalf("claim %+v %v", res, err)
		}
		// A running entry whose record is gone is a lost job: reported
		// apart from a harmless leftover entry.
		exp, err := f.l.Expire(f.ctx, f.q, 1, 100)
		if err != nil || len(exp.Lost) != 1 || exp.Lost[0] != "ghost" || len(exp.Dropped) != 0 || len(exp.Moved) != 0 {
			t.Fatalf("expire %+v %v", exp, err)
		}
	})
	t.Run("corrupt-record->others-claimed", func(t *testing.T) {
		f := newFixture(t, rdb)
		bad := f.enqueue()
		good := f.enqueue()
		rdb.HSet(f.ctx, f.l.JobKey(f.q, bad), "token", "not-a-number", "attempts", "x", "max_retries", "")
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 2 {
			t.Fatalf("claim %+v %v", res, err)
		}
		for _, c := range res.Jobs {
			if c.Token == 0 || (c.ID != bad && c.ID != good) {
				t.Fatalf("claimed %+v", c)
			}
		}
	})
	t.Run("unknown-state->review", func(t *testing.T) {
		const reason = "corrupt record: unknown state"
		f := newFixture(t, rdb)
		due := f.enqueue()
		rdb.HSet(f.ctx, f.l.JobKey(f.q, due), "state", "bogus")
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 0 || len(res.Dropped) != 1 || res.Dropped[0] != (ledger.Dropped{ID: due, State: "corrupt"}) {
			t.Fatalf("claim %+v %v", res, err)
		}
		if r := f.want(due, jobs.Review); r.Reason != reason {
			t.Fatalf("reason %q", r.Reason)
		}
		f = newFixture(t, rdb)
		running := f.enqueue()
		f.claimOne(running)
		rdb.HSet(f.ctx, f.l.JobKey(f.q, running), "state", "bogus")
		rdb.ZAdd(f.ctx, f.l.StateKey(f.q, jobs.Running), redis.Z{Score: 1, Member: running}) // due for expiry
		exp, err := f.l.Expire(f.ctx, f.q, 1, 100)
		if err != nil || len(exp.Reviewed) != 1 || exp.Reviewed[0] != running || len(exp.Dropped)+len(exp.Moved) != 0 {
			t.Fatalf("expire %+v %v", exp, err)
		}
		if r := f.want(running, jobs.Review); r.Reason != reason {
			t.Fatalf("reason %q", r.Reason)
		}
	})
	t.Run("headers/enqueue->every-claim", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.Header("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), jobs.Header("tenant", "acme"))
		plain := f.enqueue(jobs.OperationID("plain"))
		want := map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tenant": "acme"}
		if rec, _ := f.l.Get(f.ctx, f.q, id); !maps.Equal(rec.Headers, want) {
			t.Fatalf("record headers %v, want %v", rec.Headers, want)
		}
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 2 {
			t.Fatalf("claim %+v %v", res, err)
		}
		for _, c := range res.Jobs {
			switch c.ID {
			case id:
				if !maps.Equal(c.Headers, want) {
					t.Fatalf("claimed headers %v, want %v", c.Headers, want)
				}
				// a retry's claim carries them again
				f.complete(c, ledger.Outcome{To: jobs.Pending})
			case plain:
				if c.Headers != nil {
					t.Fatalf("a job without headers claimed with %v", c.Headers)
				}
			}
		}
		if hk, _ := f.rdb.HExists(f.ctx, f.l.JobKey(f.q, plain), "headers").Result(); hk {
			t.Fatal("a job without headers has a headers field")
		}
		if again := f.claimOne(id); !maps.Equal(again.Headers, want) || again.Attempt != 2 {
			t.Fatalf("retry claimed %+v, want attempt 2 with headers %v", again, want)
		}
		before, _ := redistest.CountKeys(f.ctx, rdb)
		for name, opt := range map[string]jobs.Option{
			"key with a space":     jobs.Header("a b", "x"),
			"empty key":            jobs.Header("", "x"),
			"control in the value": jobs.Header("k", "a\nb"),
			"value too long":       jobs.Header("k", strings.Repeat("v", ledger.MaxHeaderValueLen+1)),
		} {
			if _, err := f.c.Enqueue(f.ctx, noteArgs{Text: "x"}, opt); !errors.Is(err, jobs.ErrInvalid) {
				t.Errorf("%s: %v, want ErrInvalid", name, err)
			}
		}
		many := make([]jobs.Option, ledger.MaxHeaders+1)
		for i := range many {
			many[i] = jobs.Header(fmt.Sprintf("k%d", i), "v")
		}
		if _, err := f.c.Enqueue(f.ctx, noteArgs{Text: "x"}, many...); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%d headers: %v, want ErrInvalid", len(many), err)
		}
		if after, _ := redistest.CountKeys(f.ctx, rdb); after != before {
			t.Fatalf("refused enqueues wrote keys: %d -> %d", before, after)
		}
	})
	// A claim reads a job's optional fields only when its record has more
	// than the common ones, and sends them only then: both kinds of job in
	// one batch decode to what was enqueued.
	t.Run("claim/optional-fields", func(t *testing.T) {
		f := newFixture(t, rdb)
		plain := f.enqueue(jobs.MaxRetries(7))
		rich := f.enqueue(jobs.OperationID("op-1"), jobs.Resource("acct-1"), jobs.Timeout(3*time.Second),
			jobs.Header("k", "v"))
		res, err := f.l.Claim(f.ctx, f.q, "w1", time.Minute, 10)
		if err != nil || len(res.Jobs) != 2 {
			t.Fatalf("claim %+v %v", res, err)
		}
		rec, _ := f.l.Get(f.ctx, f.q, plain)
		for _, c := range res.Jobs {
			if c.Token == 0 || c.Attempt != 1 || c.Kind != "note" || string(c.Payload) != `{"text":"x"}` ||
				!c.Deadline.Equal(rec.Deadline) {
				t.Fatalf("claimed %+v, record deadline %v", c, rec.Deadline)
			}
			switch c.ID {
			case plain:
				if c.OperationID != plain || c.Resource != "" || c.Timeout != 0 || c.Headers != nil || c.MaxRetries != 7 {
					t.Fatalf("plain job claimed as %+v", c)
				}
			case rich:
				if c.OperationID != "op-1" || c.Resource != "acct-1" || c.Timeout != 3*time.Second || c.Headers["k"] != "v" {
					t.Fatalf("job with optional fields claimed as %+v", c)
				}
			default:
				t.Fatalf("claimed an unknown job %+v", c)
			}
		}
	})
	t.Run("claim-job/pending->running", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.Delay(time.Hour), jobs.Header("k", "v"))
		f.enqueue() // another pending job, left alone
		if _, err := f.l.SetPaused(f.ctx, f.q, true, "op", ""); err != nil {
			t.Fatal(err)
		}
		c, err := f.l.ClaimJob(f.ctx, f.q, id, "inline", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if c.Token == 0 || c.Attempt != 1 || c.Kind != "note" || string(c.Payload) != `{"text":"x"}` || c.Headers["k"] != "v" || c.OperationID != id {
			t.Fatalf("claimed %+v", c)
		}
		if rec, _ := f.l.Get(f.ctx, f.q, id); rec.State != jobs.Running || rec.Token != c.Token || rec.Owner != "inline" {
			t.Fatalf("record %+v", rec)
		}
		if counts, _ := f.l.Counts(f.ctx, f.q); counts[jobs.Running] != 1 || counts[jobs.Pending] != 1 {
			t.Fatalf("counts %v: want the claimed job running, the other pending", counts)
		}
		if _, err := f.l.ClaimJob(f.ctx, f.q, id, "inline", time.Minute); !errors.Is(err, jobs.ErrWrongState) {
			t.Fatalf("claiming a running job: %v", err)
		}
		if _, err := f.l.ClaimJob(f.ctx, f.q, "nope", "inline", time.Minute); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("claiming a missing job: %v", err)
		}
		f.complete(*c, ledger.Outcome{To: jobs.Pending})
		again, err := f.l.ClaimJob(f.ctx, f.q, id, "inline", time.Minute)
		if err != nil || again.Token <= c.Token || again.Attempt != 2 {
			t.Fatalf("second claim %+v %v: want attempt 2 with a higher token than %d", again, err, c.Token)
		}
		if h := f.events(id); len(h) != 4 || h[3] != "attempt:" {
			t.Fatalf("history %v: want enqueued, attempt, end, attempt", h)
		}
	})
	t.Run("tokens-rise-after-keys-lost", func(t *testing.T) {
		f := newFixture(t, rdb)
		id := f.enqueue(jobs.OperationID("again"))
		c := f.claimOne(id)
		redistest.DeleteNamespace(f.ctx, rdb, f.l.Namespace())
		id2 := f.enqueue(jobs.OperationID("again"))
		if c2 := f.claimOne(id2); c2.Token <= c.Token {
			t.Fatalf("token %d after losing every key, was %d", c2.Token, c.Token)
		}
		if qs, _ := f.l.Queues(f.ctx); len(qs) != 1 {
			t.Fatalf("queue registry not healed: %v", qs)
		}
	})
}

func TestLedgerStateMachine(t *testing.T) {
	rdb, _ := redistest.New(t)
	stateTable(t, rdb)
}

func TestLedgerStateMachineOnCluster(t *testing.T) {
	stateTable(t, redistest.StartCluster(t).Client())
}

// TestEnqueueIsAtomicAcrossRedisCrashes kills and restarts Redis (with
// persistence) under a stream of enqueues: every job is written whole or
// not at all, an error says the outcome is unknown (or, Redis down, that
// nothing was sent), and enqueueing again
// with the same operation id settles it without a second job.
func TestEnqueueIsAtomicAcrossRedisCrashes(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{AOF: true})
	rdb := srv.Client()
	f := newFixture(t, rdb)
	const n = 300
	failed := map[int]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			_, err := f.c.Enqueue(f.ctx, noteArgs{Text: "x"}, jobs.OperationID(fmt.Sprint("op-", i)))
			if err != nil {
				// Unknown when a connection broke (it may have run), not
				// sent when the dial was refused (Redis down).
				if !errors.Is(err, jobs.ErrEnqueueUnknown) && !errors.Is(err, jobs.ErrNotSent) {
					t.Errorf("enqueue %d: %v matches neither ErrEnqueueUnknown nor ErrNotSent", i, err)
				}
				failed[i] = true
			}
			if i == n/3 || i == 2*n/3 {
				srv.Kill()
			}
			if i == n/3+5 || i == 2*n/3+5 {
				srv.Restart()
			}
		}
	}()
	<-done
	if len(failed) == 0 {
		t.Fatal("no enqueue failed: the crash did not happen during the stream")
	}
	// Every job is whole: record, operation key and due entry together.
	ids, _ := rdb.ZRange(f.ctx, f.l.StateKey(f.q, jobs.Pending), 0, -1).Result()
	inIndex := map[string]bool{}
	for _, id := range ids {
		inIndex[id] = true
	}
	for i := range n {
		op := fmt.Sprint("op-", i)
		rec, err := f.l.FindByOperation(f.ctx, op)
		switch {
		case err == nil:
			if !inIndex[rec.ID] || rec.State != jobs.Pending || rec.Kind != "note" {
				t.Fatalf("%s half written: %+v, in due index %v", op, rec, inIndex[rec.ID])
			}
		case !errors.Is(err, jobs.ErrNotFound):
			t.Fatal(err)
		case !failed[i]:
			t.Fatalf("%s acknowledged but not written", op)
		}
		// Retrying with the same operation id settles it: one job.
		res, err := f.c.Enqueue(f.ctx, noteArgs{Text: "x"}, jobs.OperationID(op))
		if err != nil {
			t.Fatal(err)
		}
		if !failed[i] && !res.Deduplicated {
			t.Fatalf("%s: a retry of an acknowledged enqueue created a second job", op)
		}
	}
	if c, _ := f.l.Counts(f.ctx, f.q); c[jobs.Pending] != n {
		t.Fatalf("%d pending jobs for %d operation ids", c[jobs.Pending], n)
	}
}

func TestInvalidNamesAreRejectedBeforeAnyWrite(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	bad := jobs.NewClient(rdb, jobs.Config{Namespace: "has{braces}"})
	if _, err := bad.Enqueue(ctx, noteArgs{Text: "x"}); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("namespace with braces: %v", err)
	}
	if _, err := bad.Pause(ctx, "default", "ada", ""); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("operator call with a bad namespace: %v", err)
	}
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	for name, opts := range map[string][]jobs.Option{
		"operation id with a newline": {jobs.OperationID("a\nb")},
		"resource with braces":        {jobs.Resource("acct{1}")},
		"reserved internal resource":  {jobs.Resource(ledger.LeaderResource)},
		"reserved outbox fence":       {jobs.Resource("fencedq:outbox:fencedq_outbox_1")},
		"another job's lease":         {jobs.Resource("job:" + "0c5b7a1e")},
	} {
		if _, err := c.EnqueueRaw(ctx, "note", []byte(`{}`), opts...); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := c.EnqueueRaw(ctx, "bad kind", []byte(`{}`)); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("kind with a space: %v", err)
	}
	if _, err := c.Cancel(ctx, "no spaces", "x", "ada", ""); !errors.Is(err, jobs.ErrInvalid) {
		t.Errorf("cancel in a bad queue name: %v", err)
	}
	if n, _ := redistest.CountKeys(ctx, rdb); os.Getenv("REDIS_ADDR") == "" && n != 0 {
		t.Fatalf("rejected calls wrote %d keys", n)
	}
}
