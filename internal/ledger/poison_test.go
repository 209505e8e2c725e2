package ledger_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
)

// A record whose token was overwritten with something that is not a token
// fences its own commit (reported stale, its current token read as 0) and
// nothing else: the other outcomes of the batch apply.
func TestCorruptTokenFencesOnlyItsOwnCommit(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	for _, bad := range []string{"abc", "-1", "99999999999999999999999", ""} {
		js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 3)
		if err != nil || len(r.Jobs) != 3 {
			t.Fatalf("claim: %+v, %v", r, err)
		}
		poisoned := r.Jobs[1].ID
		rdb.HSet(ctx, l.JobKey(q, poisoned), "token", bad)
		var cs []ledger.Completion
		for _, j := range r.Jobs {
			cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}})
		}
		out, err := l.Complete(ctx, q, cs)
		if err != nil || len(out) != 3 {
			t.Fatalf("token %q: complete: %+v, %v", bad, out, err)
		}
		for i, c := range out {
			switch {
			case r.Jobs[i].ID == poisoned && (c.Applied || c.Current != 0 || c.State != ledger.Running):
				t.Fatalf("token %q: the corrupt record's commit: %+v, want stale, running, current token 0", bad, c)
			case r.Jobs[i].ID != poisoned && (!c.Applied || c.State != ledger.Succeeded):
				t.Fatalf("token %q: job %d: %+v, want applied", bad, i, c)
			}
		}
	}
}

// A record whose count of put-backs for an unknown kind was overwritten
// with something that is not a number is put back all the same, its
// count read as 0, and the other outcomes of the batch apply.
func TestCorruptKindDefersFailsNoBatch(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err := l.Claim(ctx, q, "p", time.Minute, 3)
	if err != nil || len(r.Jobs) != 3 {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	poisoned := r.Jobs[1].ID
	rdb.HSet(ctx, l.JobKey(q, poisoned), "kind_defers", "abc")
	var cs []ledger.Completion
	for _, j := range r.Jobs {
		o := ledger.Outcome{To: ledger.Succeeded}
		if j.ID == poisoned {
			o = ledger.Outcome{Defer: true, UnknownKind: true, RetryIn: time.Second}
		}
		cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: o})
	}
	out, err := l.Complete(ctx, q, cs)
	if err != nil || len(out) != 3 {
		t.Fatalf("complete: %+v, %v", out, err)
	}
	for i, c := range out {
		if !c.Applied {
			t.Errorf("job %d: %+v, want applied", i, c)
		}
	}
	rec, err := l.Get(ctx, q, poisoned)
	if err != nil || rec.State != ledger.Pending || rec.KindDefers != 1 {
		t.Fatalf("the put-back job: %+v, %v; want pending, put back once", rec, err)
	}
}

// A record with any one field edited by hand to garbage (text where a
// number or token goes, digits beyond 2^64, a lone JSON brace, a flow
// field's prefix with nothing after it) fails neither the claim that
// takes it nor the completion of its batch: a failing script would leave
// the batch's other jobs taken off the due index with no pool running
// them. Each job is claimed or reported dropped.
func TestEditedFieldFailsNoClaimNorCompletion(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	fields := []string{"op", "resource", "timeout_ms", "kind_defers", "hist", "fence", "mark", "headers", "flow",
		"group", "run_at", "token", "created", "max_retries", "payload", "kind", "args", "wait", "lkey", "lmax",
		"rkey", "rmax", "rper", "wf", "cancel", "attempts"}
	values := []string{"abc", "", "-5", "1e400", "99999999999999999999999999", "18446744073709551616", "{", "L", "R", "\xff"}
	for _, f := range fields {
		for _, v := range values {
			js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
			if _, err := l.Insert(ctx, js); err != nil {
				t.Fatal(err)
			}
			rdb.HSet(ctx, l.JobKey(q, js[1].ID), f, v)
			r, err := l.Claim(ctx, q, "p", time.Minute, 3)
			if err != nil || len(r.Jobs)+len(r.Dropped) != 3 {
				t.Errorf("%s=%q: claim %+v, %v", f, v, r, err)
				continue
			}
			var cs []ledger.Completion
			for _, j := range r.Jobs {
				cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Pending, RetryIn: time.Hour}})
			}
			if out, err := l.Complete(ctx, q, cs); err != nil || len(out) != len(cs) {
				t.Errorf("%s=%q: complete %+v, %v", f, v, out, err)
			}
		}
	}
}

