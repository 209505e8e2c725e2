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

// TestCancelAndRunNowKeepToWhatWasSeen: a cancel or a run-now decided on a
// scheduled job applies only while the job is as the operator saw it. The
// job started running in between: both fail with ErrWrongState, saying
// what it was seen as and what it is now, and nothing is written (no stop
// requested, no history entry). A pending retry of a newer attempt is not
// the job seen either, unless any token is accepted.
func TestCancelAndRunNowKeepToWhatWasSeen(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	res, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("q"), jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	q, id := res.Queue, res.JobID
	seen, err := in.Get(ctx, q, id)
	if err != nil || seen.State != jobs.Pending {
		t.Fatalf("seen: %+v, %v", seen, err)
	}
	// The job starts running before the operator's click lands.
	a, err := l.ClaimJob(ctx, q, id, "w1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before, err := in.History(ctx, q, id)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(what string) {
		t.Helper()
		rec, err := in.Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		h, err := in.History(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != jobs.Running || rec.Token != a.Token || rec.CancelledBy != "" || len(h) != len(before) {
			t.Fatalf("after %s: %s token %d cancel %q, %d history entries (want running, token %d, no cancel, %d entries)",
				what, rec.State, rec.Token, rec.CancelledBy, len(h), a.Token, len(before))
		}
	}
	as := jobs.Seen{State: seen.State, Token: seen.Token}
	_, err = c.CancelSeen(ctx, q, id, as, "alice", "not needed")
	if !errors.Is(err, jobs.ErrWrongState) || !strings.Contains(err.Error(), "seen pending") || !strings.Contains(err.Error(), "now running") {
		t.Fatalf("cancel of the scheduled job seen: %v, want ErrWrongState from pending to running", err)
	}
	unchanged("the stale cancel")
	if _, err := c.CancelSeen(ctx, q, id, jobs.Seen{State: jobs.Pending, AnyToken: true}, "alice", "bulk"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("bulk cancel of pending jobs: %v, want ErrWrongState", err)
	}
	unchanged("the stale bulk cancel")
	if _, err := c.RunNowSeen(ctx, q, id, as, "alice", ""); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("run now of the scheduled job seen: %v, want ErrWrongState", err)
	}
	unchanged("the stale run-now")
	// States the action never takes, and unknown ones, are refused first.
	if _, err := c.CancelSeen(ctx, q, id, jobs.Seen{State: jobs.Dead}, "alice", "x"); !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("cancel seen dead: %v, want ErrWrongState", err)
	}
	if _, err := c.RunNowSeen(ctx, q, id, jobs.Seen{State: "sleeping"}, "alice", ""); !errors.Is(err, jobs.ErrInvalid) {
		t.Fatalf("run now seen sleeping: %v, want ErrInvalid", err)
	}
	unchanged("the refused calls")

	// The attempt fails and is retried later: pending again, but with the
	// attempt's token, not the one seen.
	cs, err := l.Complete(ctx, q, []ledger.Completion{{ID: id, Token: a.Token,
		Outcome: ledger.Outcome{To: jobs.Pending, Error: "busy", RetryIn: time.Hour}}})
	if err != nil || !cs[0].Applied {
		t.Fatalf("retry: %+v, %v", cs, err)
	}
	if _, err := c.RunNowSeen(ctx, q, id, as, "alice", ""); !errors.Is(err, jobs.ErrWrongState) || !strings.Contains(err.Error(), "token") {
		t.Fatalf("run now of the attempt seen: %v, want ErrWrongState naming the token", err)
	}
	if rec, err := in.Get(ctx, q, id); err != nil || !rec.RunAt.After(time.Now().Add(30*time.Minute)) {
		t.Fatalf("the stale run-now moved the retry: %+v, %v", rec, err)
	}
	// What is seen now applies.
	rec, err := c.RunNowSeen(ctx, q, id, jobs.Seen{State: jobs.Pending, Token: a.Token}, "alice", "")
	if err != nil || rec.State != jobs.Pending || rec.RunAt.After(time.Now().Add(time.Minute)) {
		t.Fatalf("run now of the retry seen: %+v, %v", rec, err)
	}
	if rec, err = c.CancelSeen(ctx, q, id, jobs.Seen{State: jobs.Pending, AnyToken: true}, "alice", "bulk"); err != nil || rec.State != jobs.Cancelled {
		t.Fatalf("bulk cancel of the pending retry: %+v, %v", rec, err)
	}
}

