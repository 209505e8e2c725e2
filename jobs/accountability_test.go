package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestSetPartitionsRecordsWhoAndWhy: a layout change names its operator
// and reason, checked before anything is written, and is recorded with the
// counts before and after, newest first, the newest MaxLayoutChanges kept.
func TestSetPartitionsRecordsWhoAndWhy(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	insp := c.Inspector()

	for _, bad := range []struct{ actor, note string }{
		{"", "why"}, {"  ", ""}, {"a\x1bb", ""}, {strings.Repeat("a", jobs.MaxActorLen+1), ""},
		{"alice", "bell\x07"}, {"alice", strings.Repeat("n", jobs.MaxNoteLen+1)},
	} {
		if _, err := c.SetPartitions(ctx, "orders", 3, bad.actor, bad.note); !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("SetPartitions by %q (%q) = %v, want ErrInvalid", bad.actor, bad.note, err)
		}
	}
	if lay, err := insp.Partitions(ctx, "orders"); err != nil || lay.Count != 1 {
		t.Fatalf("a refused change wrote the layout: %+v, %v", lay, err)
	}
	if qs, _ := insp.Queues(ctx); len(qs) != 0 {
		t.Fatalf("a refused change registered queues %v", qs)
	}
	if chs, err := insp.PartitionChanges(ctx, "orders"); err != nil || len(chs) != 0 {
		t.Fatalf("changes before any: %v, %v", chs, err)
	}
	if _, err := insp.PartitionChanges(ctx, "orders#1"); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("changes of a partition's name: %v", err)
	}

	before, err := insp.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if prev, err := c.SetPartitions(ctx, "orders", 3, " alice ", "split for the\tmonth end"); err != nil || prev != 1 {
		t.Fatalf("SetPartitions = %d, %v", prev, err)
	}
	if prev, err := c.SetPartitions(ctx, "orders", 3, "alice", "again"); err != nil || prev != 3 {
		t.Fatalf("SetPartitions to the same count = %d, %v", prev, err)
	}
	if prev, err := c.SetPartitions(ctx, "orders", 1, "bob", ""); err != nil || prev != 3 {
		t.Fatalf("SetPartitions back = %d, %v", prev, err)
	}
	after, err := insp.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	chs, err := insp.PartitionChanges(ctx, "orders")
	if err != nil || len(chs) != 2 {
		t.Fatalf("changes %+v, %v (the same count twice records nothing)", chs, err)
	}
	if chs[0].From != 3 || chs[0].To != 1 || chs[0].Actor != "operator:bob" || chs[0].Note != "" ||
		chs[1].From != 1 || chs[1].To != 3 || chs[1].Actor != "operator:alice" || chs[1].Note != "split for the\tmonth end" {
		t.Fatalf("changes %+v", chs)
	}
	for _, ch := range chs {
		if ch.At.Before(before.Truncate(time.Millisecond)) || ch.At.After(after) {
			t.Fatalf("change at %v, not within Redis's clock [%v, %v]", ch.At, before, after)
		}
	}
	if other, err := insp.PartitionChanges(ctx, "other"); err != nil || len(other) != 0 {
		t.Fatalf("another queue's changes: %v, %v", other, err)
	}

	for i := range jobs.MaxLayoutChanges + 5 {
		if _, err := c.SetPartitions(ctx, "orders", 2+i%2, "carol", ""); err != nil {
			t.Fatal(err)
		}
	}
	chs, err = insp.PartitionChanges(ctx, "orders")
	if err != nil || len(chs) != jobs.MaxLayoutChanges {
		t.Fatalf("%d changes kept, %v; want %d", len(chs), err, jobs.MaxLayoutChanges)
	}
	if chs[0].Actor != "operator:carol" || chs[0].From != 3 || chs[0].To != 2 {
		t.Fatalf("newest change %+v", chs[0])
	}
}

// TestRemoveScheduleRecordsWhoAndWhy: removing a schedule names its
// operator and reason, checked before anything is written, and the
// namespace keeps the newest MaxScheduleRemovals removals with the
// schedule's kind and queue.
func TestRemoveScheduleRecordsWhoAndWhy(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	t.Cleanup(func() { _ = c.Close() })
	insp := c.Inspector()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	spec := jobs.ScheduleSpec{ID: "nightly", Schedule: "0 2 * * *", TimeZone: "UTC", Kind: "report", Queue: "reports", CatchUp: "latest"}
	if _, err := l.RegisterSchedule(ctx, 1, spec); err != nil {
		t.Fatal(err)
	}

	for _, bad := range []struct{ actor, note string }{{"", "why"}, {"a\nb", ""}, {"alice", "nul\x00"}} {
		if _, err := c.RemoveSchedule(ctx, "nightly", bad.actor, bad.note); !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("RemoveSchedule by %q (%q) = %v, want ErrInvalid", bad.actor, bad.note, err)
		}
	}
	if _, err := insp.Schedule(ctx, "nightly"); err != nil {
		t.Fatalf("a refused removal removed the schedule: %v", err)
	}
	if rs, err := insp.ScheduleRemovals(ctx); err != nil || len(rs) != 0 {
		t.Fatalf("removals before any: %v, %v", rs, err)
	}

	before, err := insp.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.RemoveSchedule(ctx, "nightly", "alice", "report retired"); !ok || err != nil {
		t.Fatalf("RemoveSchedule = %v, %v", ok, err)
	}
	if ok, err := c.RemoveSchedule(ctx, "nightly", "alice", "again"); ok || err != nil {
		t.Fatalf("RemoveSchedule of a removed schedule = %v, %v", ok, err)
	}
	rs, err := insp.ScheduleRemovals(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatalf("removals %+v, %v (a removal that found nothing records nothing)", rs, err)
	}
	r := rs[0]
	if r.ID != "nightly" || r.Kind != "report" || r.Queue != "reports" || r.Actor != "operator:alice" || r.Note != "report retired" ||
		r.At.Before(before.Truncate(time.Millisecond)) {
		t.Fatalf("removal %+v (Redis time before: %v)", r, before)
	}

	for i := range jobs.MaxScheduleRemovals + 5 {
		s := spec
		s.ID = "s" + strings.Repeat("x", i%3) + string(rune('a'+i%26))
		if _, err := l.RegisterSchedule(ctx, 1, s); err != nil {
			t.Fatal(err)
		}
		if ok, err := c.RemoveSchedule(ctx, s.ID, "bob", ""); !ok || err != nil {
			t.Fatalf("RemoveSchedule(%s) = %v, %v", s.ID, ok, err)
		}
	}
	rs, err = insp.ScheduleRemovals(ctx)
	if err != nil || len(rs) != jobs.MaxScheduleRemovals {
		t.Fatalf("%d removals kept, %v; want %d", len(rs), err, jobs.MaxScheduleRemovals)
	}
	if rs[0].Actor != "operator:bob" || rs[len(rs)-1].ID == "nightly" {
		t.Fatalf("newest %+v, oldest kept %+v", rs[0], rs[len(rs)-1])
	}
}
