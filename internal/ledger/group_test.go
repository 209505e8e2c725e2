package ledger_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// TestGroupsRandomOperations runs random enqueues (grouped or not, due now
// or a little later, some under a concurrency limit), claims of random sizes, completions (success, retry,
// put-back), cancels, run-nows and claims by id, and checks after every
// step what the fair groups rely on: each group with jobs in its own index
// has its head in the due index, every job in a group's index is pending,
// and the parked count is the sum of the groups' indexes. Then everything
// drains: every job ends, and no group key is left.
func TestGroupsRandomOperations(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { groupsRandom(t, seed) })
	}
}

func groupsRandom(t *testing.T, seed uint64) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "rq"
	rng := rand.New(rand.NewPCG(seed, 26))
	groups := []string{"", "a", "b", "c", "d"}
	var ids []string
	running := map[string]lease.Token{}
	n := 0
	claimed := func(cs []ledger.Claimed) {
		for _, c := range cs {
			running[c.ID] = c.Token
		}
	}
	for step := range 300 {
		switch op := rng.IntN(10); {
		case op < 3:
			var js []*ledger.NewJob
			for range 1 + rng.IntN(15) {
				n++
				j := &ledger.NewJob{ID: fmt.Sprintf("j%d", n), Kind: "k", Queue: q, Payload: []byte(`{}`),
					Display: []byte(`{}`), MaxRetries: 2, Group: groups[rng.IntN(len(groups))]}
				if rng.IntN(4) == 0 {
					j.Delay = time.Duration(1+rng.IntN(20)) * time.Millisecond
				}
				if rng.IntN(5) == 0 { // a limit of 2 per group: parked, woken outside the group's turn
					j.Flow = &ledger.Flow{LimitKey: "lim:" + j.Group, LimitMax: 2}
				}
				js = append(js, j)
				ids = append(ids, j.ID)
			}
			if _, err := l.Insert(ctx, js); err != nil {
				t.Fatal(err)
			}
		case op < 6:
			r, err := l.Claim(ctx, q, "w", time.Minute, 1+rng.IntN(12))
			if err != nil {
				t.Fatal(err)
			}
			claimed(r.Jobs)
		case op < 8:
			var cs []ledger.Completion
			for id, tok := range running {
				if rng.IntN(2) == 0 {
					continue
				}
				o := ledger.Outcome{To: jobs.Succeeded}
				switch rng.IntN(4) {
				case 0:
					o = ledger.Outcome{To: jobs.Pending, Error: "retry", RetryIn: time.Duration(rng.IntN(5)) * time.Millisecond}
				case 1:
					o = ledger.Outcome{Defer: true, Reason: "busy", RetryIn: time.Millisecond}
				}
				cs = append(cs, ledger.Completion{ID: id, Token: tok, Outcome: o})
				delete(running, id)
			}
			if len(cs) > 0 {
				if _, err := l.Complete(ctx, q, cs); err != nil {
					t.Fatal(err)
				}
			}
		case op == 8 && len(ids) > 0:
			id := ids[rng.IntN(len(ids))]
			if rng.IntN(2) == 0 {
				_, _ = l.Cancel(ctx, q, id, "operator:test", "") // any state: refused ones change nothing
			} else {
				_ = l.RunNow(ctx, q, id, "operator:test", "")
			}
		case op == 9 && len(ids) > 0:
			if c, err := l.ClaimJob(ctx, q, ids[rng.IntN(len(ids))], "w", time.Minute); err == nil {
				claimed([]ledger.Claimed{*c})
			}
		}
		checkGroups(t, rdb, ns, q, step)
	}
	// Drain: claim and succeed everything; delayed jobs come due within 30 ms.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var cs []ledger.Completion
		for id, tok := range running {
			cs = append(cs, ledger.Completion{ID: id, Token: tok, Outcome: ledger.Outcome{To: jobs.Succeeded}})
		}
		clear(running)
		if len(cs) > 0 {
			if _, err := l.Complete(ctx, q, cs); err != nil {
				t.Fatal(err)
			}
		}
		r, err := l.Claim(ctx, q, "w", time.Minute, 100)
		if err != nil {
			t.Fatal(err)
		}
		claimed(r.Jobs)
		counts, err := l.Counts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if counts[jobs.Pending] == 0 && len(running) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained: %v, %d running here", counts, len(running))
		}
		if len(r.Jobs) == 0 {
			time.Sleep(5 * time.Millisecond) // delayed jobs and retries coming due
		}
	}
	checkGroups(t, rdb, ns, q, -1)
	for _, id := range ids {
		rec, err := l.Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != jobs.Succeeded && rec.State != jobs.Cancelled && rec.State != jobs.Dead {
			t.Fatalf("job %s ended %s", id, rec.State)
		}
	}
	if gs, err := l.Groups(ctx, q); err != nil || len(gs) != 0 {
		t.Fatalf("groups left: %+v, %v", gs, err)
	}
	if keys, _ := rdb.Keys(ctx, ns+":{"+q+"}:group:*").Result(); len(keys) != 0 {
		t.Fatalf("group indexes left: %v", keys)
	}
	t.Logf("seed %d: %d jobs", seed, len(ids))
}

