package ledger_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// A limit repair passing over a limit whose holders key holds another type
// (written by hand) ends the other limits' lost permits: such a key holds
// no permit. Failing at it kept the permits ended before it in the same
// call, and every later pass failed again.
func TestForeignHoldersKeyFailsNoLimitRepair(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	p := ns + ":{" + q + "}:"
	held, parked := newJob(q, ""), newJob(q, "")
	held.Flow = &ledger.Flow{LimitKey: "acct", LimitMax: 1}
	parked.Flow = &ledger.Flow{LimitKey: "acct", LimitMax: 1}
	if _, err := l.Insert(ctx, []*ledger.NewJob{held, parked}); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Claim(ctx, q, "p", time.Minute, 10); err != nil || len(r.Jobs) != 1 || r.Jobs[0].ID != held.ID {
		t.Fatalf("claim: %+v, %v; want %s alone", r, err, held.ID)
	}
	rdb.Del(ctx, l.JobKey(q, held.ID)) // its holder lost: the permit is held for ever
	rdb.HSet(ctx, p+"limits", "bad", "1")
	rdb.Set(ctx, p+"limit:bad:holders", "x", 0)
	n, err := l.RepairLimits(ctx, q)
	if err != nil || n != 1 {
		t.Fatalf("repair: %d, %v; want the lost permit ended", n, err)
	}
	if ids, err := l.IDs(ctx, q, ledger.Pending, 0, 100); err != nil || !slices.Contains(ids, parked.ID) {
		t.Fatalf("pending index %v (%v), want the parked job %s woken", ids, err, parked.ID)
	}
}

// A schedule registration finding the schedules set of another type
// (written by hand) fails with ErrForeignKey before its first write, so
// the registration after the key is fixed lists the schedule. It wrote the
// schedule's creation before failing at the set, and every later
// registration, finding it created, left it out of the set for good.
func TestForeignScheduleKeyFailsRegistrationWhole(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	spec := jobs.ScheduleSpec{ID: "nightly", Schedule: "0 2 * * *", TimeZone: "UTC", Kind: "report", Queue: "default", CatchUp: "latest"}
	set := ns + ":{periodic}:schedules"
	rdb.Set(ctx, set, "x", 0)
	if _, err := l.RegisterSchedule(ctx, 10, spec); !errors.Is(err, jobs.ErrForeignKey) {
		t.Fatalf("register: %v, want ErrForeignKey", err)
	}
	rdb.Del(ctx, set)
	if _, err := l.RegisterSchedule(ctx, 10, spec); err != nil {
		t.Fatal(err)
	}
	all, err := l.Schedules(ctx)
	if err != nil || len(all) != 1 || all[0].ID != "nightly" {
		t.Fatalf("schedules %+v (%v), want nightly listed", all, err)
	}
}

// A re-run of a workflow step cancelled by its dependency's failure, whose
// dependency set holds another type (written by hand), fails with
// ErrForeignKey and leaves the step cancelled. It wrote the step waiting
// before failing at the set, which left it waiting in the cancelled index,
// expiring with its retention.
func TestForeignWaitsKeyFailsStepRerunWhole(t *testing.T) {
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Retention: time.Hour})
	ctx := context.Background()
	w := wfGraph{deps: [][]int{{}, {0}}, queues: []string{"wa", "wa"}}.build("fw")
	if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	finishStep(t, l, w, 0, ledger.Dead)
	s1 := w.Steps[1].Job
	if s := stateOf(t, l, s1); s != ledger.Cancelled {
		t.Fatalf("s1 after its dependency died: %s, want cancelled", s)
	}
	waits := ns + ":{wa}:job:" + s1.ID + ":waits"
	rdb.Del(ctx, waits)
	rdb.Set(ctx, waits, "x", 0)
	_, err := l.Decide(ctx, s1.Queue, s1.ID, ledger.Resolution{From: []ledger.State{jobs.Cancelled}, Decision: ledger.DecideRerun, Actor: "operator:ada"})
	if !errors.Is(err, jobs.ErrForeignKey) {
		t.Fatalf("re-run: %v, want ErrForeignKey", err)
	}
	if s := stateOf(t, l, s1); s != ledger.Cancelled {
		t.Fatalf("s1 after a refused re-run: %s, want cancelled", s)
	}
	if ttl := rdb.PTTL(ctx, l.JobKey(s1.Queue, s1.ID)).Val(); ttl <= 0 {
		t.Fatalf("s1's record expiry %v after a refused re-run, want its retention kept", ttl)
	}
}

