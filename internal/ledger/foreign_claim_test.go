package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A due job whose limit or rate key holds another type (written by hand)
// goes to review, reason naming the key, and the claim serves the batch's
// other jobs. The claim takes its batch off the due index first, so
// failing at that key left every job of the batch pending in no index,
// never to run.
func TestForeignFlowKeyQuarantinesOneJobOfAClaim(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	p := ns + ":{" + q + "}:"
	limited, rated, rated2, plain := newJob(q, ""), newJob(q, ""), newJob(q, ""), newJob(q, "")
	limited.Flow = &ledger.Flow{LimitKey: "acct", LimitMax: 5}
	rated.Flow = &ledger.Flow{RateKey: "r", RateMax: 5, RatePer: time.Minute}
	rated2.Flow = &ledger.Flow{RateKey: "r2", RateMax: 5, RatePer: time.Minute}
	if _, err := l.Insert(ctx, []*ledger.NewJob{limited, rated, rated2, plain}); err != nil {
		t.Fatal(err)
	}
	rdb.Del(ctx, p+"limit:acct:holders")
	rdb.Set(ctx, p+"limit:acct:holders", "x", 0)
	rdb.HSet(ctx, p+"rate:r", "x", "y")
	rdb.RPush(ctx, p+"rate-per:r2", "x")
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != plain.ID {
		t.Fatalf("claim: %+v, %v; want %s claimed alone", r, err, plain.ID)
	}
	for _, j := range []*ledger.NewJob{limited, rated, rated2} {
		rec, err := l.Get(ctx, q, j.ID)
		if err != nil || rec.State != ledger.Review || rec.Reason != "corrupt flow control key: holds another type" {
			t.Fatalf("job %s (%+v): %+v, %v; want it in review, its flow key named", j.ID, j.Flow, rec, err)
		}
		if !slices.ContainsFunc(r.Dropped, func(d ledger.Dropped) bool { return d.ID == j.ID }) {
			t.Fatalf("claim's dropped %+v, want %s in it", r.Dropped, j.ID)
		}
	}
	review, err := l.IDs(ctx, q, ledger.Review, 0, 100)
	if err != nil || len(review) != 3 {
		t.Fatalf("review index %v (%v), want the three flow-controlled jobs", review, err)
	}
	running, err := l.IDs(ctx, q, ledger.Running, 0, 100)
	if err != nil || !slices.Equal(running, []string{plain.ID}) {
		t.Fatalf("running index %v (%v), want %s alone", running, err, plain.ID)
	}
}

// A completion batch whose jobs' limit keys hold another type (written by
// hand since their claim) applies whole: such a key holds no permit and no
// waiting job, so there is nothing to release or wake. Failing there left
// every job of the batch finished in its record but running in the index.
func TestForeignLimitKeyFailsNoCompletion(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	p := ns + ":{" + q + "}:"
	plain, held, waited := newJob(q, ""), newJob(q, ""), newJob(q, "")
	held.Flow = &ledger.Flow{LimitKey: "acct", LimitMax: 5}
	waited.Flow = &ledger.Flow{LimitKey: "acct2", LimitMax: 5}
	js := []*ledger.NewJob{plain, held, waited}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 3 {
		t.Fatalf("claim: %+v, %v; want the three jobs", r, err)
	}
	rdb.Del(ctx, p+"limit:acct:holders")
	rdb.Set(ctx, p+"limit:acct:holders", "x", 0)
	rdb.Set(ctx, p+"limit:acct2:wait", "x", 0)
	var cs []ledger.Completion
	for _, c := range r.Jobs {
		cs = append(cs, ledger.Completion{ID: c.ID, Token: c.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}})
	}
	got, err := l.Complete(ctx, q, cs)
	if err != nil || len(got) != 3 || !got[0].Applied || !got[1].Applied || !got[2].Applied {
		t.Fatalf("complete: %+v, %v; want the three applied", got, err)
	}
	running, err := l.IDs(ctx, q, ledger.Running, 0, 100)
	if err != nil || len(running) != 0 {
		t.Fatalf("running index %v (%v), want it empty", running, err)
	}
	done, err := l.IDs(ctx, q, ledger.Succeeded, 0, 100)
	if err != nil || len(done) != 3 {
		t.Fatalf("succeeded index %v (%v), want the three jobs", done, err)
	}
	for _, j := range js {
		if s := stateOf(t, l, j); s != ledger.Succeeded {
			t.Fatalf("job %s: %s, want succeeded", j.ID, s)
		}
	}
}

// A claim taking the head of a group whose index holds another type
// (written by hand) serves its batch: such an index holds no job, so the
// group has no next head. The claim reads a group's index after taking its
// batch off the due index, so failing there stranded every job of it.
func TestForeignGroupKeyFailsNoClaim(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	var js []*ledger.NewJob
	for _, g := range []string{"g", "g", "h", ""} {
		j := newJob(q, "")
		j.Group = g
		js = append(js, j)
	}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	k := ns + ":{" + q + "}:group:g"
	rdb.Del(ctx, k)
	rdb.Set(ctx, k, "x", 0)
	r, err := l.Claim(ctx, q, "p", time.Minute, 10)
	if err != nil || len(r.Jobs) != 3 {
		t.Fatalf("claim: %+v, %v; want the heads of g and h and the plain job", r, err)
	}
	for _, j := range []*ledger.NewJob{js[0], js[2], js[3]} {
		if s := stateOf(t, l, j); s != ledger.Running {
			t.Fatalf("job %s of group %q: %s, want running", j.ID, j.Group, s)
		}
	}
	if n, err := rdb.HExists(ctx, ns+":{"+q+"}:groups", "g").Result(); err != nil || n {
		t.Fatalf("group g still has a head (%v), want it forgotten", err)
	}
}

// Cancelling a job parked on its limit, whose waiting index holds another
// type (written by hand), cancels it whole. The cancel moved the job's
// index entry first, so failing there left it cancelled in the index but
// pending in its record.
func TestForeignLimitKeyFailsNoCancel(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	first, parked := newJob(q, ""), newJob(q, "")
	first.Flow = &ledger.Flow{LimitKey: "acct", LimitMax: 1}
	parked.Flow = &ledger.Flow{LimitKey: "acct", LimitMax: 1}
	ins, err := l.Insert(ctx, []*ledger.NewJob{first, parked})
	if err != nil || !ins[1].Parked {
		t.Fatalf("enqueue: %v, %v; want the second parked", ins, err)
	}
	k := ns + ":{" + q + "}:limit:acct:wait"
	rdb.Del(ctx, k)
	rdb.Set(ctx, k, "x", 0)
	if st, err := l.Cancel(ctx, q, parked.ID, "op", "test"); err != nil || st != ledger.Cancelled {
		t.Fatalf("cancel: %s, %v; want cancelled", st, err)
	}
	if s := stateOf(t, l, parked); s != ledger.Cancelled {
		t.Fatalf("cancelled job's record: %s, want cancelled", s)
	}
	if ids, err := l.IDs(ctx, q, ledger.Cancelled, 0, 10); err != nil || !slices.Equal(ids, []string{parked.ID}) {
		t.Fatalf("cancelled index %v (%v), want %s", ids, err, parked.ID)
	}
}
