package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/redistest"
	"github.com/fencedq/fencedq/jobs"
)

// viaLossyProxy returns a client whose connections go through a proxy that
// can lose replies (go-redis's default options: it retries on network
// errors), an inspector reading Redis directly, and the proxy. The
// function library is loaded first, so a lost reply is a script's.
func viaLossyProxy(t *testing.T) (*jobs.Client, *jobs.Inspector, *redistest.Proxy) {
	t.Helper()
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	c := jobs.NewClient(p.Client(nil), jobs.Config{Namespace: ns})
	if _, err := c.Enqueue(context.Background(), rangeArgs{N: 0}, jobs.Queue("warm")); err != nil {
		t.Fatal(err)
	}
	return c, jobs.NewInspector(srv.Client(), jobs.Config{Namespace: ns}), p
}

func pendingIn(t *testing.T, in *jobs.Inspector, q string) int64 {
	t.Helper()
	counts, err := in.Counts(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return counts[jobs.Pending]
}

// TestEnqueueWhoseReplyIsLostIsNotSentAgain: an enqueue whose script ran
// but whose reply was lost fails with ErrEnqueueUnknown; it is not sent
// again behind the caller's back (whose second run found the first's job
// and reported the call's own job as deduplicated, success). Enqueuing
// again with the operation id finds the one job.
func TestEnqueueWhoseReplyIsLostIsNotSentAgain(t *testing.T) {
	c, in, p := viaLossyProxy(t)
	ctx := context.Background()

	lost := p.DropReply(`"n":7301`)
	if _, err := c.Enqueue(ctx, rangeArgs{N: 7301}, jobs.Queue("plain")); !errors.Is(err, jobs.ErrEnqueueUnknown) || errors.Is(err, jobs.ErrNotSent) {
		t.Errorf("Enqueue with a lost reply: %v, want ErrEnqueueUnknown (it was sent)", err)
	}
	<-lost
	if n := pendingIn(t, in, "plain"); n != 1 {
		t.Errorf("%d jobs pending after one enqueue, want 1", n)
	}

	lost = p.DropReply(`"n":7302`)
	if res, err := c.Enqueue(ctx, rangeArgs{N: 7302}, jobs.Queue("byop"), jobs.OperationID("op-7302")); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Errorf("Enqueue by operation id with a lost reply: %+v, %v; want ErrEnqueueUnknown", res, err)
	}
	<-lost
	res, err := c.Enqueue(ctx, rangeArgs{N: 7302}, jobs.Queue("byop"), jobs.OperationID("op-7302"))
	if err != nil || !res.Deduplicated {
		t.Errorf("Enqueue again by operation id: %+v, %v; want the first try's job", res, err)
	}
	if n := pendingIn(t, in, "byop"); n != 1 {
		t.Errorf("%d jobs pending in byop, want 1", n)
	}
}

// TestEnqueueManyWhoseReplyIsLostIsNotSentAgain: EnqueueMany over several
// queues (one pipeline of script calls) whose replies were lost fails
// with ErrEnqueueUnknown and wrote each job once.
func TestEnqueueManyWhoseReplyIsLostIsNotSentAgain(t *testing.T) {
	c, in, p := viaLossyProxy(t)
	ctx := context.Background()
	lost := p.DropReply(`"n":7311`, `"n":7312`)
	_, err := c.EnqueueMany(ctx, []jobs.Params{
		{Args: rangeArgs{N: 7311}, Options: []jobs.Option{jobs.Queue("a")}},
		{Args: rangeArgs{N: 7312}, Options: []jobs.Option{jobs.Queue("b")}},
	})
	if !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Errorf("EnqueueMany with lost replies: %v, want ErrEnqueueUnknown", err)
	}
	<-lost
	for _, q := range []string{"a", "b"} {
		if n := pendingIn(t, in, q); n != 1 {
			t.Errorf("%d jobs pending in %s, want 1", n, q)
		}
	}
}

// TestOperatorActionWhoseReplyIsLostDoesNotReportTheWrongState: an
// operator's cancel or pause whose reply was lost is not run again (the
// second run found its own work done: "wrong state", "already paused"):
// the call fails, and the action stands.
func TestOperatorActionWhoseReplyIsLostDoesNotReportTheWrongState(t *testing.T) {
	c, in, p := viaLossyProxy(t)
	ctx := context.Background()
	res, err := c.Enqueue(ctx, rangeArgs{N: 7321}, jobs.Queue("ops"))
	if err != nil {
		t.Fatal(err)
	}

	lost := p.DropReply("cancel-7321")
	if rec, err := c.Cancel(ctx, "ops", res.JobID, "alice", "cancel-7321"); err == nil || errors.Is(err, jobs.ErrWrongState) || errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("Cancel with a lost reply: %+v, %v; want a network error", rec, err)
	}
	<-lost
	if rec, err := in.Get(ctx, "ops", res.JobID); err != nil || rec.State != jobs.Cancelled {
		t.Errorf("job after the cancel: %+v, %v; want cancelled", rec, err)
	}

	lost = p.DropReply("pause-7321")
	if was, err := c.Pause(ctx, "ops", "alice", "pause-7321"); err == nil {
		t.Errorf("Pause with a lost reply: running before %v, no error; want a network error", was)
	}
	<-lost
	if pause, err := in.Paused(ctx, "ops"); err != nil || pause == nil {
		t.Errorf("queue after the pause: %+v, %v; want paused", pause, err)
	}
}

// TestEnqueueOutlivingTheReadTimeoutIsUnknown: an enqueue Redis ran but
// whose reply came after the client's ReadTimeout (held by the proxy) fails
// with ErrEnqueueUnknown, and enqueuing again with its operation id finds
// the one job.
func TestEnqueueOutlivingTheReadTimeoutIsUnknown(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	p := redistest.StartProxy(t, srv.Addr)
	ns := redistest.Namespace(t)
	c := jobs.NewClient(p.Client(&redis.Options{ReadTimeout: 300 * time.Millisecond}), jobs.Config{Namespace: ns})
	in := jobs.NewInspector(srv.Client(), jobs.Config{Namespace: ns})
	ctx := context.Background()
	if _, err := c.Enqueue(ctx, rangeArgs{N: 0}, jobs.Queue("warm")); err != nil {
		t.Fatal(err)
	}

	held := p.HoldReply(`"n":7331`)
	if res, err := c.Enqueue(ctx, rangeArgs{N: 7331}, jobs.Queue("slow"), jobs.OperationID("op-7331")); !errors.Is(err, jobs.ErrEnqueueUnknown) {
		t.Errorf("Enqueue past the read timeout: %+v, %v; want ErrEnqueueUnknown", res, err)
	}
	<-held
	res, err := c.Enqueue(ctx, rangeArgs{N: 7331}, jobs.Queue("slow"), jobs.OperationID("op-7331"))
	if err != nil || !res.Deduplicated {
		t.Errorf("Enqueue again by operation id: %+v, %v; want the first try's job", res, err)
	}
	if n := pendingIn(t, in, "slow"); n != 1 {
		t.Errorf("%d jobs pending in slow, want 1", n)
	}
}