// TestSeenActionsRefuseAJobReRunSince: a job cancelled and re-run since the
// operator saw it is back in the state and with the token seen (no attempt
// was claimed in between), yet it moved on: another operator decided on
// it. A cancel, run-now or decision made on the page that showed it before
// fails with ErrWrongState and leaves the later operator's decision as it
// is; what is seen now applies.
func TestSeenActionsRefuseAJobReRunSince(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	in := c.Inspector()
	res, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("q"), jobs.Delay(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	q, id := res.Queue, res.JobID
	seenOf := func(r *jobs.Record) jobs.Seen { return jobs.Seen{State: r.State, Token: r.Token, Runs: r.Runs} }
	get := func() *jobs.Record {
		t.Helper()
		r, err := in.Get(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	history := func() int {
		t.Helper()
		h, err := in.History(ctx, q, id)
		if err != nil {
			t.Fatal(err)
		}
		return len(h)
	}
	page := get() // scheduled, never claimed
	if _, err := c.Cancel(ctx, q, id, "alice", "customer withdrew"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Resolve(ctx, q, id, jobs.DecideRerun, "bob", "customer asked again"); err != nil {
		t.Fatal(err)
	}
	// Pending and never claimed again, as on the page; bob's re-run stands.
	n := history()
	for name, act := range map[string]func() error{
		"cancel":  func() error { _, err := c.CancelSeen(ctx, q, id, seenOf(page), "carol", "stale page"); return err },
		"run now": func() error { _, err := c.RunNowSeen(ctx, q, id, seenOf(page), "carol", "stale page"); return err },
	} {
		if err := act(); !errors.Is(err, jobs.ErrWrongState) || !strings.Contains(err.Error(), "re-ran it since") {
			t.Fatalf("%s on the page shown before the re-run: %v, want ErrWrongState naming the re-run", name, err)
		}
	}
	if r := get(); r.State != jobs.Pending || history() != n {
		t.Fatalf("the stale actions wrote: %s, %d history entries (want pending, %d)", r.State, history(), n)
	}

	page = get() // pending after bob's re-run
	if _, err := c.CancelSeen(ctx, q, id, seenOf(page), "dave", "as seen"); err != nil {
		t.Fatalf("cancel of the job as seen now: %v", err)
	}
	cancelled := get()
	if _, err := c.Resolve(ctx, q, id, jobs.DecideRerun, "erin", "run it"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, q, id, "frank", "do not run"); err != nil {
		t.Fatal(err)
	}
	n = history()
	_, err = c.ResolveSeen(ctx, q, id, seenOf(cancelled), jobs.DecideRerun, "gina", "stale page")
	if !errors.Is(err, jobs.ErrWrongState) {
		t.Fatalf("re-run on the page shown before erin's re-run and frank's cancel: %v, want ErrWrongState", err)
	}
	if r := get(); r.State != jobs.Cancelled || r.Reason != "cancelled by operator:frank" || history() != n {
		t.Fatalf("frank's cancel was overridden: %s (%s), %d history entries (want %d)", r.State, r.Reason, history(), n)
	}
	if r, err := c.ResolveSeen(ctx, q, id, seenOf(get()), jobs.DecideRerun, "gina", "as seen"); err != nil || r.State != jobs.Pending {
		t.Fatalf("re-run of the job as seen now: %+v, %v", r, err)
	}
}