// checkGroups checks the groups' invariants (see TestGroupsRandomOperations).
func checkGroups(t *testing.T, rdb *redis.Client, ns, q string, step int) {
	t.Helper()
	ctx := context.Background()
	p := ns + ":{" + q + "}:"
	heads, err := rdb.HGetAll(ctx, p+"groups").Result()
	if err != nil {
		t.Fatal(err)
	}
	parked := int64(0)
	keys, _ := rdb.Keys(ctx, p+"group:*").Result()
	for _, k := range keys {
		g := k[len(p+"group:"):]
		members, _ := rdb.ZRange(ctx, k, 0, -1).Result()
		parked += int64(len(members))
		head := heads[g]
		if head == "" {
			t.Fatalf("step %d: group %s has %d jobs in its index and no head", step, g, len(members))
		}
		if _, err := rdb.ZScore(ctx, p+"pending", head).Result(); err != nil {
			t.Fatalf("step %d: group %s's head %s is not in the due index: %v", step, g, head, err)
		}
		for _, id := range members {
			if st, _ := rdb.HGet(ctx, p+"job:"+id, "state").Result(); st != "pending" {
				t.Fatalf("step %d: job %s in group %s's index is %q", step, id, g, st)
			}
		}
	}
	if n, _ := strconv.ParseInt(heads["#n"], 10, 64); n != parked {
		t.Fatalf("step %d: parked count %d, the groups' indexes hold %d", step, n, parked)
	}
}

// TestRepairGroups: a group whose head's record was lost, and one whose
// head lost only its due-index entry, are not claimed (nothing of theirs is
// due) until RepairGroups gives each a head: the lost head's group's next
// job, the other's own head back. Then every remaining job is claimed.
func TestRepairGroups(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "rq"
	var js []*ledger.NewJob
	for _, id := range []string{"a1", "a2", "a3", "b1", "b2", "c1", "c2"} {
		js = append(js, &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`),
			MaxRetries: 1, Group: id[:1]})
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	p := ns + ":{" + q + "}:"
	rdb.Del(ctx, p+"job:a1")               // a's head lost with its record
	rdb.ZRem(ctx, p+"pending", "a1", "b1") // and b's head's due-index entry
	claimIDs := func() map[string]bool {
		t.Helper()
		r, err := l.Claim(ctx, q, "w", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, c := range r.Jobs {
			got[c.ID] = true
		}
		return got
	}
	if got := claimIDs(); len(got) != 2 || !got["c1"] || !got["c2"] {
		t.Fatalf("claimed %v before the repair, want c1 and c2 (a and b have no head due)", got)
	}
	n, err := l.RepairGroups(ctx, q)
	if err != nil || n != 2 {
		t.Fatalf("repaired %d groups, %v; want 2", n, err)
	}
	checkGroups(t, rdb, ns, q, 0)
	if got := claimIDs(); len(got) != 4 || !got["a2"] || !got["a3"] || !got["b1"] || !got["b2"] {
		t.Fatalf("claimed %v after the repair, want a2, a3, b1, b2", got)
	}
	if n, err := l.RepairGroups(ctx, q); err != nil || n != 0 {
		t.Fatalf("second repair: %d groups, %v; want none", n, err)
	}
	if gs, err := l.Groups(ctx, q); err != nil || len(gs) != 0 {
		t.Fatalf("groups left: %+v, %v", gs, err)
	}
}

// TestRepairGroupsSkipsLostJobs: a group several of whose jobs were lost
// (records deleted by hand, evicted) gets a live head from one repair: the
// lost jobs behind its head do not each cost the group another prune pass.
func TestRepairGroupsSkipsLostJobs(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "rq"
	var js []*ledger.NewJob
	for i := range 5 {
		js = append(js, &ledger.NewJob{ID: fmt.Sprint("a", i), Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`),
			MaxRetries: 1, Group: "a"})
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	p := ns + ":{" + q + "}:"
	rdb.Del(ctx, p+"job:a0", p+"job:a1", p+"job:a2") // the head and the two next
	if r, err := l.Claim(ctx, q, "w", time.Minute, 1); err != nil || len(r.Jobs) != 0 {
		t.Fatalf("claim before the repair: %+v, %v; want nothing (a0 is lost)", r, err)
	}
	if n, err := l.RepairGroups(ctx, q); err != nil || n != 1 {
		t.Fatalf("repaired %d groups, %v; want 1", n, err)
	}
	checkGroups(t, rdb, ns, q, 0)
	r, err := l.Claim(ctx, q, "w", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range r.Jobs {
		got = append(got, c.ID)
	}
	if fmt.Sprint(got) != "[a3 a4]" {
		t.Fatalf("claimed %v after one repair, want [a3 a4]", got)
	}
	if gs, err := l.Groups(ctx, q); err != nil || len(gs) != 0 {
		t.Fatalf("groups left: %+v, %v", gs, err)
	}
}

