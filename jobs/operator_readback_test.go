package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/fencedq/fencedq/internal/ledger"
	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// TestAnActionThatAppliedIsNotReportedFailed: an operator action whose
// write applied stands even when reading the job back afterwards fails (a
// connection lost, the caller's deadline passed): the call reports it done,
// with the job's queue, id and the state the action left it in, not an
// error that would tell the operator nothing happened (and a retry then
// fails with ErrWrongState, or a bulk action counts the job as not done).
func TestAnActionThatAppliedIsNotReportedFailed(t *testing.T) {
	rdb, ns := redistest.New(t)
	ctx := context.Background()
	c := jobs.NewClient(rdb, jobs.Config{Namespace: ns})
	l := ledger.New(rdb, ledger.Config{Namespace: ns})
	in := c.Inspector()
	enqueue := func() string {
		t.Helper()
		res, err := c.Enqueue(ctx, noteArgs{}, jobs.Queue("q"), jobs.Delay(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return res.JobID
	}
	scheduled, running, cancelled := enqueue(), enqueue(), enqueue()
	if _, err := l.ClaimJob(ctx, "q", running, "w1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, "q", cancelled, "alice", "withdrawn"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, id string
		act      func(id string) (*jobs.Record, error)
		want     jobs.State
	}{
		{"run now", scheduled, func(id string) (*jobs.Record, error) { return c.RunNow(ctx, "q", id, "alice", "waiting") }, jobs.Pending},
		{"cancel", scheduled, func(id string) (*jobs.Record, error) { return c.Cancel(ctx, "q", id, "alice", "withdrawn") }, jobs.Cancelled},
		{"cancel running", running, func(id string) (*jobs.Record, error) {
			return c.CancelSeen(ctx, "q", id, jobs.Seen{State: jobs.Running, AnyToken: true}, "alice", "stop")
		}, jobs.Running},
		{"re-run", cancelled, func(id string) (*jobs.Record, error) {
			return c.Resolve(ctx, "q", id, jobs.DecideRerun, "alice", "after all")
		}, jobs.Pending},
	}
	for _, tc := range cases {
		hook := &failRegistry{key: l.JobKey("q", tc.id), cmd: "hgetall"}
		rdb.AddHook(hook)
		hook.on.Store(true)
		rec, err := tc.act(tc.id)
		hook.on.Store(false)
		if err != nil || rec == nil || rec.ID != tc.id || rec.Queue != "q" || rec.State != tc.want {
			t.Fatalf("%s, the job unreadable afterwards: %+v, %v (want the job %s, no error)", tc.name, rec, err, tc.want)
		}
		got, err := in.Get(ctx, "q", tc.id)
		if err != nil || got.State != tc.want {
			t.Fatalf("%s: the job is %+v, %v (want %s)", tc.name, got, err, tc.want)
		}
	}
}
