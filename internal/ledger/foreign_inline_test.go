package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/redis/go-redis/v9"
)

// A partition count change finding its queue's change list of another
// type (written by hand) fails with ErrForeignKey and changes nothing. It
// set the new count before failing at the list, so the change had no
// record, and a retry, finding the count set, recorded none either.
func TestForeignChangesKeyFailsSetPartitionsWhole(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	changes := ns + ":partitions:{" + ns + ":partitions}:changes:default"
	rdb.Set(ctx, changes, "x", 0)
	if _, err := l.SetPartitions(ctx, "default", 4, "operator:ada", "split"); !errors.Is(err, jobs.ErrForeignKey) {
		t.Fatalf("set partitions: %v, want ErrForeignKey", err)
	}
	if ps, err := l.PartitionsOf(ctx, "default"); err != nil || ps[0] != 1 {
		t.Fatalf("partitions %v (%v), want 1: nothing written", ps, err)
	}
	rdb.Del(ctx, changes)
	if _, err := l.SetPartitions(ctx, "default", 4, "operator:ada", "split"); err != nil {
		t.Fatal(err)
	}
	if cs, err := l.PartitionChanges(ctx, "default"); err != nil || len(cs) != 1 || cs[0].To != 4 {
		t.Fatalf("changes %+v (%v), want the change to 4 recorded", cs, err)
	}
}

// A schedule removal finding the removals list of another type fails with
// ErrForeignKey and keeps the schedule. It deleted the schedule before
// failing at the list, so the removal had no record.
func TestForeignRemovalsKeyFailsScheduleRemovalWhole(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	spec := jobs.ScheduleSpec{ID: "nightly", Schedule: "0 2 * * *", TimeZone: "UTC", Kind: "report", Queue: "default", CatchUp: "latest"}
	if _, err := l.RegisterSchedule(ctx, 10, spec); err != nil {
		t.Fatal(err)
	}
	removed := ns + ":{periodic}:removed"
	rdb.Set(ctx, removed, "x", 0)
	if _, err := l.RemoveSchedule(ctx, "nightly", "operator:ada", "retired"); !errors.Is(err, jobs.ErrForeignKey) {
		t.Fatalf("remove: %v, want ErrForeignKey", err)
	}
	if all, err := l.Schedules(ctx); err != nil || len(all) != 1 {
		t.Fatalf("schedules %+v (%v), want nightly kept", all, err)
	}
	rdb.Del(ctx, removed)
	if ok, err := l.RemoveSchedule(ctx, "nightly", "operator:ada", "retired"); err != nil || !ok {
		t.Fatalf("remove: %v, %v", ok, err)
	}
	if rs, err := l.ScheduleRemovals(ctx); err != nil || len(rs) != 1 || rs[0].ID != "nightly" {
		t.Fatalf("removals %+v (%v), want nightly's recorded", rs, err)
	}
}

// Reopening a settled workflow whose queue's open set or done index holds
// another type fails with ErrForeignKey and leaves it settled. It cleared
// the record's outcome before failing, so the workflow was neither open
// nor done: never settled again nor pruned, and a retry did nothing.
func TestForeignWorkflowIndexFailsReopenWhole(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	p := ns + ":{default}:"
	for _, foreign := range []string{"wf_open", "wf_done"} {
		t.Run(foreign, func(t *testing.T) {
			rdb.Del(ctx, p+"wf_open", p+"wf_done")
			rdb.HSet(ctx, p+"wf:w1", "final", "succeeded")
			if foreign == "wf_open" {
				rdb.ZAdd(ctx, p+"wf_done", redis.Z{Score: 1, Member: "w1"})
			}
			rdb.Set(ctx, p+foreign, "x", 0)
			if err := l.ReopenWorkflow(ctx, "default", "w1"); !errors.Is(err, jobs.ErrForeignKey) {
				t.Fatalf("reopen: %v, want ErrForeignKey", err)
			}
			if f, _ := rdb.HGet(ctx, p+"wf:w1", "final").Result(); f != "succeeded" {
				t.Fatalf("final %q, want the record left settled", f)
			}
			rdb.Del(ctx, p+foreign)
			if err := l.ReopenWorkflow(ctx, "default", "w1"); err != nil {
				t.Fatal(err)
			}
			if ok, _ := rdb.SIsMember(ctx, p+"wf_open", "w1").Result(); !ok {
				t.Fatal("the workflow is not open after its reopen")
			}
		})
	}
}

// Abandoning a workflow never committed, whose home queue's workflow
// index holds another type, fails with ErrForeignKey and writes no record.
// It wrote the record before failing at the index, and the next pass,
// finding it, cancelled the steps: a record in no index, never pruned.
func TestForeignWorkflowIndexFailsAbandonWhole(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	pa, pb := ns+":{a}:", ns+":{b}:"
	rdb.HSet(ctx, l.JobKey("b", "s1"), "step", "s1", "kind", "k", "state", string(ledger.Waiting))
	rdb.ZAdd(ctx, pb+"wf_parts", redis.Z{Score: 1, Member: "w1"})
	rdb.HSet(ctx, pb+"wf_part", "w1", `{"home":"a","ids":["s1"]}`)
	rdb.Set(ctx, pa+"workflows", "x", 0)
	if _, err := l.AbandonUncommitted(ctx, []string{"b"}, time.Now()); !errors.Is(err, jobs.ErrForeignKey) {
		t.Fatalf("abandon: %v, want ErrForeignKey", err)
	}
	if n, _ := rdb.Exists(ctx, pa+"wf:w1").Result(); n != 0 {
		t.Fatal("a record was written for the workflow")
	}
}

// CheckQueueKeys names each queue-level key of another type, and passes
// queues whose keys are missing or of their types.
func TestCheckQueueKeysNamesForeignKeys(t *testing.T) {
	ctx := context.Background()
	rdb, ns := redistest.New(t)
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	if _, err := l.Insert(ctx, []*ledger.NewJob{newJob("default", "")}); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckQueueKeys(ctx, "default", "empty"); err != nil {
		t.Fatalf("check: %v, want none", err)
	}
	stats := ns + ":{other}:stats"
	rdb.Set(ctx, stats, "x", 0)
	err := l.CheckQueueKeys(ctx, "default", "other")
	if !errors.Is(err, jobs.ErrForeignKey) || !strings.Contains(err.Error(), stats) {
		t.Fatalf("check: %v, want ErrForeignKey naming %s", err, stats)
	}
}