// TestGroupEnqueueKeepsHeadWithoutEntry: a group whose head lost only its
// due-index entry (its record still pending) and that gets an enqueue
// before the repair keeps that job: it is queued in the group, not left
// pending outside every index, and every job is claimed.
func TestGroupEnqueueKeepsHeadWithoutEntry(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "rq"
	insert := func(ids ...string) {
		t.Helper()
		var js []*ledger.NewJob
		for _, id := range ids {
			js = append(js, &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`),
				MaxRetries: 1, Group: "a"})
		}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
	}
	insert("a1", "a2")
	rdb.ZRem(ctx, ns+":{"+q+"}:pending", "a1") // the head's entry lost, its record kept
	insert("a3")
	checkGroups(t, rdb, ns, q, 0)
	if _, err := l.RepairGroups(ctx, q); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 3 {
		r, err := l.Claim(ctx, q, "w", time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Jobs {
			got[c.ID] = true
		}
	}
	if len(got) != 3 {
		t.Fatalf("claimed %v, want a1, a2 and a3", got)
	}
}

// TestPendingListsShowGroupedJobs: pending lists (Match, then Records: the
// dashboard's and inspect's) list a group's jobs waiting in its own index,
// not only its head, by due time, and say where each stands in its group.
func TestPendingListsShowGroupedJobs(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "rq"
	var js []*ledger.NewJob
	for _, id := range []string{"a1", "a2", "a3", "b1", "u1"} {
		j := &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`), MaxRetries: 1}
		if id[0] != 'u' {
			j.Group = id[:1]
		}
		js = append(js, j)
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a1": "group a, 0 ahead (next of its group)", "a2": "group a, 1 ahead",
		"a3": "group a, 2 ahead", "b1": "group b, 0 ahead (next of its group)", "u1": ""}
	for _, f := range []ledger.Filter{{State: jobs.Pending}, {State: jobs.Pending, Kind: "k"}, {State: jobs.Pending, Desc: true}} {
		items, total, exact, err := l.Match(ctx, []string{q}, f, 10)
		if err != nil || total != 5 || !exact || len(items) != 5 {
			t.Fatalf("%+v: %d items, total %d, exact %v, %v; want the 5 pending", f, len(items), total, exact, err)
		}
		recs, _, err := l.Records(ctx, jobs.Pending, items)
		if err != nil || len(recs) != 5 {
			t.Fatalf("%+v: %d records, %v", f, len(recs), err)
		}
		for _, r := range recs {
			if r.WaitingFor != want[r.ID] {
				t.Errorf("%+v: job %s waits for %q, want %q", f, r.ID, r.WaitingFor, want[r.ID])
			}
		}
	}
	if _, total, _, err := l.Match(ctx, []string{q}, ledger.Filter{State: jobs.Pending}, 0); err != nil || total != 5 {
		t.Fatalf("count only: total %d, %v; want 5", total, err)
	}
	items, _, _, err := l.Match(ctx, []string{q}, ledger.Filter{State: jobs.Pending}, 2)
	if err != nil || len(items) != 2 {
		t.Fatalf("first 2: %v, %v", items, err)
	}
}