// A job key that holds another type than a hash (written by hand, or by
// something else) fails no batch: the claim, the completion, the renewal
// and the expiry serve the other jobs and put that one in review (a
// script's writes before an error stay: the claim had stranded the jobs it
// took off the due index), and the reads show it in review.
func TestForeignJobKeyFailsNoBatch(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	foreign := func(id string, kind string) {
		k := l.JobKey(q, id)
		rdb.Del(ctx, k)
		if kind == "string" {
			rdb.Set(ctx, k, "x", 0)
		} else {
			rdb.RPush(ctx, k, "x")
		}
	}
	wantReview := func(id string) {
		t.Helper()
		ids, err := l.IDs(ctx, q, ledger.Review, 0, 100)
		if err != nil || !slices.Contains(ids, id) {
			t.Fatalf("review index %v (%v), want %s in it", ids, err, id)
		}
		rs, err := l.List(ctx, q, ledger.Review, 0, 100)
		if err != nil {
			t.Fatalf("list review: %v", err)
		}
		found := false
		for _, r := range rs {
			found = found || r.ID == id && r.State == ledger.Review && strings.Contains(r.Reason, "holds no hash")
		}
		if !found {
			t.Fatalf("list review: %+v, want %s in review saying its key holds no hash", rs, id)
		}
		if r, err := l.Get(ctx, q, id); err != nil || r.State != ledger.Review {
			t.Fatalf("get %s: %+v, %v", id, r, err)
		}
		if _, err := l.History(ctx, q, id); err != nil {
			t.Fatalf("history %s: %v", id, err)
		}
	}

	// the claim
	js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	foreign(js[1].ID, "string")
	r, err := l.Claim(ctx, q, "p", time.Minute, 3)
	if err != nil || len(r.Jobs) != 2 || r.Jobs[0].ID == js[1].ID || r.Jobs[1].ID == js[1].ID {
		t.Fatalf("claim with a foreign key: %+v, %v; want the two other jobs", r, err)
	}
	if len(r.Dropped) != 1 || r.Dropped[0] != (ledger.Dropped{ID: js[1].ID, State: "corrupt"}) {
		t.Fatalf("dropped %+v, want %s as corrupt", r.Dropped, js[1].ID)
	}
	wantReview(js[1].ID)
	evs, err := l.Events(ctx, q, 10)
	if err != nil || len(evs) == 0 || evs[0].Type != "review" || evs[0].Job != js[1].ID {
		t.Fatalf("events %+v, %v; want a review event for %s", evs, err, js[1].ID)
	}

	// the renewal and the completion
	js = []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	r, err = l.Claim(ctx, q, "p", time.Minute, 3)
	if err != nil || len(r.Jobs) != 3 {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	foreign(r.Jobs[1].ID, "list")
	var as []ledger.Attempt
	var cs []ledger.Completion
	for _, j := range r.Jobs {
		as = append(as, ledger.Attempt{ID: j.ID, Token: j.Token})
		cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: ledger.Outcome{To: ledger.Succeeded}})
	}
	rn, err := l.Renew(ctx, q, time.Minute, as)
	if err != nil || len(rn) != 3 || rn[0].Status != ledger.Renewed || rn[1].Status != ledger.Lost || rn[2].Status != ledger.Renewed {
		t.Fatalf("renew with a foreign key: %+v, %v", rn, err)
	}
	out, err := l.Complete(ctx, q, cs)
	if err != nil || len(out) != 3 || !out[0].Applied || out[1].Applied || !out[2].Applied {
		t.Fatalf("complete with a foreign key: %+v, %v", out, err)
	}

	// the expiry (the foreign job still in the running index)
	js = []*ledger.NewJob{newJob(q, "")}
	if _, err := l.Insert(ctx, js); err != nil {
		t.Fatal(err)
	}
	if r, err = l.Claim(ctx, q, "p", time.Millisecond, 1); err != nil || len(r.Jobs) != 1 {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	rdb.HSet(ctx, l.JobKey(q, r.Jobs[0].ID), "deadline", "1") // expired
	rdb.ZAdd(ctx, l.StateKey(q, ledger.Running), redis.Z{Score: 1, Member: r.Jobs[0].ID})
	rdb.ZAdd(ctx, l.StateKey(q, ledger.Running), redis.Z{Score: 1, Member: cs[1].ID})
	ex, err := l.Expire(ctx, q, 0, 100)
	if err != nil || !slices.Contains(ex.Moved, r.Jobs[0].ID) || !slices.Equal(ex.Reviewed, []string{cs[1].ID}) {
		t.Fatalf("expire with a foreign key: %+v, %v", ex, err)
	}
	wantReview(cs[1].ID)
}