// A resume finding the queue's events list of another type (written by
// hand) fails with ErrForeignKey and leaves the queue paused. It removed
// the pause before failing at the event, so the caller was told it failed
// while the queue ran again, with no event saying who resumed it.
func TestForeignEventsKeyFailsResumeWhole(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	const q = "default"
	if _, err := l.PauseAs(ctx, q, "", "operator:ada", "maintenance"); err != nil {
		t.Fatal(err)
	}
	events := ns + ":{" + q + "}:events"
	rdb.Del(ctx, events)
	rdb.Set(ctx, events, "x", 0)
	if _, err := l.ResumeIf(ctx, q, "", "operator:ada", "done"); !errors.Is(err, jobs.ErrForeignKey) {
		t.Fatalf("resume: %v, want ErrForeignKey", err)
	}
	if p, err := l.Paused(ctx, q); err != nil || p == nil {
		t.Fatalf("paused: %+v, %v; want the queue still paused", p, err)
	}
}

// A rewind detected while the queue's events list holds another type
// (written by hand) is not recorded, and nothing of it is counted: the
// record and its count go together. rewind.lua counted the rewind before
// failing at the event, so the queue's rewinds counter said one more than
// its records, and each later detection of the same loss counted again.
func TestForeignEventsKeyCountsNoRewindUnrecorded(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t, redistest.Options{})
	rdb := srv.Client()
	ns := redistest.Namespace(t)
	const q = "default"
	l := ledger.New(rdb, ledger.Config{Namespace: ns, Name: "pool-a"})
	if _, err := l.Insert(ctx, []*ledger.NewJob{newJob(q, ""), newJob(q, "")}); err != nil {
		t.Fatal(err)
	}
	srv.Restart() // no persistence: every key is gone
	rdb.Set(ctx, ns+":{"+q+"}:events", "x", 0)
	if _, err := l.Claim(ctx, q, "pool-a", time.Minute, 1); err != nil { // nothing due: finds the loss
		t.Fatal(err)
	}
	recs, err := l.Rewinds(ctx, q)
	if err != nil || len(recs) != 0 {
		t.Fatalf("rewinds %+v (%v), want none recorded", recs, err)
	}
	if n, err := rdb.HGet(ctx, ns+":{"+q+"}:stats", "rewinds").Int(); err == nil && n != 0 {
		t.Fatalf("rewinds counted %d with no record, want 0", n)
	}
}

// A workflow enqueue refused at a queue-level key of another type (written
// by hand) is a refusal, matching ErrForeignKey, not an outcome unknown:
// nothing of it was written, and enqueueing it again once the key is
// removed creates it.
func TestForeignQueueKeyRefusesAWorkflow(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	w := wfGraph{deps: [][]int{{}, {0}}, queues: []string{"wq", "wq"}}.build("fq")
	stats := ns + ":{wq}:stats"
	rdb.Set(ctx, stats, "x", 0)
	_, _, err := l.EnqueueWorkflow(ctx, w)
	if !errors.Is(err, jobs.ErrForeignKey) || errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Fatalf("enqueue: %v; want ErrForeignKey, not an unknown outcome", err)
	}
	if n, err := rdb.Exists(ctx, l.JobKey("wq", w.Steps[0].Job.ID)).Result(); err != nil || n != 0 {
		t.Fatalf("a refused workflow wrote its step (%v)", err)
	}
	rdb.Del(ctx, stats)
	if _, _, err := l.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
}