// TestGetOfAGroupedRetryGivesItsDueTime: a grouped job's retry (and a
// put-back) enters the due index directly, outside its group's turn; Get
// gives its due time as it does for any pending job (Record.RunAt), not the
// enqueue's, so a page showing it offers run-now and marks it neither due
// nor overdue.
func TestGetOfAGroupedRetryGivesItsDueTime(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "rq"
	if _, err := l.Insert(ctx, []*ledger.NewJob{{ID: "g1", Kind: "k", Queue: q, Payload: []byte(`{}`),
		Display: []byte(`{}`), MaxRetries: 3, Group: "a"}}); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "w", time.Minute, 1)
	if err != nil || len(r.Jobs) != 1 {
		t.Fatalf("claim: %+v %v", r, err)
	}
	c := r.Jobs[0]
	if _, err := l.Complete(ctx, q, []ledger.Completion{{ID: c.ID, Token: c.Token,
		Outcome: ledger.Outcome{To: jobs.Pending, Error: "later", RetryIn: time.Hour}}}); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Get(ctx, q, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != jobs.Pending || rec.RunAt.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("a grouped retry due in an hour reads %s, due %v", rec.State, rec.RunAt)
	}
}

// TestRepairGroupsHeadScoredFarAhead: heads whose due-index entry was
// edited far ahead are put back whatever their record says: one whose
// run_at was edited too goes back at now, one whose record is gone is
// dropped and its group's next job leads, in one pass; a head scheduled
// two years ahead is left alone.
func TestRepairGroupsHeadScoredFarAhead(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "rq"
	var js []*ledger.NewJob
	for _, id := range []string{"a1", "a2", "b1", "b2"} {
		js = append(js, &ledger.NewJob{ID: id, Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`),
			MaxRetries: 1, Group: id[:1]})
	}
	js = append(js, &ledger.NewJob{ID: "c1", Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`),
		MaxRetries: 1, Group: "c", Delay: 2 * 365 * 24 * time.Hour})
	js = append(js, &ledger.NewJob{ID: "d1", Kind: "k", Queue: q, Payload: []byte(`{}`), Display: []byte(`{}`),
		MaxRetries: 1, Group: "d"})
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	p := ns + ":{" + q + "}:"
	// d1 as a retry put off two years (jobs.RetryAfter) or a head its rate
	// deferred that far leaves it: scored two years ahead, its run_at not
	// moved. A write made that score, so it stays.
	d1 := float64(time.Now().Add(2 * 365 * 24 * time.Hour).UnixMilli())
	rdb.ZAdd(ctx, p+"pending", redis.Z{Score: d1, Member: "d1"})
	rdb.ZAdd(ctx, p+"pending", redis.Z{Score: math.Inf(1), Member: "a1"})
	rdb.Del(ctx, p+"job:a1")
	rdb.Do(ctx, "ZADD", p+"pending", "1e300", "b1")
	rdb.HSet(ctx, p+"job:b1", "run_at", "1e300")
	c1, _ := rdb.ZScore(ctx, p+"pending", "c1").Result()
	n, err := l.RepairGroups(ctx, q)
	if err != nil || n != 2 {
		t.Fatalf("repaired %d groups, %v; want 2", n, err)
	}
	checkGroups(t, rdb, ns, q, 0)
	r, err := l.Claim(ctx, q, "w", time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, j := range r.Jobs {
		got[j.ID] = true
	}
	if len(got) != 3 || !got["a2"] || !got["b1"] || !got["b2"] {
		t.Fatalf("claimed %v, want a2, b1 and b2", got)
	}
	if s, err := rdb.ZScore(ctx, p+"pending", "c1").Result(); err != nil || s != c1 {
		t.Fatalf("c1 scored %v (%v), was %v", s, err, c1)
	}
	if s, err := rdb.ZScore(ctx, p+"pending", "d1").Result(); err != nil || s != d1 {
		t.Fatalf("d1, put off two years, scored %v (%v), was %v", s, err, d1)
	}
	if n, err := l.RepairGroups(ctx, q); err != nil || n != 0 {
		t.Fatalf("last repair: %d groups, %v; want none", n, err)
	}
}
