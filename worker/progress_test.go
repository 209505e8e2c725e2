package worker_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedq/fencedq/internal/jobstest"
	"github.com/fencedq/fencedq/internal/testsignal"
	"github.com/fencedq/fencedq/jobs"
	"github.com/fencedq/fencedq/worker"
)

type progressArgs struct{}

func (progressArgs) Kind() string { return "progress" }

// A pool's handler reports progress through its context; the job's record
// shows the last report, with the attempt that made it.
func TestHandlerReportsProgress(t *testing.T) {
	e := newEnv(t)
	p := e.pool(e.config())
	reported := make(chan error, 2)
	if err := worker.Register(p, jobs.WorkFunc[progressArgs](func(ctx context.Context, j *jobs.Job[progressArgs]) error {
		reported <- jobs.Progress(ctx, 1, 3, "step 1")
		reported <- jobs.Progress(ctx, 2, 3, "step 2")
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(progressArgs{})
	for range 2 {
		if err := <-reported; err != nil {
			t.Fatalf("Progress in a pool's handler: %v", err)
		}
	}
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	r, err := e.client.Inspector().Get(context.Background(), "default", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Progress == nil || r.Progress.Done != 2 || r.Progress.Total != 3 || r.Progress.Note != "step 2" ||
		r.Progress.Attempt != 1 || r.Progress.Token != r.Token {
		t.Fatalf("progress = %+v, want 2 of 3 by attempt 1 (token %d)", r.Progress, r.Token)
	}
}

// holdProgress holds the Redis call that carries a progress report with
// the note note until release is closed, after saying so on reached; sent
// is closed once Redis answered it, with reply.
type holdProgress struct {
	note                   string
	reached, release, sent chan struct{}
	reply                  any
}

func (h *holdProgress) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdProgress) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		held := h.hold([]redis.Cmder{cmd})
		if held != nil {
			ctx = context.WithoutCancel(ctx) // on the wire: cancelling the caller's context no longer stops it
		}
		err := next(ctx, cmd)
		if held != nil {
			h.answered(held)
		}
		return err
	}
}

func (h *holdProgress) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		held := h.hold(cmds)
		if held != nil {
			ctx = context.WithoutCancel(ctx)
		}
		err := next(ctx, cmds)
		if held != nil {
			h.answered(held)
		}
		return err
	}
}

// hold holds cmds if one carries the note, and returns that one.
func (h *holdProgress) hold(cmds []redis.Cmder) redis.Cmder {
	for _, cmd := range cmds {
		if slices.Contains(cmd.Args(), any(h.note)) {
			close(h.reached)
			<-h.release
			return cmd
		}
	}
	return nil
}

// answered keeps the reply to the held call cmd and closes sent.
func (h *holdProgress) answered(cmd redis.Cmder) {
	if c, ok := cmd.(interface{ Result() (any, error) }); ok {
		h.reply, _ = c.Result()
	}
	close(h.sent)
}

