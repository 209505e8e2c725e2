package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/namegen"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/lease"
)

// alphabet keeps the characters of s that the narrow names (namespaces,
// queues, schedule ids) allow, so generated names are accepted as well as
// refused.
func alphabet(s, extra string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(extra, r) {
			return r
		}
		return -1
	}, s)
}

// strip drops the runes of s that drop reports.
func strip(s string, drop func(rune) bool) string {
	return strings.Map(func(c rune) rune {
		if drop(c) {
			return -1
		}
		return c
	}, s)
}

// TestGeneratedNamesOnACluster drives every name a user gives (namespace,
// queue, kind, operation id, resource, schedule id), generated with hash-
// tag braces and separators in every position, through the entry points
// and the ledger on a three-master Redis Cluster: each name is refused at
// the entry point (ErrInvalid, nothing written) or every step works,
// never a CROSSSLOT at run time.
func TestGeneratedNamesOnACluster(t *testing.T) {
	cc := redistest.StartCluster(t).Client()
	ctx := context.Background()
	r := namegen.Rand(t)
	names := namegen.Names(r, 100, 6)
	crossslot := func(what string, err error) {
		t.Helper()
		if err != nil && strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("%s: %v", what, err)
		}
	}
	pick := func() string { return names[r.IntN(len(names))] }
	lives, refused := 0, 0

	for i, n := range names {
		ns := n
		if i%2 == 1 {
			ns = alphabet(n, "._:-")
		}
		if ns == "" {
			continue // the default namespace
		}
		if jobs.ValidateNamespace(ns) != nil {
			c := jobs.NewClient(cc, jobs.Config{Namespace: ns})
			if _, err := c.EnqueueRaw(ctx, "k", []byte(`{}`)); !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("namespace %q: %v, want ErrInvalid", ns, err)
			}
			continue
		}
		ns = fmt.Sprintf("%s-%d", ns, i) // fresh per name
		c := jobs.NewClient(cc, jobs.Config{Namespace: ns})
		l := ledger.New(cc, ledger.Config{Namespace: ns})
		in := c.Inspector()

		q := alphabet(pick(), "._:-")
		if i%3 == 0 {
			q = pick() // mostly refused
		}
		// Mostly names each rule accepts (operation ids keep their
		// braces), sometimes whatever was generated.
		kind, op, res := pick(), pick(), pick()
		if r.IntN(4) > 0 {
			kind = strip(kind, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) || c == '{' || c == '}' })
			op = strip(op, unicode.IsControl)
			res = strip(res, func(c rune) bool { return unicode.IsControl(c) || c == '{' || c == '}' })
		}
		op += "#" + ns
		valid := jobs.ValidateQueue(q) == nil && jobs.ValidateKind(kind) == nil &&
			jobs.ValidateOperationID(op) == nil && jobs.ValidateResource(res) == nil // Resource(""): refused
		got, err := c.EnqueueRaw(ctx, kind, []byte(`{"n":1}`), jobs.Queue(q), jobs.OperationID(op), jobs.Resource(res), jobs.Unchecked())
		crossslot("enqueue", err)
		if !valid {
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("queue %q, kind %q, op %q, resource %q: %v, want ErrInvalid", q, kind, op, res, err)
			}
			if qs, err := in.Queues(ctx); err != nil || len(qs) != 0 {
				t.Fatalf("a refused enqueue registered queues %v (%v)", qs, err)
			}
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("queue %q, kind %q, op %q, resource %q: %v", q, kind, op, res, err)
		}
		// The job's life, with the resource's lease.
		cl, err := l.Claim(ctx, q, "pool", time.Minute, 10)
		crossslot("claim", err)
		if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != got.JobID {
			t.Fatalf("claim on %q: %+v %v", q, cl, err)
		}
		lm := lease.NewManager(cc, lease.Config{Namespace: ns})
		ls, err := lm.Acquire(ctx, jobs.LeaseResource(got.JobID, res), "pool/"+got.JobID, time.Minute)
		crossslot("lease", err)
		if err != nil {
			t.Fatalf("lease on %q: %v", res, err)
		}
		if _, err := l.Renew(ctx, q, time.Minute, []ledger.Attempt{{ID: got.JobID, Token: cl.Jobs[0].Token}}); err != nil {
			crossslot("renew", err)
			t.Fatalf("renew: %v", err)
		}
		if _, err := l.Complete(ctx, q, []ledger.Completion{{ID: got.JobID, Token: cl.Jobs[0].Token,
			Outcome: ledger.Outcome{To: jobs.Succeeded, Reason: "done"}}}); err != nil {
			crossslot("complete", err)
			t.Fatalf("complete: %v", err)
		}
		if err := lm.Release(ctx, ls); err != nil {
			t.Fatalf("release: %v", err)
		}
		lives++
		if rec, err := in.FindByOperation(ctx, op); err != nil || rec.ID != got.JobID || rec.State != jobs.Succeeded || rec.Kind != kind {
			t.Fatalf("find %q: %+v %v", op, rec, err)
		}
		if _, err := in.History(ctx, q, got.JobID); err != nil {
			t.Fatalf("history: %v", err)
		}
		if ms, _, err := in.Search(ctx, string([]rune(op)[:len([]rune(op))/2+1]), true); err != nil || len(ms) == 0 {
			crossslot("search", err)
			t.Fatalf("search by the start of %q: %+v %v", op, ms, err)
		}
		// Operator actions on the queue and a scheduled job.
		later, err := c.EnqueueRaw(ctx, kind, []byte(`{"n":2}`), jobs.Queue(q), jobs.Delay(time.Hour), jobs.Unchecked())
		if err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"pause":  func() error { _, err := c.Pause(ctx, q, "alice", "n"); return err }(),
			"resume": func() error { _, err := c.Resume(ctx, q, "alice", "n"); return err }(),
			"cancel": func() error { _, err := c.Cancel(ctx, q, later.JobID, "alice", "n"); return err }(),
			"rerun": func() error {
				_, err := c.Resolve(ctx, q, later.JobID, jobs.DecideRerun, "alice", "n")
				return err
			}(),
		} {
			crossslot(what, err)
			if err != nil {
				t.Fatalf("%s on %q: %v", what, q, err)
			}
		}
		// A schedule of a generated id.
		sid := alphabet(pick(), "._-")
		if jobs.ValidateScheduleID(sid) != nil {
			if _, err := l.RegisterSchedule(ctx, 1, jobs.ScheduleSpec{ID: sid}); !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("schedule id %q: %v, want ErrInvalid", sid, err)
			}
			continue
		}
		tick := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := l.RegisterSchedule(ctx, 1, jobs.ScheduleSpec{ID: sid, Schedule: "@every 1h", Kind: kind, Queue: q}); err != nil {
			crossslot("schedule", err)
			t.Fatalf("schedule %q: %v", sid, err)
		}
		if err := l.RecordTicks(ctx, sid, 1, ledger.TickRecord{Cursor: tick, Next: tick.Add(time.Hour),
			Ticks: []jobs.Tick{{Time: tick, JobID: got.JobID, Queue: q}}}); err != nil {
			t.Fatalf("ticks of %q: %v", sid, err)
		}
		if ts, err := in.ScheduleTicks(ctx, sid, 5); err != nil || len(ts) != 1 {
			t.Fatalf("ticks of %q: %+v %v", sid, ts, err)
		}
	}
	t.Logf("%d jobs lived with generated names, %d enqueues refused", lives, refused)
	if lives < 5 || refused < 5 {
		t.Fatalf("%d lives, %d refusals: the generator does not cover both", lives, refused)
	}
}