// An attempt count edited by hand to a number JSON cannot hold ("inf",
// "1e400", which Lua reads as infinity) fails no batch: the completion,
// the expiry of lapsed leases and a bridged redelivery that write the
// job's first history entries read it as any count (capped), so the
// batch's other jobs are served and the edited one gets its history.
func TestInfiniteAttemptsFailNoBatch(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	for _, bad := range []string{"inf", "1e400", "-inf"} {
		claim := func() (*ledger.ClaimResult, string) {
			t.Helper()
			js := []*ledger.NewJob{newJob(q, ""), newJob(q, ""), newJob(q, "")}
			if _, err := l.Insert(ctx, js); err != nil {
				t.Fatal(err)
			}
			r, err := l.Claim(ctx, q, "p", time.Minute, 3)
			if err != nil || len(r.Jobs) != 3 {
				t.Fatalf("claim: %+v, %v", r, err)
			}
			rdb.HSet(ctx, l.JobKey(q, r.Jobs[1].ID), "attempts", bad)
			return r, r.Jobs[1].ID
		}

		// the completion, each outcome that writes a history entry
		for _, o := range []ledger.Outcome{{To: ledger.Succeeded}, {To: ledger.Dead, Error: "x"},
			{To: ledger.Uncertain, Reason: "r"}, {To: ledger.Pending, RetryIn: time.Hour, Error: "e"},
			{Defer: true, UnknownKind: true, RetryIn: time.Hour}} {
			r, poisoned := claim()
			var cs []ledger.Completion
			for _, j := range r.Jobs {
				cs = append(cs, ledger.Completion{ID: j.ID, Token: j.Token, Outcome: o})
			}
			out, err := l.Complete(ctx, q, cs)
			if err != nil || len(out) != 3 {
				t.Fatalf("attempts %q, outcome %+v: complete %+v, %v", bad, o, out, err)
			}
			for i, c := range out {
				if !c.Applied {
					t.Errorf("attempts %q, outcome %+v: job %d not applied: %+v", bad, o, i, c)
				}
			}
			if _, err := l.History(ctx, q, poisoned); err != nil {
				t.Errorf("attempts %q: history: %v", bad, err)
			}
		}

		// the expiry of lapsed leases
		r, poisoned := claim()
		for _, j := range r.Jobs {
			rdb.HSet(ctx, l.JobKey(q, j.ID), "deadline", "1")
			rdb.ZAdd(ctx, l.StateKey(q, ledger.Running), redis.Z{Score: 1, Member: j.ID})
		}
		exp, err := l.Expire(ctx, q, 1, 100)
		if err != nil || len(exp.Moved) != 3 {
			t.Fatalf("attempts %q: expire %+v, %v; want the three jobs uncertain", bad, exp, err)
		}
		if _, err := l.History(ctx, q, poisoned); err != nil {
			t.Errorf("attempts %q: history: %v", bad, err)
		}

		// a bridged job's redelivery finding its lease lapsed
		id := "bridged-" + bad
		if _, err := l.ClaimDelivery(ctx, q, ledger.Delivery{ID: id, Kind: "email:send", Payload: []byte(`{}`),
			MaxRetries: 3, Owner: "asynq-1", TTL: time.Minute, Bridge: "asynq"}); err != nil {
			t.Fatal(err)
		}
		rdb.HSet(ctx, l.JobKey(q, id), "attempts", bad, "deadline", "1")
		if _, err := l.ClaimDelivery(ctx, q, ledger.Delivery{ID: id, Kind: "email:send", Payload: []byte(`{}`),
			MaxRetries: 3, Owner: "asynq-2", TTL: time.Minute, Bridge: "asynq"}); err != nil {
			t.Errorf("attempts %q: redelivery: %v", bad, err)
		}
	}
}