// TestProgressLandingAfterTheCommitWritesNothing: a progress report the
// handler started (in a goroutine) that reaches Redis only after the
// attempt's success is committed is refused by the fence (the job no
// longer runs under the attempt's token): the finished record keeps no
// report. (The call itself ends with the handler's context.)
func TestProgressLandingAfterTheCommitWritesNothing(t *testing.T) {
	e := newEnv(t)
	hook := &holdProgress{note: "late report", reached: make(chan struct{}), release: make(chan struct{}), sent: make(chan struct{})}
	e.rdb.(*redis.Client).AddHook(hook)
	p := e.pool(e.config())
	late := make(chan error, 1)
	if err := worker.Register(p, jobs.WorkFunc[progressArgs](func(ctx context.Context, j *jobs.Job[progressArgs]) error {
		go func() { late <- jobs.Progress(ctx, 1, 2, "late report") }()
		<-hook.reached // the report passed the attempt's checks and is on its way to Redis
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(progressArgs{})
	jobstest.WaitState(t, e.ledger, "default", res.JobID, jobs.Succeeded)
	close(hook.release)
	<-hook.sent
	if err := <-late; err == nil {
		t.Fatal("progress landing after the commit: no error")
	}
	if hook.reply != int64(0) {
		t.Fatalf("progress script reply %v (%T), want 0: refused, the job no longer runs under the token", hook.reply, hook.reply)
	}
	r, err := e.client.Inspector().Get(context.Background(), "default", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != jobs.Succeeded || r.Progress != nil {
		t.Fatalf("finished job after a late progress report: state %s, progress %+v; want succeeded with none", r.State, r.Progress)
	}
}

// TestPartitionedQueueProgressOutputAndMinutes: the handler of a job of a
// partitioned queue reports progress and records an output as any other
// (its attempt names the job's partition, which they accept); the output
// reads back by the queue's name and by the partition's, and the queue's
// per-minute counts (the dashboard's history) sum its partitions'.
func TestPartitionedQueueProgressOutputAndMinutes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.client.SetPartitions(ctx, "orders", 3, "alice", "month end"); err != nil {
		t.Fatal(err)
	}
	cfg := e.config()
	cfg.Queues = map[string]int{"orders": 1}
	p := e.pool(cfg)
	reported := make(chan error, 2)
	if err := worker.Register(p, jobs.WorkFunc[progressArgs](func(ctx context.Context, j *jobs.Job[progressArgs]) error {
		for _, err := range []error{jobs.Progress(ctx, 1, 1, "done"), jobs.RecordOutput(ctx, map[string]int{"n": 7})} {
			select {
			case reported <- err:
			default: // a retry's: the first attempt's are the ones checked
			}
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	e.start(p)
	res := e.enqueue(progressArgs{}, jobs.Queue("orders"))
	for range 2 {
		if err := <-reported; err != nil {
			t.Fatalf("a handler of partition %s: %v", res.Partition, err)
		}
	}
	rec := jobstest.WaitState(t, e.ledger, res.Partition, res.JobID, jobs.Succeeded)
	if rec.Attempts != 1 || rec.Progress == nil || rec.Progress.Note != "done" {
		t.Fatalf("record: %d attempt(s), progress %+v; want 1, done", rec.Attempts, rec.Progress)
	}
	in := e.client.Inspector()
	now, err := in.ServerTime(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"orders", res.Partition} {
		var out map[string]int
		if err := e.client.Output(ctx, q, res.JobID, &out); err != nil || out["n"] != 7 {
			t.Errorf("Output by %s: %v, %v; want n 7", q, out, err)
		}
		ms, err := in.Minutes(ctx, q, now.Add(-time.Hour), now.Add(time.Minute))
		succeeded := int64(0)
		for _, m := range ms {
			succeeded += m.Counts["succeeded"]
		}
		if err != nil || succeeded != 1 {
			t.Errorf("Minutes of %s: %+v, %v; want 1 succeeded", q, ms, err)
		}
	}
}

// TestProgressAfterTheLeaseWasLostIsStale: an attempt whose lease was lost
// (a newer attempt runs the job) and that reports progress with its
// cancelled context gets an error matching jobs.ErrStale, as documented,
// not only the context's error, and writes nothing.
func TestProgressAfterTheLeaseWasLostIsStale(t *testing.T) {
	e := newEnv(t)
	cfg := e.config()
	cfg.LeaseTTL = 300 * time.Millisecond
	cfg.Maintenance.Disabled = true
	p := e.pool(cfg)
	started := make(chan struct{})
	reported := make(chan error, 1)
	if err := worker.Register(p, jobs.WorkFunc[plainArgs](func(ctx context.Context, _ *jobs.Job[plainArgs]) error {
		close(started)
		<-ctx.Done()
		reported <- jobs.Progress(ctx, 1, 2, "woke up")
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	job := e.enqueue(plainArgs{})
	e.start(p)
	<-started
	// A newer attempt takes the job over, as after an expiry and a re-run.
	if err := e.rdb.HSet(context.Background(), e.ledger.JobKey("default", job.JobID), "token", "1").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reported:
		if !errors.Is(err, jobs.ErrStale) {
			t.Fatalf("progress after the lease was lost: %v, want jobs.ErrStale", err)
		}
	case <-time.After(testsignal.Timeout()):
		t.Fatal("the lost lease did not cancel the handler's context")
	}
	if rec, err := e.ledger.Get(context.Background(), "default", job.JobID); err != nil || rec.Progress != nil {
		t.Fatalf("progress %+v (%v): the stale attempt wrote it", rec.Progress, err)
	}
}
