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

type noteArgs struct{}

func (noteArgs) Kind() string { return "note" }

// TestOperatorNamesAndNotesRefuseControlCharacters: every operator action
// refuses an actor or a note carrying control characters (terminal
// escapes, a carriage return, NUL) or invalid UTF-8, with ErrInvalid and
// before anything is written; a note may hold line feeds and tabs.
func TestOperatorNamesAndNotesRefuseControlCharacters(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	ctx := context.Background()
	res, err := c.Enqueue(ctx, noteArgs{}, jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]func(actor, note string) error{
		"cancel":  func(a, n string) error { _, err := c.Cancel(ctx, "default", res.JobID, a, n); return err },
		"run-now": func(a, n string) error { _, err := c.RunNow(ctx, "default", res.JobID, a, n); return err },
		"pause":   func(a, n string) error { _, err := c.Pause(ctx, "default", a, n); return err },
		"resume":  func(a, n string) error { _, err := c.Resume(ctx, "default", a, n); return err },
		"resolve": func(a, n string) error {
			_, err := c.Resolve(ctx, "default", res.JobID, jobs.DecideRerun, a, n)
			return err
		},
	}
	bad := []struct{ actor, note string }{
		{"alice", "\x1b]0;pwned\a\x1b[2J"},
		{"alice", "a\rb"},
		{"alice", "nul\x00"},
		{"alice", "csi\u009b2J"},
		{"alice", "bad\xff"},
		{"al\x1b[2Jice", "x"},
		{"alice\nbob", "x"},
		{"alice\tbob", "x"},
		{"bad\xff", "x"},
	}
	for name, do := range actions {
		for _, b := range bad {
			if err := do(b.actor, b.note); !errors.Is(err, jobs.ErrInvalid) || !strings.Contains(err.Error(), "control characters") {
				t.Errorf("%s by %q with note %q: %v, want ErrInvalid naming the rule", name, b.actor, b.note, err)
			}
		}
	}
	in := c.Inspector()
	rec, err := in.Get(ctx, "default", res.JobID)
	if err != nil || rec.State != jobs.Pending {
		t.Fatalf("refused actions changed the job: %+v %v", rec, err)
	}
	if hist, err := in.History(ctx, "default", res.JobID); err != nil || len(hist) != 1 {
		t.Fatalf("refused actions were recorded: %+v %v", hist, err)
	}
	if p, err := in.Paused(ctx, "default"); err != nil || p != nil {
		t.Fatalf("a refused pause paused: %+v %v", p, err)
	}
	if _, err := c.Pause(ctx, "default", "  alice  ", "deploy\n\tstep 2"); err != nil {
		t.Fatalf("a note with a line feed and a tab: %v", err)
	}
	if p, err := in.Paused(ctx, "default"); err != nil || p == nil || p.Actor != "operator:alice" || p.Note != "deploy\n\tstep 2" {
		t.Fatalf("pause recorded %+v %v", p, err)
	}
}

// TestAPausedQueueIsListedWithoutJobs: pausing a queue that holds no job
// (nor ever did: a mistyped name) lists it, paused, among the queues, so
// the pause can be seen and undone; it stays listed after Resume.
func TestAPausedQueueIsListedWithoutJobs(t *testing.T) {
	rdb, ns := redistest.New(t)
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	ctx := context.Background()
	if qs, err := in.Queues(ctx); err != nil || len(qs) != 0 {
		t.Fatalf("queues of an empty namespace: %v %v", qs, err)
	}
	if changed, err := c.Pause(ctx, "typoq", "alice", "deploy"); err != nil || !changed {
		t.Fatalf("pause: %v %v", changed, err)
	}
	if qs, err := in.Queues(ctx); err != nil || len(qs) != 1 || qs[0] != "typoq" {
		t.Fatalf("queues after pausing an empty queue: %v %v, want [typoq]", qs, err)
	}
	if p, err := in.Paused(ctx, "typoq"); err != nil || p == nil || p.Actor != "operator:alice" {
		t.Fatalf("paused: %+v %v", p, err)
	}
	if changed, err := c.Resume(ctx, "typoq", "alice", ""); err != nil || !changed {
		t.Fatalf("resume: %v %v", changed, err)
	}
	if p, err := in.Paused(ctx, "typoq"); err != nil || p != nil {
		t.Fatalf("paused after resume: %+v %v", p, err)
	}
}

// TestASecondCancelOfARunningJobKeepsTheFirstRequest: the first operator
// to ask a running attempt to stop is the one whose request stopped it: a
// second cancel before the attempt ends is recorded in the history but
// does not take over the job's CancelledBy, nor the reason its retry ends
// cancelled with (as a workflow cancelled twice keeps its first operator).
func TestASecondCancelOfARunningJobKeepsTheFirstRequest(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	res, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("q"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.ClaimJob(ctx, "q", res.JobID, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "q", res.JobID, "alice", "wrong account"); err != nil {
		t.Fatal(err)
	}
	rec, err := c.Cancel(ctx, "q", res.JobID, "bob", "me too")
	if err != nil || rec.State != jobs.Running || rec.CancelledBy != "operator:alice" {
		t.Fatalf("second cancel: %+v, %v (want running, cancel requested by alice)", rec, err)
	}
	cs, err := l.Complete(ctx, "q", []ledger.Completion{{ID: res.JobID, Token: a.Token,
		Outcome: ledger.Outcome{To: jobs.Pending, Error: "context canceled", RetryIn: time.Second}}})
	if err != nil || !cs[0].Applied || cs[0].State != jobs.Cancelled {
		t.Fatalf("retry of the cancelled attempt: %+v, %v", cs, err)
	}
	rec, err = c.Inspector().Get(ctx, "q", res.JobID)
	if err != nil || rec.CancelledBy != "operator:alice" || rec.Reason != "cancelled by operator:alice" {
		t.Fatalf("after the attempt: %+v, %v (want cancelled by alice)", rec, err)
	}
	h, err := c.Inspector().History(ctx, "q", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	var who []string
	for _, e := range h {
		if e.Event == "cancel" {
			who = append(who, e.Actor+": "+e.Note)
		}
	}
	if strings.Join(who, ", ") != "operator:alice: wrong account, operator:bob: me too" {
		t.Fatalf("cancel entries: %q (want both requests, alice's first)", who)
	}
}
