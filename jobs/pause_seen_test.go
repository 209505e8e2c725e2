package jobs_test

import (
	"context"
	"errors"
	"testing"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// ResumeSeen ends only the pause the operator saw: a queue resumed and
// paused again since (another incident) stays paused, on every partition,
// and the call fails with ErrWrongState. A pause recorded without an id
// (an earlier version's) is named by "".
func TestResumeSeenEndsOnlyThePauseSeen(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	ctx := context.Background()
	if _, err := c.SetPartitions(ctx, "q", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	paused := func() *jobs.Pause {
		t.Helper()
		p, err := in.Paused(ctx, "q")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := c.Pause(ctx, "q", "bob", "incident 1"); err != nil {
		t.Fatal(err)
	}
	first := paused()
	if first == nil || first.ID == "" {
		t.Fatalf("pause %+v: want an id", first)
	}
	// Someone resumes and pauses again for another incident.
	if _, err := c.Resume(ctx, "q", "bob", "fixed"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(ctx, "q", "carol", "incident 2"); err != nil {
		t.Fatal(err)
	}
	second := paused()
	if second == nil || second.ID == first.ID {
		t.Fatalf("second pause %+v: want a new id", second)
	}
	// A resume clicked on the first pause leaves the second in place.
	if _, err := c.ResumeSeen(ctx, "q", first.ID, "alice", "done"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("resume of the first pause: %v, want ErrWrongState", err)
	}
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	for _, n := range ledger.PartitionNames("q", 3) {
		if p, err := l.Paused(ctx, n); err != nil || p == nil || p.ID != second.ID {
			t.Fatalf("partition %s after the stale resume: %+v, %v; want the second pause", n, p, err)
		}
	}
	// The pause seen now ends.
	if changed, err := c.ResumeSeen(ctx, "q", second.ID, "alice", "done"); err != nil || !changed {
		t.Fatalf("resume of the second pause: %v, %v", changed, err)
	}
	if p := paused(); p != nil {
		t.Fatalf("still paused: %+v", p)
	}
	// A queue that runs: nothing to do, no error.
	if changed, err := c.ResumeSeen(ctx, "q", second.ID, "alice", "again"); err != nil || changed {
		t.Fatalf("resume of a running queue: %v, %v", changed, err)
	}

	// A pause recorded without an id is named by "".
	for _, n := range ledger.PartitionNames("q", 3) {
		if _, err := l.SetPaused(ctx, n, true, "operator:old", ""); err != nil {
			t.Fatal(err)
		}
	}
	if p := paused(); p == nil || p.ID != "" {
		t.Fatalf("pause without an id read as %+v", p)
	}
	if _, err := c.ResumeSeen(ctx, "q", second.ID, "alice", "x"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("resume naming another pause: %v, want ErrWrongState", err)
	}
	if changed, err := c.ResumeSeen(ctx, "q", "", "alice", "x"); err != nil || !changed || paused() != nil {
		t.Fatalf("resume of the pause without an id: %v, %v", changed, err)
	}
}

// Pause and Resume take a partition's name only when the queue has that
// partition (in its layout, or an earlier one still listed): a mistyped
// one fails with ErrInvalid and writes nothing, so it neither lists a
// phantom partition every pool then polls nor shows the queue paused.
func TestPauseRefusesAPartitionTheQueueDoesNotHave(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("plain")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPartitions(ctx, "parted", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	before, err := in.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	for _, bad := range []string{"plain#0", "plain#7", "parted#3", "parted#0.99", "nosuch#1"} {
		if _, err := c.Pause(ctx, bad, "bob", "typo"); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("pause of %s: %v, want ErrInvalid", bad, err)
		}
		if _, err := c.Resume(ctx, bad, "bob", "typo"); !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("resume of %s: %v, want ErrInvalid", bad, err)
		}
		if p, err := l.Paused(ctx, bad); err != nil || p != nil {
			t.Errorf("%s after a refused pause: %+v, %v", bad, p, err)
		}
	}
	for _, q := range []string{"plain", "parted"} {
		if p, err := in.Paused(ctx, q); err != nil || p != nil {
			t.Errorf("queue %s after refused pauses: %+v, %v", q, p, err)
		}
	}
	after, err := in.Queues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("queues %v after refused pauses, were %v", after, before)
	}
	var raw []string
	if raw, err = rdb.SMembers(ctx, ns+":queues").Result(); err != nil {
		t.Fatal(err)
	}
	for _, n := range raw {
		if n == "plain#7" || n == "plain#0" || n == "parted#3" || n == "nosuch#1" {
			t.Errorf("registry lists %s after a refused pause: %v", n, raw)
		}
	}
	// A partition the queue has is paused alone.
	part := ledger.PartitionNames("parted", 3)[1]
	if changed, err := c.Pause(ctx, part, "bob", "one master is slow"); err != nil || !changed {
		t.Fatalf("pause of partition %s: %v, %v", part, changed, err)
	}
	if p, err := l.Paused(ctx, part); err != nil || p == nil {
		t.Fatalf("partition %s after its pause: %+v, %v", part, p, err)
	}
}

// TestResumeSeenEndsThePauseSeenOnEveryPartition: a partition paused on
// its own (one incident) before its queue was paused (another) keeps the
// first pause, and the queue shows the second. Resuming the second ends it
// on every partition it holds, whichever order they come in, and leaves
// the partition's own pause in place: not an error after resuming some
// partitions and leaving the rest paused by the pause it meant to end.
func TestResumeSeenEndsThePauseSeenOnEveryPartition(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	in := c.Inspector()
	ctx := context.Background()
	if _, err := c.SetPartitions(ctx, "q", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	parts := ledger.PartitionNames("q", 3)
	if _, err := c.Pause(ctx, parts[1], "alice", "partition 1 only"); err != nil {
		t.Fatal(err)
	}
	own, err := l.Paused(ctx, parts[1])
	if err != nil || own == nil {
		t.Fatalf("partition pause: %+v, %v", own, err)
	}
	if _, err := c.Pause(ctx, "q", "bob", "the whole queue"); err != nil {
		t.Fatal(err)
	}
	whole, err := in.Paused(ctx, "q")
	if err != nil || whole == nil || whole.ID == own.ID {
		t.Fatalf("queue pause: %+v, %v", whole, err)
	}
	if changed, err := c.ResumeSeen(ctx, "q", whole.ID, "bob", "over"); err != nil || !changed {
		t.Fatalf("resume of the queue's pause: %v, %v (want it ended, no error)", changed, err)
	}
	for i, n := range parts {
		p, err := l.Paused(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 && (p == nil || p.ID != own.ID) || i != 1 && p != nil {
			t.Fatalf("partition %d after the resume: %+v (want only partition 1 paused, by its own pause)", i, p)
		}
	}
	if p, err := in.Paused(ctx, "q"); err != nil || p == nil || p.ID != own.ID {
		t.Fatalf("queue after the resume: %+v, %v (want the partition's pause shown)", p, err)
	}
	// The pause ended is not there to end again; the other one still is.
	if _, err := c.ResumeSeen(ctx, "q", whole.ID, "bob", "again"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("resume of the ended pause: %v, want ErrWrongState", err)
	}
	if changed, err := c.ResumeSeen(ctx, "q", own.ID, "alice", "done"); err != nil || !changed {
		t.Fatalf("resume of the partition's pause: %v, %v", changed, err)
	}
	if p, err := in.Paused(ctx, "q"); err != nil || p != nil {
		t.Fatalf("still paused: %+v, %v", p, err)
	}
}

// TestNewPartitionsTakeTheQueuesPause: the first partition paused on its
// own before its queue was keeps its own pause; the queue shows the pause
// holding the others, the partitions a layout change adds take that one
// too, and resuming it leaves only the first partition paused.
func TestNewPartitionsTakeTheQueuesPause(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	in := c.Inspector()
	ctx := context.Background()
	if _, err := c.SetPartitions(ctx, "q", 3, "test", ""); err != nil {
		t.Fatal(err)
	}
	parts := ledger.PartitionNames("q", 3)
	if _, err := c.Pause(ctx, parts[0], "alice", "partition 0 only"); err != nil {
		t.Fatal(err)
	}
	own, err := l.Paused(ctx, parts[0])
	if err != nil || own == nil {
		t.Fatalf("partition pause: %+v, %v", own, err)
	}
	if _, err := c.Pause(ctx, "q", "bob", "the whole queue"); err != nil {
		t.Fatal(err)
	}
	whole, err := l.Paused(ctx, parts[1])
	if err != nil || whole == nil || whole.ID == own.ID {
		t.Fatalf("queue pause on partition 1: %+v, %v", whole, err)
	}
	if p, err := in.Paused(ctx, "q"); err != nil || p == nil || p.ID != whole.ID {
		t.Fatalf("queue shows %+v, %v; want the queue's pause %s, not partition 0's %s", p, err, whole.ID, own.ID)
	}
	if _, err := c.SetPartitions(ctx, "q", 5, "test", "grow"); err != nil {
		t.Fatal(err)
	}
	all := append(ledger.PartitionNames("q", 5), parts...)
	for _, n := range all {
		p, err := l.Paused(ctx, n)
		want := whole.ID
		if n == parts[0] {
			want = own.ID
		}
		if err != nil || p == nil || p.ID != want {
			t.Fatalf("partition %s after the change: %+v, %v; want pause %s", n, p, err, want)
		}
	}
	if changed, err := c.ResumeSeen(ctx, "q", whole.ID, "bob", "over"); err != nil || !changed {
		t.Fatalf("resume of the queue's pause: %v, %v", changed, err)
	}
	for _, n := range all {
		p, err := l.Paused(ctx, n)
		if err != nil || (n == parts[0]) != (p != nil) {
			t.Fatalf("partition %s after the resume: %+v, %v (want only %s paused)", n, p, err, parts[0])
		}
	}
}