// A count on a job's record edited by hand to something that is not a
// whole number Redis can increment ("abc", "1e400", digits beyond 2^63)
// fails neither an operator's re-run (its run count), the reconciler's
// "look again later" (its tries) nor a bridged job's redelivery (its
// count of redeliveries): each reads the count as
// the readers do and writes the next one, whole, instead of failing after
// its history entry and event were written (the job could then never be
// re-run, and the reconciler would look at it again at once, forever).
func TestCorruptCountsFailNoResolution(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t, redistest.Options{}).Client()
	l := ledger.New(rdb, ledger.Config{Namespace: redistest.Namespace(t)})
	const q = "default"
	for _, bad := range []string{"abc", "1e400", "99999999999999999999", "1.5", ""} {
		js := []*ledger.NewJob{newJob(q, ""), newJob(q, "")}
		if _, err := l.Insert(ctx, js); err != nil {
			t.Fatal(err)
		}
		r, err := l.Claim(ctx, q, "p", time.Minute, 2)
		if err != nil || len(r.Jobs) != 2 {
			t.Fatalf("claim: %+v, %v", r, err)
		}
		out, err := l.Complete(ctx, q, []ledger.Completion{
			{ID: r.Jobs[0].ID, Token: r.Jobs[0].Token, Outcome: ledger.Outcome{To: ledger.Dead, Error: "x"}},
			{ID: r.Jobs[1].ID, Token: r.Jobs[1].Token, Outcome: ledger.Outcome{To: ledger.Uncertain, Reason: "r"}}})
		if err != nil || len(out) != 2 {
			t.Fatalf("complete: %+v, %v", out, err)
		}
		dead, uncertain := r.Jobs[0].ID, r.Jobs[1].ID
		rdb.HSet(ctx, l.JobKey(q, dead), "runs", bad)
		rdb.HSet(ctx, l.JobKey(q, uncertain), "reconcile_tries", bad)

		st, err := l.Decide(ctx, q, dead, ledger.Resolution{From: []ledger.State{ledger.Dead}, Decision: ledger.DecideRerun, Actor: "operator:ada"})
		if err != nil || st != ledger.Pending {
			t.Errorf("runs %q: re-run: %v, %v; want pending", bad, st, err)
		}
		if rec, err := l.Get(ctx, q, dead); err != nil || rec.State != ledger.Pending || rec.Runs < 1 {
			t.Errorf("runs %q: the re-run job: %+v, %v; want pending, on a run above 0", bad, rec, err)
		}

		st, err = l.Decide(ctx, q, uncertain, ledger.Resolution{Decision: ledger.DecideLater, Actor: "reconciler:p", Leader: 1, NextIn: time.Hour})
		if err != nil || st != ledger.Uncertain {
			t.Errorf("reconcile tries %q: later: %v, %v; want uncertain", bad, st, err)
		}
		if due, err := l.DueIDs(ctx, q, ledger.Uncertain, time.Now(), 10); err != nil || len(due) != 0 {
			t.Errorf("reconcile tries %q: uncertain jobs due now %v, %v; want the look an hour ahead", bad, due, err)
		}
		if rec, err := l.Get(ctx, q, uncertain); err != nil || rec.ReconcileTries < 1 {
			t.Errorf("reconcile tries %q: %+v, %v; want a try counted", bad, rec, err)
		}
		rdb.ZRem(ctx, l.StateKey(q, ledger.Uncertain), uncertain)

		// a bridged job's count of redeliveries, when its task is gone
		id := "bridged-" + bad
		dc, err := l.ClaimDelivery(ctx, q, ledger.Delivery{ID: id, Kind: "email:send", Payload: []byte(`{}`), MaxRetries: 3,
			Owner: "asynq-1", TTL: time.Minute, Bridge: "asynq", TaskQueue: "mail", TaskID: "task-1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Complete(ctx, q, []ledger.Completion{{ID: id, Token: dc.Claimed.Token,
			Outcome: ledger.Outcome{To: ledger.Pending, Error: "boom"}}}); err != nil {
			t.Fatal(err)
		}
		rdb.HSet(ctx, l.JobKey(q, id), "redeliveries", bad)
		us, _, err := l.Undelivered(ctx, q, 0, 100)
		for _, u := range us {
			if u.ID != id {
				continue
			}
			if task, ok, err := l.Redeliver(ctx, q, u, "mail", id); err != nil || !ok || task == "" {
				t.Errorf("redeliveries %q: redeliver %q, %v, %v; want a new task", bad, task, ok, err)
			}
		}
		if err != nil || len(us) == 0 {
			t.Fatalf("undelivered: %+v, %v", us, err)
		}
	}
}
